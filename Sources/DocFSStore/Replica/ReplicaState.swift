import Dispatch
import Foundation
import DocFSProvider
import Synchronization

/// What a store with a remote keeps in memory for its sync: its outbox (`StoreOutbox`, a part of
/// its own), and what the sync engine reports (per-item errors, the status `docfs status`
/// shows). Temporary rows already replaced are forwarded by the tree (`TreeState.resolve`). A leaf lock: held for a few assignments, never
/// across I/O or another lock.
final class ReplicaState: Sendable {
    let link: RemoteLink
    /// The changes waiting for the server: their rows, counts and sequence numbers.
    let outbox: StoreOutbox
    private let rowErrors = Mutex<[Int64: String]>([:])
    private let observers = Mutex<[@Sendable ([ProviderChange]) -> Void]>([])
    private let status = Mutex<(@Sendable () -> String)?>(nil)

    /// Contents on demand (DocFSReplica's `ContentsOnDemand`: downloads, the cache limit, pins),
    /// handed over when the replica is opened; nil before that and after the store closes.
    private let onDemandHandler = Mutex<(any OnDemandHandler)?>(nil)
    var onDemand: (any OnDemandHandler)? { onDemandHandler.withLock { $0 } }
    func setOnDemand(_ handler: (any OnDemandHandler)?) { onDemandHandler.withLock { $0 = handler } }
    /// What watches files open for writing, whose incoming changes wait for the writer's close
    /// (DocFSReplica's `HeldWriters`, set once by `StoreReplica.watchOpenWriters`).
    let writerWatch = Mutex<(any OpenWriterWatch)?>(nil)
    var writers: (any OpenWriterWatch)? { writerWatch.withLock { $0 } }
    /// What decides a writer's conflicted copy (DocFSReplica's `WriterConflicts`), handed over by
    /// the engine when it starts and kept when it stops: a writer open then may still close over
    /// a newer version that arrived while it ran.
    let writerConflicts = Mutex<(any WriterConflictHandler)?>(nil)

    init(link: RemoteLink, pending: Int, pendingBytes: Int64, nextSeq: Int64) {
        self.link = link
        outbox = StoreOutbox(pending: pending, pendingBytes: pendingBytes, nextSeq: nextSeq)
    }

    /// The server's schema version at the engine's last connection (0: not known yet).
    let serverSchema = Atomic<Int>(0)

    func setError(_ message: String?, row: Int64) {
        rowErrors.withLock { $0[row] = message }
    }
    func error(of row: Int64) -> String? { rowErrors.withLock { $0.isEmpty ? nil : $0[row] } }
    func moveError(from old: Int64, to new: Int64) {
        rowErrors.withLock { if let e = $0.removeValue(forKey: old) { $0[new] = e } }
    }

    /// Conflicts met since the mount: per item (`user.docfs.conflict`), and the latest few in
    /// order for `docfs status`.
    private let conflicts = Mutex<(byRow: [Int64: String], recent: [String], count: Int)>(([:], [], 0))
    func noteConflict(_ message: String, row: Int64, summary: String) {
        conflicts.withLock { c in
            c.byRow[row] = message
            c.recent.append(summary)
            if c.recent.count > 10 { c.recent.removeFirst(c.recent.count - 10) }
            c.count += 1
        }
    }
    func conflict(of row: Int64) -> String? { conflicts.withLock { $0.byRow.isEmpty ? nil : $0.byRow[row] } }
    var conflictSummary: (count: Int, recent: [String]) { conflicts.withLock { ($0.count, $0.recent) } }

    func addObserver(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) { observers.withLock { $0.append(handler) } }
    func notify(_ changes: [ProviderChange]) {
        for handler in observers.withLock({ $0 }) { handler(changes) }
    }

    private let retry = Mutex<(@Sendable (Int64) -> Void)?>(nil)
    func setRetry(_ handler: (@Sendable (Int64) -> Void)?) { retry.withLock { $0 = handler } }
    func requestRetry(_ row: Int64) { retry.withLock { $0 }?(row) }

    func setStatus(_ handler: (@Sendable () -> String)?) { status.withLock { $0 = handler } }
    var statusJSON: String? { status.withLock { $0 }?() }
}
