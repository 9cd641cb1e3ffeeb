#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The write path every action shares: the writer lock, the journal entry of each action (records
// and a replica's outbox entries turned into journal changes), the batches that go from the
// journal to SQLite, and `synchronize()` for a power cut. The lock, journal and SQLite are the
// writer part's (`StoreWriter`); these say what memory and the contents do around them.
extension LocalStore {
    /// Runs an action under the writer lock. When it ends, the working set in memory is brought
    /// back under its limit (`TreeState.trim`): no action is between its reads and its update then.
    /// Freed pages go back to the system after the lock is let go (see `trimCache`).
    func write<T>(_ body: (DatabaseQueue) throws(ProviderError) -> T) throws(ProviderError) -> T {
        var trimmed = false
        defer { if trimmed { Self.releaseFreedMemory() } }
        return try writer.perform { () throws(ProviderError) -> T in
            // Trimmed also when the action failed: it may have read records into memory.
            defer { trimmed = tree.trimIfFull() }
            guard let database = writer.database else { throw ProviderError(.ioError, "store \(url.path) is closed") }
            return try body(database)
        }
    }

    /// Commits `records` (upserts) and `deletions` as one journal entry; every so many entries the
    /// batch goes to SQLite. A failed batch stays in the journal and is retried: the actions in it
    /// were already accepted.
    func commit(_ database: DatabaseQueue, saving records: [Record], deleting deletions: [Int64] = [],
                replicated: Bool = true, _ what: @autoclosure () -> String) throws(ProviderError) {
        var changes: [StoreJournal.Change] = []
        changes.reserveCapacity(deletions.count + records.count)
        for row in deletions { changes.append(.delete(row)) }
        for record in records { changes.append(.upsert(Schema.values(of: record))) }
        // A replica's outbox entries go in the same journal entry: applied together or not at all.
        let planned = replicated ? outbox.map { $0.plan(tree, saving: records, deleting: deletions) } : nil
        if let planned { changes.append(contentsOf: planned.changes) }
        try writer.append(changes, what())
        if let planned, planned.count > 0 { outbox?.didAppend(count: planned.count, bytes: planned.bytes) }
        writer.flushIfFull(database) { didFlush() }
    }

    /// Applies the journal's pending changes to SQLite (`StoreWriter.flush`). Call under the
    /// writer lock.
    func flushJournal(_ database: DatabaseQueue) throws(ProviderError) {
        try writer.flush(database) { didFlush() }
    }

    /// What memory pinned for a batch is in SQLite now.
    func didFlush() {
        tree.didFlush()
        outbox?.didFlush()
    }

    package func synchronize() async throws(ProviderError) {
        try synchronizeSync()
    }

    /// Makes everything committed so far survive a power cut: fsync of the content files written
    /// since the last call and of the store's directories, then a full WAL checkpoint.
    package func synchronizeSync() throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            let dirty = tree.takeDirty()
            do throws(ProviderError) {
                try contents.synchronize(dirty)
            } catch {
                tree.markDirty(dirty)
                throw error
            }
            try flushJournal(database)
            try writer.checkpoint(database)
        }
    }
}
