import Synchronization

/// Wakes the sync engine when an action adds to the outbox; a wait also ends after a timeout.
/// `signal` is called on the request path: one lock, no allocation when nobody waits.
final class WakeSignal: Sendable {
    private struct State {
        var signalled = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.signalled = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal (or at once if one came since the last wait), or after `timeout`.
    func wait(timeout: Duration) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { signal() }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.signalled { s.signalled = false; return true }
                s.waiter = c
                return false
            }
            if resumeNow { c.resume() }
        }
        timer.cancel()
        state.withLock { $0.signalled = false }
    }
}
