#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB
import Logging
import Synchronization

/// The write side of a store, a part `LocalStore` owns: the writer lock that serialises actions,
/// the SQLite connection they write through, the journal each action appends its row changes to
/// (`StoreJournal`), and the store's lock file (flock'ed while mounted, holds the mounting pid).
///
/// It knows journal changes and SQLite, not items: the store turns records into changes
/// (`LocalStore.commit`) and says what memory does once a batch is in SQLite (`flush`'s `applied`).
final class StoreWriter: @unchecked Sendable {
    /// Serialises actions (check, file moves, commit, memory update). Guards `database`, the
    /// journal and the lock file. Taken only through `perform` and `performIfIdle`.
    private let lock = Mutex<Void>(())
    /// nil once closed.
    private(set) var database: DatabaseQueue?
    /// Row changes not yet in SQLite.
    let journal: StoreJournal
    private var lockFD: Int32
    private let storePath: String
    private let logger: Logger

    init(storePath: String, database: DatabaseQueue, journal: StoreJournal, lockFD: Int32, logger: Logger) {
        self.storePath = storePath
        self.database = database
        self.journal = journal
        self.lockFD = lockFD
        self.logger = logger
    }

    // MARK: - The writer lock

    /// Runs `body` under the writer lock: one action (or close) at a time.
    func perform<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        try lock.withLock { _ throws(E) -> T in try body() }
    }

    /// Runs `body` under the writer lock if no action holds it; false (and `body` not run) if one does.
    func performIfIdle(_ body: () -> Void) -> Bool {
        lock.withLockIfAvailable { _ in body() } != nil
    }

    // MARK: - The store's lock

    /// Takes the store's lock (one mount per store) and writes this process's pid into it;
    /// answers its descriptor. Refused with `.busy` naming the holder's pid while another docfs
    /// has it.
    static func takeLock(storePath path: String) throws(ProviderError) -> Int32 {
        let lockPath = path + "/" + LocalStore.lockName
        let fd = sysOpen(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ProviderError.posix(errno, "store \(path): cannot open \(LocalStore.lockName)") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let err = errno
            var holder = "unknown"
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(fd, &buffer, buffer.count, 0)
            if count > 0 {
                let text = String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                if !text.isEmpty { holder = text }
            }
            sysClose(fd)
            if err == EWOULDBLOCK || err == EAGAIN {
                throw ProviderError(.busy, "store \(path) is already mounted by another docfs (pid \(holder))")
            }
            throw ProviderError.posix(err, "store \(path): cannot lock \(LocalStore.lockName)")
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        return fd
    }

    /// Lets go of a lock `takeLock` took, leaving the lock file as it was found (no stale pid).
    static func releaseLock(_ fd: Int32) {
        _ = ftruncate(fd, 0)
        sysClose(fd)
    }

    // MARK: - Journal and SQLite

    /// Appends one action's changes as one journal entry; `what` names the action in an error.
    func append(_ changes: [StoreJournal.Change], _ what: @autoclosure () -> String) throws(ProviderError) {
        do throws(ProviderError) {
            try journal.append(changes)
        } catch {
            throw ProviderError(error.code, "\(what()): \(error.reason)", errno: error.errnoOverride)
        }
    }

    /// After an append: when the batch is full it goes to SQLite; a failed batch stays in the
    /// journal and is retried (the actions in it were already accepted).
    func flushIfFull(_ database: DatabaseQueue, applied: () -> Void) {
        guard journal.shouldFlush else { return }
        do throws(ProviderError) { try flush(database, applied: applied) } catch {
            journal.flushFailed()
            logger.warning("store \(storePath): \(error.reason); the changes stay in the journal and are retried")
        }
    }

    /// Applies the journal's pending changes to SQLite in one transaction that records the
    /// journal's generation, then starts a new generation. `applied` runs once the batch is in
    /// SQLite (even if the journal's reset then fails). Call under the writer lock.
    func flush(_ database: DatabaseQueue, applied: () -> Void) throws(ProviderError) {
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
            throw Self.providerError(error, "apply \(changes.count) journal change(s) to \(LocalStore.databaseName)")
        } catch {
            throw ProviderError(.ioError, "apply \(changes.count) journal change(s) to \(LocalStore.databaseName): \(error)")
        }
        applied()
        try journal.didFlush()
    }

    /// `synchronize()`'s SQLite side, after `flush`: a full WAL checkpoint.
    func checkpoint(_ database: DatabaseQueue) throws(ProviderError) {
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

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? "\(error.resultCode)"
        }
        return "\(error)"
    }

    // MARK: - Closing

    /// A clean close, under the writer lock: the journal's batch goes to SQLite (`applied` as for
    /// `flush`), the store is marked cleanly shut down, the WAL truncated, the database closed and
    /// the store's lock released.
    func close(applied: () -> Void) {
        if let database {
            do {
                try flush(database, applied: applied)
                try database.inDatabase { db in
                    try Schema.setMeta(db, "cleanShutdown", "1")
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            } catch {
                logger.warning("store \(storePath): could not record a clean shutdown: \(Self.describe(error))")
            }
            do { try database.close() } catch {
                logger.warning("store \(storePath): closing the database: \(Self.describe(error))")
            }
            self.database = nil
        }
        if lockFD >= 0 {
            Self.releaseLock(lockFD)
            lockFD = -1
        }
    }

    /// For tests: drops the database and the lock the way a killed process would, without
    /// checkpointing or recording a clean shutdown. Under the writer lock.
    func abandon() {
        try? database?.close()
        database = nil
        if lockFD >= 0 { sysClose(lockFD); lockFD = -1 }
    }
}
