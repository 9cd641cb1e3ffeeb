import Dispatch
import Foundation
import DocFSProvider
import Synchronization

/// What a store with a remote keeps in memory for its sync: the outbox's counts, the next
/// sequence number, and what the sync engine reports (per-item errors, the status `docfs status`
/// shows). Temporary rows already replaced are forwarded by the tree (`TreeState.resolve`). A leaf lock: held for a few assignments, never
/// across I/O or another lock.
final class ReplicaState: Sendable {
    struct Counts: Sendable {
        var pending = 0
        var pendingBytes: Int64 = 0
        var nextSeq: Int64 = 1
    }

    let link: RemoteLink
    private let counts: Mutex<Counts>
    private let rowErrors = Mutex<[Int64: String]>([:])
    /// Rows with entries still only in the journal (SQLite's outbox answers for the others).
    private let recent = Mutex<Set<Int64>>([])
    private let observers = Mutex<[@Sendable ([ProviderChange]) -> Void]>([])
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)
    private let status = Mutex<(@Sendable () -> String)?>(nil)

    /// Contents on demand: downloads, the cache limit, pins.
    let onDemand: OnDemandContents
    /// Files open for writing, whose incoming changes wait for the writer's close.
    let writers = HeldWriters()

    init(link: RemoteLink, pending: Int, pendingBytes: Int64, nextSeq: Int64, pins: Set<Int64> = []) {
        self.link = link
        onDemand = OnDemandContents(pins: pins)
        counts = Mutex(Counts(pending: pending, pendingBytes: pendingBytes, nextSeq: nextSeq))
    }

    var current: Counts { counts.withLock { $0 } }

    /// Numbers `count` new entries; returns the first.
    func reserve(_ count: Int) -> Int64 {
        counts.withLock { c in
            let first = c.nextSeq
            c.nextSeq += Int64(count)
            return first
        }
    }

    func didAppend(count: Int, bytes: Int64) {
        counts.withLock { $0.pending += count; $0.pendingBytes += bytes }
        lastAppend.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        // Only an idle engine needs waking: a busy one reads the outbox again when it is done.
        if engineIdle.exchange(false, ordering: .acquiringAndReleasing) { wake.withLock { $0 }?() }
    }

    /// Set by the engine before it waits for work (`LocalStore.outboxIdle`).
    let engineIdle = Atomic<Bool>(false)
    /// When an action last added to the outbox (monotonic nanoseconds).
    let lastAppend = Atomic<UInt64>(0)
    /// The server's schema version at the engine's last connection (0: not known yet).
    let serverSchema = Atomic<Int>(0)

    func didComplete(count: Int, bytes: Int64) {
        counts.withLock { c in
            c.pending = max(0, c.pending - count)
            c.pendingBytes = max(0, c.pendingBytes - bytes)
        }
    }

    func noteRecent(_ row: Int64) { recent.withLock { _ = $0.insert(row) } }
    func isRecent(_ row: Int64) -> Bool { recent.withLock { $0.contains(row) } }
    func didFlush() { recent.withLock { $0.removeAll(keepingCapacity: true) } }


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

    func setWake(_ handler: (@Sendable () -> Void)?) { wake.withLock { $0 = handler } }
    func setStatus(_ handler: (@Sendable () -> String)?) { status.withLock { $0 = handler } }
    var statusJSON: String? { status.withLock { $0 }?() }
}
