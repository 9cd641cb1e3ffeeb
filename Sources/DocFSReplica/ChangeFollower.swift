import Foundation
import Logging
import Synchronization
import DocFSRemote

/// Follows the server's change log for the daemon: one connection LISTENs on the server's change
/// channel and wakes the catch-up at once when any replica commits a change; the catch-up also
/// runs every few seconds (every second while LISTEN is down), so that a lost notification or a
/// broken listening connection delays a change by at most that long. A notification is a hint
/// to look now, nothing more: positions come from the change log only.
final class ChangeFollower: Sendable {
    let incoming: IncomingSync
    let database: any ReplicaServer
    let logger: Logger
    let wake = WakeSignal()
    /// Signalled when the listening connection is (back) up: the server answers again, so the
    /// engine (its only waiter) retries at once instead of at the end of its backoff.
    let serverBack = WakeSignal()
    let listening = Atomic<Bool>(false)
    /// The last error of the catch-up (nil when the last one succeeded), for the status.
    let lastError = Mutex<String?>(nil)
    private let tasks = Mutex<[Task<Void, Never>]>([])

    static let pollWhileListening = Duration.seconds(5)
    static let pollWithoutListening = Duration.seconds(1)
    /// Retries of a server that went away stay this close together, so that a restart costs
    /// seconds, not the minute a doubling backoff reaches.
    static let longestBackoff = Duration.seconds(4)

    /// False with `--remote-listen none`: no LISTEN, the change log is read every second.
    let listens: Bool

    init(incoming: IncomingSync, database: any ReplicaServer, logger: Logger, listens: Bool = true) {
        self.listens = listens
        self.incoming = incoming
        self.database = database
        self.logger = logger
    }

    func start() {
        let follower = Task { await self.follow() }
        let listener = listens ? Task { await self.listen() } : nil
        tasks.withLock { $0 = [follower] + (listener.map { [$0] } ?? []) }
    }

    func stop() async {
        let running = tasks.withLock { t -> [Task<Void, Never>] in
            defer { t = [] }; return t
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    private func listen() async {
        var backoff = Duration.milliseconds(500)
        while !Task.isCancelled {
            do {
                try await database.followChanges(
                    listening: { [self] in
                        listening.store(true, ordering: .relaxed)
                        // Changes committed before LISTEN took effect are caught by this first wake.
                        wake.signal()
                        serverBack.signal()
                    },
                    notified: { [self] _ in
                        // A hint only: any role may NOTIFY this channel with any payload, so the
                        // position it carries is never used; the catch-up reads the change log.
                        wake.signal()
                    })
            } catch {}
            // It was up: the next attempt comes soon again.
            if listening.exchange(false, ordering: .relaxed) { backoff = .milliseconds(500) }
            guard !Task.isCancelled else { break }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, Self.longestBackoff)
        }
    }

    private func follow() async {
        var backoff = Duration.milliseconds(500)
        while !Task.isCancelled {
            do {
                try await incoming.catchUp()
                if lastError.withLock({ $0 }) != nil { logger.notice("sync: receiving changes from the server again") }
                lastError.withLock { $0 = nil }
                backoff = .milliseconds(500)
                await wake.wait(timeout: listening.load(ordering: .relaxed) ? Self.pollWhileListening : Self.pollWithoutListening)
            } catch is CancellationError {
                break
            } catch {
                let message = "\(error)"
                let changed = lastError.withLock { e -> Bool in
                    defer { e = message }; return e != message
                }
                if changed { logger.error("sync: cannot apply the server's changes: \(message) (retrying with backoff)") }
                // The listening connection coming back ends the wait early.
                await wake.wait(timeout: backoff)
                backoff = min(backoff * 2, Self.longestBackoff)
            }
        }
    }
}
