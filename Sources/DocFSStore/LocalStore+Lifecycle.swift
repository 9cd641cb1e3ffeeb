#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB
import Logging

// Opening a store (the lock, validation, journal recovery, migration, loading the tree into
// memory, cleaning leftovers) and closing it.
extension LocalStore {
    /// Opens a store for a mount: takes the store's lock, loads the tree into memory and cleans
    /// leftovers of an earlier run (staged files, content files without an item).
    public static func open(at url: URL, logger: Logger) throws -> LocalStore {
        let path = url.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ProviderError(.noSuchItem, "store \(path) does not exist (create it with `docfs init \(path)`)")
        }
        guard isDirectory.boolValue else {
            throw ProviderError(.notDirectory, "store \(path) is not a directory")
        }
        let databasePath = path + "/" + databaseName
        guard FileManager.default.fileExists(atPath: databasePath) else {
            throw ProviderError(.invalidArgument, "\(path) is not a docfs store (no \(databaseName); create one with `docfs init`)")
        }
        guard access(databasePath, R_OK | W_OK) == 0 else {
            throw ProviderError.posix(errno, "store \(path): cannot read and write \(databaseName)")
        }

        // The lock: one mount per store.
        let lockPath = path + "/" + lockName
        let fd = sysOpen(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ProviderError.posix(errno, "store \(path): cannot open \(lockName)") }
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
            throw ProviderError.posix(err, "store \(path): cannot lock \(lockName)")
        }
        var openedQueue: DatabaseQueue?
        do {
            let pid = "\(getpid())\n"
            _ = ftruncate(fd, 0)
            _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }

            var config = Configuration()
            config.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Truncate the WAL whenever SQLite restarts it after a checkpoint: its frames are
                // not block-aligned, so rewriting an old WAL from the start reads every block back
                // from disk first when it is no longer cached (5x slower deletes after a cache drop).
                try db.execute(sql: "PRAGMA journal_size_limit = 0")
                // One process owns the store while it is mounted (the flock on STORE/lock), so
                // SQLite need not lock the file around every transaction, and its WAL index can
                // live in memory instead of a shared-memory file.
                try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
            }
            let queue: DatabaseQueue
            do {
                queue = try DatabaseQueue(path: databasePath, configuration: config)
            } catch {
                throw ProviderError(.corruptFile, "store \(path): cannot open \(databaseName): \(Self.describe(error))")
            }
            openedQueue = queue
            let (loadedLayout, wasClean) = try Self.validate(queue, path: path)
            let recovery = try StoreJournal.recover(storePath: path, database: queue)
            if recovery.applied > 0 || recovery.discardedBytes > 0 {
                logger.notice("store \(path): applied \(recovery.applied) change(s) from the journal of an unclean shutdown\(recovery.discardedBytes > 0 ? "; \(recovery.discardedBytes) byte(s) of a torn last entry discarded" : "")")
            }
            try Self.migrateIfNeeded(queue, path: path, logger: logger)
            let tree = try Self.loadTree(queue, path: path)
            let journal = try StoreJournal(storePath: path, generation: recovery.nextGeneration)
            let store = LocalStore(url: url, layout: loadedLayout, database: queue, journal: journal, lockFD: fd, state: tree, logger: logger)
            openedQueue = nil
            try store.finishOpening(wasClean: wasClean)
            return store
        } catch {
            try? openedQueue?.close()
            _ = ftruncate(fd, 0)  // a refused open leaves the lock file as it found it (no stale pid)
            sysClose(fd)
            if let error = error as? ProviderError { throw error }
            throw ProviderError(.ioError, "store \(path): \(Self.describe(error))")
        }
    }

    /// A store of format 1 (made before owners and exact times) is brought to the current format
    /// once, after its journal was applied; one log line says so.
    static func migrateIfNeeded(_ queue: DatabaseQueue, path: String, logger: Logger?) throws {
        let migrated: Int?
        do {
            migrated = try queue.inDatabase { db in try Schema.migrate(db, owner: getuid(), group: getgid()) }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot migrate \(databaseName) to format \(formatVersion): \(describe(error))")
        }
        if let migrated {
            logger?.notice("store \(path): migrated \(migrated) item(s) from format 1 to format \(formatVersion) (exact times; owner \(getuid()), group \(getgid()) for every item)")
        }
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? "\(error.resultCode)"
        }
        return "\(error)"
    }

    /// Checks that the database is a docfs store of a known format, without changing it.
    private static func validate(_ queue: DatabaseQueue, path: String) throws -> (Layout, Bool) {
        do {
            return try queue.inDatabase { db -> (Layout, Bool) in
                guard try db.tableExists("meta"), try db.tableExists("item") else {
                    throw ProviderError(.corruptFile, "\(path) is not a docfs store: \(databaseName) has no docfs tables")
                }
                let format = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'format'")
                guard format == formatVersion || format == "1" else {
                    throw ProviderError(.corruptFile, "store \(path) has format \(format ?? "none"); this docfs reads formats 1 and \(formatVersion)")
                }
                let layout: Layout
                if let json = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'layout'") {
                    do { layout = try JSONDecoder().decode(Layout.self, from: Data(json.utf8)) } catch {
                        throw ProviderError(.corruptFile, "store \(path): the stored layout is unreadable: \(error)")
                    }
                } else {
                    layout = Layout()
                }
                let clean = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'cleanShutdown'") == "1"
                let roots = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item WHERE id IN (1, 2) AND kind = 1") ?? 0
                guard roots == 2 else {
                    throw ProviderError(.corruptFile, "store \(path) is damaged: its root or trash folder is missing (try `docfs check --repair`)")
                }
                return (layout, clean)
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(databaseName) is not a readable docfs database: \(describe(error))")
        }
    }

    private static func loadTree(_ queue: DatabaseQueue, path: String) throws -> TreeState {
        var tree = TreeState()
        do {
            try queue.inDatabase { db in
                let cursor = try Row.fetchCursor(db, sql: "SELECT \(Schema.columns) FROM item")
                while let row = try cursor.next() {
                    let record = Schema.record(from: row)
                    tree.records[record.row] = record
                }
                if try db.tableExists("xattr") {
                    let xattrs = try Row.fetchCursor(db, sql: "SELECT item, name, value FROM xattr")
                    while let row = try xattrs.next() {
                        tree.xattrs[row[0] as Int64, default: [:]][row[1] as String] = row[2] as Data
                    }
                }
                let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
                tree.nextRow = max(sequence, tree.records.keys.max() ?? 2) + 1
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot load items from \(databaseName): \(describe(error))")
        }
        // Children maps and counts.
        var orphans: [Int64] = []
        for (row, record) in tree.records {
            guard let parent = record.parent else { continue }
            guard tree.records[parent]?.item.isFolder == true else { orphans.append(row); continue }
            tree.children[parent, default: [:]][NameKey(record.item.filename)] = row
        }
        for row in orphans {
            // An item whose parent is gone: keep it reachable in the trash rather than lose it.
            tree.records[row]!.parent = trashRow
            tree.records[row]!.item.parentIdentifier = .trashContainer
            tree.records[row]!.needsSave = true
            var name = tree.records[row]!.item.filename
            if tree.children[trashRow]?[NameKey(name)] != nil { name = name + " " + String(row) }
            tree.records[row]!.item.filename = name
            tree.children[trashRow, default: [:]][NameKey(name)] = row
        }
        for (row, record) in tree.records where record.item.isFolder {
            let kids = tree.children[row] ?? [:]
            tree.records[row]!.item.childItemCount = kids.count
            tree.records[row]!.item.childFolderCount = kids.values.reduce(0) { $0 + (tree.records[$1]?.item.isFolder == true ? 1 : 0) }
        }
        return tree
    }

    /// After loading: WAL mode, cleanup of leftovers, mark the store as in use.
    private func finishOpening(wasClean: Bool) throws {
        let path = url.path
        guard let database else { return }
        try database.inDatabase { db in
            _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
        }
        // Staging leftovers: files a bridge staged but never imported.
        if !FileManager.default.fileExists(atPath: stagingPath) {
            try FileManager.default.createDirectory(atPath: stagingPath, withIntermediateDirectories: false)
        }
        let staged = try directoryEntries(stagingPath)
        for name in staged {
            removeTree(stagingPath + "/" + name)
        }
        if !staged.isEmpty {
            logger.notice("store \(path): removed \(staged.count) leftover staged file(s): \(staged.prefix(10).joined(separator: ", "))\(staged.count > 10 ? ", …" : "")")
        }
        // Contents: files without an item row (an import interrupted before its commit).
        if !FileManager.default.fileExists(atPath: contentsPath) {
            try FileManager.default.createDirectory(atPath: contentsPath, withIntermediateDirectories: false)
        }
        let contentNames = try directoryEntries(contentsPath)
        var present = Set<Int64>()
        var removed: [String] = []
        let fileRows: Set<Int64> = state.withLock { tree in
            Set(tree.records.values.lazy.filter { $0.item.kind == .file }.map(\.row))
        }
        for name in contentNames {
            if let row = Int64(name), String(row) == name, fileRows.contains(row) {
                present.insert(row)
            } else {
                removeTree(contentsPath + "/" + name)
                removed.append(name)
            }
        }
        if !removed.isEmpty {
            logger.notice("store \(path): removed \(removed.count) content file(s) with no item: \(removed.prefix(10).joined(separator: ", "))\(removed.count > 10 ? ", …" : "")")
        }
        let missing = fileRows.subtracting(present)
        if !missing.isEmpty {
            logger.warning("store \(path): \(missing.count) file item(s) have no contents (ids \(missing.sorted().prefix(10).map(String.init).joined(separator: ", "))); they read as empty")
        }
        // After a crash, trust the content files for sizes (a modify may have landed without its row).
        var fixes: [Record] = []
        if !wasClean {
            state.withLock { tree in
                for row in present {
                    guard case .success(let status) = fileStatus(self.contentPath(row)) else { continue }
                    if tree.records[row]!.item.documentSize != status.size {
                        tree.records[row]!.item.documentSize = status.size
                        tree.records[row]!.item.itemVersion.contentVersion += 1
                        tree.records[row]!.item.itemVersion.metadataVersion += 1
                        fixes.append(tree.records[row]!)
                    }
                }
                for (row, record) in tree.records where record.needsSave {
                    tree.records[row]!.needsSave = false
                    fixes.append(tree.records[row]!)
                }
            }
            if !fixes.isEmpty {
                logger.notice("store \(path): after an unclean shutdown, corrected \(fixes.count) item(s) to match their contents")
            }
        } else {
            state.withLock { tree in
                for (row, record) in tree.records where record.needsSave {
                    tree.records[row]!.needsSave = false
                    fixes.append(tree.records[row]!)
                }
            }
        }
        let fixesToSave = fixes
        try database.inDatabase { db in
            try db.inTransaction {
                for record in fixesToSave { try Schema.upsert(db, record) }
                try Schema.createXattrTable(db)
                try Schema.setMeta(db, "cleanShutdown", "0")
                return .commit
            }
        }
        logger.info("store \(path) opened: \(state.withLock { $0.records.count }) items")
        if let fault = FaultInjection.describeArmed() { logger.warning("\(fault)") }
    }

    /// Releases the lock and closes the database. Later actions fail; reads answer from memory.
    public func close() {
        writer.lock()
        defer { writer.unlock() }
        reaper.drain()
        if let database {
            do {
                try flushJournal(database)
                try database.inDatabase { db in
                    try Schema.setMeta(db, "cleanShutdown", "1")
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            } catch {
                logger.warning("store \(url.path): could not record a clean shutdown: \(Self.describe(error))")
            }
            do { try database.close() } catch {
                logger.warning("store \(url.path): closing the database: \(Self.describe(error))")
            }
            self.database = nil
        }
        if lockFD >= 0 {
            _ = ftruncate(lockFD, 0)
            sysClose(lockFD)
            lockFD = -1
        }
    }

    /// For tests: drops the database and the lock the way a killed process would, without
    /// checkpointing or recording a clean shutdown.
    func abandonForTesting() {
        writer.lock()
        defer { writer.unlock() }
        try? database?.close()
        database = nil
        if lockFD >= 0 { sysClose(lockFD); lockFD = -1 }
    }
}
