#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The write path every action shares: the writer lock, the journal entry of each action, the
// batches that go from the journal to SQLite, and `synchronize()` for a power cut.
extension LocalStore {
    /// Runs an action under the writer lock. When it ends, the working set in memory is brought
    /// back under its limit (`TreeState.trim`): no action is between its reads and its update then.
    func write<T>(_ body: (DatabaseQueue) throws(ProviderError) -> T) throws(ProviderError) -> T {
        writer._unsafeLock()
        defer { trimAndUnlockWriter() }
        guard let database else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        return try body(database)
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
        let outbox = replicated ? replica.map { plannedOutbox($0, saving: records, deleting: deletions) } : nil
        if let outbox { changes.append(contentsOf: outbox.changes) }
        do throws(ProviderError) {
            try journal.append(changes)
        } catch {
            throw ProviderError(error.code, "\(what()): \(error.reason)", errno: error.errnoOverride)
        }
        if let outbox, outbox.count > 0 { replica?.didAppend(count: outbox.count, bytes: outbox.bytes) }
        if journal.shouldFlush {
            do throws(ProviderError) { try flushJournal(database) } catch {
                journal.flushFailed()
                logger.warning("store \(url.path): \(error.reason); the changes stay in the journal and are retried")
            }
        }
    }

    /// Applies the journal's pending changes to SQLite in one transaction that records the
    /// journal's generation, then starts a new generation. Call under the writer lock.
    func flushJournal(_ database: DatabaseQueue) throws(ProviderError) {
        let changes = journal.pending
        guard !changes.isEmpty else { return }
        let generation = journal.generation
        do {
            try database.inDatabase { db in
                try db.inTransaction {
                    try StoreJournal.apply(changes, db)
                    try Schema.setMeta(db, StoreJournal.generationKey, String(generation))
                    return .commit
                }
            }
        } catch let error as DatabaseError {
            throw Self.providerError(error, "apply \(changes.count) journal change(s) to \(Self.databaseName)")
        } catch {
            throw ProviderError(.ioError, "apply \(changes.count) journal change(s) to \(Self.databaseName): \(error)")
        }
        // What memory pinned for this batch is in SQLite now (even if the journal reset below fails).
        state.withLock { $0.didFlush() }
        replica?.didFlush()
        try journal.didFlush()
    }

    static func providerError(_ error: DatabaseError, _ what: String) -> ProviderError {
        let message = "\(what): \(error.message ?? "SQLite error \(error.resultCode.rawValue)")"
        switch error.resultCode {
        case .SQLITE_FULL: return ProviderError(.noSpace, message, errno: ENOSPC)
        case .SQLITE_READONLY: return ProviderError(.readOnly, message)
        case .SQLITE_CONSTRAINT: return ProviderError(.filenameCollision, message)
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: return ProviderError(.corruptFile, message)
        default: return ProviderError(.ioError, message)
        }
    }

    package func synchronize() async throws(ProviderError) {
        try synchronizeSync()
    }

    /// Makes everything committed so far survive a power cut: fsync of the content files written
    /// since the last call and of the store's directories, then a full WAL checkpoint.
    package func synchronizeSync() throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            let dirty = state.withLock { tree -> Set<Int64> in
                let dirty = tree.dirty
                tree.dirty.removeAll()
                return dirty
            }
            do throws(ProviderError) {
                try contents.synchronize(dirty)
            } catch {
                state.withLock { $0.dirty.formUnion(dirty) }
                throw error
            }
            try flushJournal(database)
            do {
                try database.inDatabase { db in
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(FULL)")
                }
            } catch let error as DatabaseError {
                throw Self.providerError(error, "synchronize the store database")
            } catch {
                throw ProviderError(.ioError, "synchronize the store database: \(error)")
            }
        }
    }
}
