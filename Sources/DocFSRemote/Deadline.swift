import Synchronization

/// Runs `body` and returns its result, or throws `timedOut()` once `timeout` has passed, or
/// `CancellationError` as soon as the caller is cancelled — without waiting for `body` to notice
/// (it is cancelled and left to end on its own).
///
/// A task group would not do: it waits for every child before it returns, and a postgres-nio call
/// whose server vanished mid-way (a connection being made, a query in flight) may not end for a
/// minute or more, which held a mount's shutdown for as long.
func withDeadline<T: Sendable>(
    _ timeout: Duration, timedOut: @escaping @Sendable () -> any Error,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = FirstOutcome<T>()
    let work = Task {
        do { outcome.finish(.success(try await body())) } catch { outcome.finish(.failure(error)) }
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        if !Task.isCancelled { outcome.finish(.failure(timedOut())) }
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { outcome.wait($0) }
    } onCancel: {
        outcome.finish(.failure(CancellationError()))
    }
}

/// The first of several outcomes, handed to one waiter whether it arrives before or after it.
private final class FirstOutcome<T: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<T, any Error>)
        case finished(Result<T, any Error>)
        case delivered
    }
    private let state = Mutex<State>(.empty)

    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { s -> CheckedContinuation<T, any Error>? in
            switch s {
            case .empty:
                s = .finished(result)
                return nil
            case .waiting(let c):
                s = .delivered
                return c
            case .finished, .delivered:
                return nil
            }
        }
        waiter?.resume(with: result)
    }

    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let ready = state.withLock { s -> Result<T, any Error>? in
            if case .finished(let result) = s {
                s = .delivered
                return result
            }
            s = .waiting(continuation)
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }
}
