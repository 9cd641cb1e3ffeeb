import Dispatch
import Foundation
import DocFSProvider
import Synchronization

/// A replica's outbox, a part the store owns (through `ReplicaState.outbox`; a store of its own
/// has none): the changes the sync engine sends to the server, in order. It plans the entries of
/// an action (`plan`, written by the store's commit in the same journal entry as the action's
/// rows), keeps their counts, the next sequence number and what the journal holds of them in
/// memory, wakes an idle engine, and reads, completes and drops its rows in SQLite
/// (`StoreOutbox+Rows`). The store's writer lock and journal flush come first for every SQLite
/// read or write (`StoreReplica+Outbox`); the locks here are leaves, held for a few assignments,
/// never across I/O or another lock.
final class StoreOutbox: Sendable {
    struct Counts: Sendable {
        var pending = 0
        var pendingBytes: Int64 = 0
        var nextSeq: Int64 = 1
    }

    private let counts: Mutex<Counts>
    /// Rows with entries still only in the journal (SQLite's outbox answers for the others).
    private let recent = Mutex<Set<Int64>>([])
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)
    /// Set by the engine before it waits for work (`idle()`).
    private let engineIdle = Atomic<Bool>(false)
    /// When an action last added to the outbox (monotonic nanoseconds).
    private let lastAppend = Atomic<UInt64>(0)

    init(pending: Int, pendingBytes: Int64, nextSeq: Int64) {
        counts = Mutex(Counts(pending: pending, pendingBytes: pendingBytes, nextSeq: nextSeq))
    }

    var current: Counts { counts.withLock { $0 } }

    // MARK: - Entries of an action

    /// The outbox rows of what a commit is about to write (the records' old values are still in
    /// memory then; new rows are at or past `nextRow`). Deletions first: a move that replaces an
    /// item frees the name before it takes it.
    func plan(
        _ tree: StoreTree, saving records: [Record], deleting deletions: [Int64]
    )
        -> (changes: [StoreJournal.Change], count: Int, bytes: Int64)
    {
        var planned: [OutboxPlanner.Planned] = []
        tree.reading { tree in
            for row in deletions {
                if let old = tree.records[row] { planned += OutboxPlanner.planDeletion(of: old) }
            }
            for record in records {
                let old = record.row >= tree.nextRow ? nil : tree.records[record.row]
                planned += OutboxPlanner.plan(old: old, new: record)
            }
        }
        guard !planned.isEmpty else { return ([], 0, 0) }
        var seq = reserve(planned.count)
        let now = FileTime.now().totalNanoseconds
        var changes: [StoreJournal.Change] = []
        var bytes: Int64 = 0
        for plan in planned {
            let entry = OutboxEntry(
                seq: seq, id: UUID(), kind: plan.kind, row: plan.row, parent: plan.parent,
                name: plan.name, bytes: plan.bytes, enqueuedNs: now, details: plan.details)
            changes.append(.outbox(Schema.values(of: entry)))
            noteRecent(plan.row)
            bytes += plan.bytes
            seq += 1
        }
        return (changes, planned.count, bytes)
    }

    /// Numbers `count` new entries; returns the first.
    func reserve(_ count: Int) -> Int64 {
        counts.withLock { c in
            let first = c.nextSeq
            c.nextSeq += Int64(count)
            return first
        }
    }

    /// The planned entries are in the journal: counted, and an idle engine woken.
    func didAppend(count: Int, bytes: Int64) {
        counts.withLock {
            $0.pending += count; $0.pendingBytes += bytes
        }
        lastAppend.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        // Only an idle engine needs waking: a busy one reads the outbox again when it is done.
        if engineIdle.exchange(false, ordering: .acquiringAndReleasing) { wake.withLock { $0 }?() }
    }

    /// Entries done with (completed, dropped) no longer count.
    func didComplete(count: Int, bytes: Int64) {
        counts.withLock { c in
            c.pending = max(0, c.pending - count)
            c.pendingBytes = max(0, c.pendingBytes - bytes)
        }
    }

    func noteRecent(_ row: Int64) { recent.withLock { _ = $0.insert(row) } }
    func isRecent(_ row: Int64) -> Bool { recent.withLock { $0.contains(row) } }
    /// The journal's batch is in SQLite: its entries are in the `outbox` table now.
    func didFlush() { recent.withLock { $0.removeAll(keepingCapacity: true) } }

    // MARK: - The engine's waiting

    func setWake(_ handler: (@Sendable () -> Void)?) { wake.withLock { $0 = handler } }

    /// The engine is about to wait for work: the next action that adds to the outbox wakes it.
    func idle() {
        engineIdle.store(true, ordering: .releasing)
    }

    /// How long ago an action last added to the outbox (nil: none since the mount).
    var quietFor: Duration? {
        let last = lastAppend.load(ordering: .relaxed)
        guard last > 0 else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        return .nanoseconds(Int64(now > last ? now - last : 0))
    }
}
