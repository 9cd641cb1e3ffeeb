#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB
import Logging

// Opening a store (the lock, validation, journal recovery, migration, the reader of the tree,
// cleaning leftovers) and closing it.
extension LocalStore {
    /// Opens a store for a mount: takes the store's lock and cleans leftovers of an earlier run
    /// (staged files; after an unclean shutdown, content files without an item). Nothing of the
    /// tree is loaded: reads fill a working set of at most `cacheItems` records (and as many
    /// folder index entries) from SQLite as they go.
    /// `smallFileLimit`: files imported with at most this many bytes go to a segment (0: none);
    /// `segmentSize`: when a new segment is started (tests make it small).
    package static func open(
        at url: URL, logger: Logger, cacheItems: Int? = nil, smallFileLimit: Int = 0,
        segmentSize: Int64 = ContentSegments.defaultSegmentLimit
    ) throws -> LocalStore {
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
        let fd = try StoreWriter.takeLock(storePath: path)
        var openedQueue: DatabaseQueue?
        do {
            var config = Configuration()
            config.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // Truncate the WAL whenever SQLite restarts it after a checkpoint: its frames are
                // not block-aligned, so rewriting an old WAL from the start reads every block back
                // from disk first when it is no longer cached (5x slower deletes after a cache drop).
                try db.execute(sql: "PRAGMA journal_size_limit = 0")
                // Not `locking_mode = EXCLUSIVE` (one process owns the store while it is mounted,
                // the flock on STORE/lock): the tree's reader (`TreeReader`) is a second connection,
                // which reads in WAL mode while this one writes a batch.
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
                logger.notice(
                    "store \(path): applied \(recovery.applied) change(s) from the journal of an unclean shutdown\(recovery.discardedBytes > 0 ? "; \(recovery.discardedBytes) byte(s) of a torn last entry discarded" : "")"
                )
            }
            try Self.migrateIfNeeded(queue, path: path, logger: logger)
            do {
                try queue.inDatabase { db in _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") }
            } catch {
                throw ProviderError(.corruptFile, "store \(path): cannot use WAL mode for \(databaseName): \(Self.describe(error))")
            }
            let reader: TreeReader
            do { reader = try TreeReader(path: databasePath) } catch {
                throw ProviderError(.corruptFile, "store \(path): cannot open \(databaseName) for reading: \(Self.describe(error))")
            }
            let tree = TreeState(reader: reader, cacheLimit: cacheItems ?? TreeState.defaultCacheItems)
            let replica = try Self.openReplica(queue, path: path)
            tree.nextRow = try Self.nextRow(queue, path: path)
            // The root and the trash stay in memory (never evicted), so they answer after close too.
            _ = tree.record(rootRow)
            _ = tree.record(trashRow)
            // A store that fits the working set is read whole now (one query; 8,000 items take a
            // few milliseconds), so its first walk needs no SQLite; a bigger one mounts at once.
            // (A replica's rows are not dense: its temporary ones start at 2^40, so it counts.)
            let items = replica == nil ? Int(tree.nextRow - 1) : reader.count("SELECT COUNT(*) FROM item")
            if items <= tree.cacheLimit { tree.preloadAll() }
            // New items of a replica get temporary rows until the server numbers them.
            if replica != nil { tree.nextRow = max(tree.nextRow, temporaryRowBase) }
            let journal: StoreJournal
            do { journal = try StoreJournal(storePath: path, generation: recovery.nextGeneration) } catch {
                reader.close()
                throw error
            }
            let segments: ContentSegments
            do { segments = try ContentSegments(directory: path + "/" + segmentsName, segmentLimit: segmentSize) } catch {
                reader.close()
                throw error
            }
            // Segments never for a replica, whose rows the server renumbers.
            let contents = StoreContents(store: url, segments: segments, smallFileLimit: replica == nil ? smallFileLimit : 0, logger: logger)
            let writer = StoreWriter(storePath: path, database: queue, journal: journal, lockFD: fd, logger: logger)
            let store = LocalStore(
                url: url, layout: loadedLayout, writer: writer, state: tree, logger: logger,
                replica: replica, contents: contents)
            openedQueue = nil
            try store.finishOpening(wasClean: wasClean)
            return store
        } catch {
            try? openedQueue?.close()
            StoreWriter.releaseLock(fd) // a refused open leaves the lock file as it found it (no stale pid)
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
            logger?.notice(
                "store \(path): migrated \(migrated) item(s) from format 1 to format \(formatVersion) (exact times; owner \(getuid()), group \(getgid()) for every item)"
            )
        }
        // Stores made before the tree was read from SQLite on demand lack the index that counts a
        // folder's subfolders; made once, in one statement.
        let indexed: Int?
        do {
            indexed = try queue.inDatabase { db in try Schema.addFolderIndex(db) }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot add the folder index to \(databaseName): \(describe(error))")
        }
        if let indexed {
            logger?.notice(
                "store \(path): added the index of folders by parent (\(indexed) folder(s)), so that the tree is read from \(databaseName) on demand instead of loaded whole at each mount"
            )
        }
        do {
            try queue.inDatabase { db in try Schema.addContentColumns(db) }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot add the columns of contents on demand to \(databaseName): \(describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String { StoreWriter.describe(error) }

    /// Checks that the database is a docfs store of a known format, without changing it.
    private static func validate(_ queue: DatabaseQueue, path: String) throws -> (Layout, Bool) {
        do {
            return try queue.inDatabase { db -> (Layout, Bool) in
                guard try db.tableExists("meta"), try db.tableExists("item") else {
                    throw ProviderError(.corruptFile, "\(path) is not a docfs store: \(databaseName) has no docfs tables")
                }
                let format = try Schema.meta(db, "format")
                guard format == formatVersion || format == "1" else {
                    throw ProviderError(.corruptFile, "store \(path) has format \(format ?? "none"); this docfs reads formats 1 and \(formatVersion)")
                }
                let layout: Layout
                if let json = try Schema.meta(db, "layout") {
                    do { layout = try JSONDecoder().decode(Layout.self, from: Data(json.utf8)) } catch {
                        throw ProviderError(.corruptFile, "store \(path): the stored layout is unreadable: \(error)")
                    }
                } else {
                    layout = Layout()
                }
                let clean = try Schema.meta(db, "cleanShutdown") == "1"
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

    /// A replica's state (`docfs init --remote` stored its server in `meta`): the outbox table
    /// (made if missing) and its counts. nil for a store of its own.
    private static func openReplica(_ queue: DatabaseQueue, path: String) throws -> ReplicaState? {
        do {
            return try queue.inDatabase { db -> ReplicaState? in
                guard let json = try Schema.meta(db, RemoteLink.metaKey) else {
                    return nil
                }
                let link = try JSONDecoder().decode(RemoteLink.self, from: Data(json.utf8))
                try Schema.createOutboxTable(db)
                let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), COALESCE(SUM(bytes), 0), COALESCE(MAX(seq), 0) FROM outbox")
                let count: Int = row?[0] ?? 0
                let bytes: Int64 = row?[1] ?? 0
                let last: Int64 = row?[2] ?? 0
                try Schema.createPinnedTable(db)
                return ReplicaState(link: link, pending: count, pendingBytes: bytes, nextSeq: last + 1)
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot read its remote and outbox: \(describe(error))")
        }
    }

    /// The server a store is a replica of (nil: a store of its own), read without opening the
    /// store, so that it works while the store is mounted (`docfs remote gc`).
    package static func remoteLink(at url: URL) throws -> RemoteLink? {
        var configuration = Configuration()
        configuration.readonly = true
        let path = url.path + "/" + databaseName
        guard FileManager.default.fileExists(atPath: path) else {
            throw ProviderError(.noSuchItem, "\(url.path) is not a docfs store (no \(databaseName))")
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? queue.close() }
        return try queue.read { db -> RemoteLink? in
            guard let json = try Schema.meta(db, RemoteLink.metaKey) else {
                return nil
            }
            return try JSONDecoder().decode(RemoteLink.self, from: Data(json.utf8))
        }
    }

    /// Makes a new store (`create`) a replica of a server: records where the server is and
    /// makes the outbox. Call before the store is first opened.
    /// `serverSchema`: the server's schema version as `docfs init` found it (hard links are taken
    /// from the first mount on when it keeps them, `StoreReplica+RemoteNames`).
    package static func linkRemote(at url: URL, _ link: RemoteLink, serverSchema: Int? = nil) throws {
        let queue = try DatabaseQueue(path: url.path + "/" + databaseName)
        defer { try? queue.close() }
        let json = String(decoding: try JSONEncoder().encode(link), as: UTF8.self)
        try queue.inDatabase { db in
            try db.inTransaction {
                try Schema.setMeta(db, RemoteLink.metaKey, json)
                if let serverSchema { try Schema.setMeta(db, StoreReplica.serverSchemaKey, String(serverSchema)) }
                try Schema.createOutboxTable(db)
                return .commit
            }
        }
    }

    /// The next identifier: past the sequence and the largest row (both in the primary key).
    private static func nextRow(_ queue: DatabaseQueue, path: String) throws -> Int64 {
        do {
            return try queue.inDatabase { db in
                let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
                let largest = try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM item") ?? 2
                return max(sequence, largest, 2) + 1
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot read the identifiers of \(databaseName): \(describe(error))")
        }
    }

    /// After opening: cleanup of leftovers, mark the store as in use.
    ///
    /// A clean shutdown (`close()`) leaves no content file without its item: the remover of
    /// deleted contents is drained first, and an import moves its file in only right before its
    /// commit. So only after an unclean shutdown are `contents/` and the file items compared (one
    /// pass over each, in bounded memory) and sizes taken from the content files; a clean open
    /// reads nothing of the tree, whatever its size.
    private func finishOpening(wasClean: Bool) throws {
        let path = url.path
        guard let database = writer.database else { return }
        try contents.prepare(database)
        var fixes: [Record] = []
        if !wasClean {
            fixes = try correctSizes(contents.reconcile(database))
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
        logger.info("store \(path) opened\(wasClean ? "" : " after an unclean shutdown")")
        if let fault = FaultInjection.describeArmed() { logger.warning("\(fault)") }
    }

    /// After an unclean shutdown: the file items whose recorded size is not their content
    /// file's (`StoreContents.reconcile`), corrected.
    private func correctSizes(_ fixes: [(row: Int64, size: Int64)]) -> [Record] {
        let path = url.path
        // The corrected records: each item as stored, with the content file's size and new versions.
        var corrected: [Record] = []
        for fix in fixes {
            let size = fix.size
            let mended: Record? = tree.update { tree in
                guard var record = tree.record(fix.row) else { return nil }
                record.item.documentSize = size
                record.item.itemVersion.contentVersion += 1
                record.item.itemVersion.metadataVersion += 1
                tree.replace(record)
                return record
            }
            if let mended { corrected.append(mended) }
        }
        if !corrected.isEmpty {
            logger.notice("store \(path): after an unclean shutdown, corrected \(corrected.count) item(s) to match their contents")
        }
        return corrected
    }

    /// Releases the lock and closes the database. Later actions fail; reads answer from memory.
    package func close() {
        writer.perform {
            contents.drain()
            tree.closeReader()
            writer.close { didFlush() }
            // Its contents on demand hold the store: let go of each other.
            replica?.setOnDemandHandler(nil)
        }
    }

    /// For tests: drops the database and the lock the way a killed process would, without
    /// checkpointing or recording a clean shutdown.
    func abandonForTesting() {
        writer.perform {
            tree.closeReader()
            writer.abandon()
        }
    }
}

// `docfs init`: making a new store directory, its database and the initial tree of the layout.
extension LocalStore {
    /// `docfs init`: makes a new store at `url`, which must be a new path or an empty directory.
    /// `folders: false` leaves out the layout's folders (a replica gets them from its server,
    /// under the server's identifiers).
    package static func create(at url: URL, layout: Layout?, folders: Bool = true) throws {
        let layout = layout ?? Layout()
        let path = url.path
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        let existed = fm.fileExists(atPath: path, isDirectory: &isDirectory)
        if existed {
            guard isDirectory.boolValue else {
                throw ProviderError(.filenameCollision, "cannot create store \(path): a file with that name exists")
            }
            let entries: [String]
            do { entries = try directoryEntries(path) } catch {
                throw ProviderError(error.code, "cannot create store \(path): \(error.reason)", errno: error.errnoOverride)
            }
            guard entries.isEmpty else {
                throw ProviderError(
                    .directoryNotEmpty,
                    "cannot create store \(path): the directory is not empty (\(entries.count) entries); give a new path or an empty directory")
            }
        } else {
            do {
                try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw ProviderError(.ioError, "cannot create store \(path): \(error.localizedDescription)")
            }
        }
        // Check the layout before writing anything.
        for folder in layout.folders {
            _ = try folder.folderCapabilities
            _ = try folder.contentsCapabilities
        }
        try ContentTypeTable.check(layout)
        do {
            try fm.createDirectory(atPath: path + "/" + contentsName, withIntermediateDirectories: false)
            try fm.createDirectory(atPath: path + "/" + stagingName, withIntermediateDirectories: false)
            guard fm.createFile(atPath: path + "/" + lockName, contents: Data()) else {
                throw ProviderError(.ioError, "cannot create \(path)/\(lockName)")
            }
            var config = Configuration()
            config.journalMode = .wal
            let queue = try DatabaseQueue(path: path + "/" + databaseName, configuration: config)
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.inTransaction {
                    try Schema.create(db)
                    let layoutJSON = String(decoding: try JSONEncoder().encode(layout), as: UTF8.self)
                    try Schema.setMeta(db, "format", formatVersion)
                    try Schema.setMeta(db, "layout", layoutJSON)
                    try Schema.setMeta(db, "cleanShutdown", "1")
                    try Schema.setMeta(db, "created", ISO8601DateFormatter().string(from: Date()))
                    try Self.insertInitialTree(db, layout: layout, folders: folders)
                    return .commit
                }
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try queue.close()
            try sysFsync(path: path, directory: true)
        } catch {
            // Leave nothing half-made behind.
            if existed {
                for name in (try? directoryEntries(path)) ?? [] { removeTree(path + "/" + name) }
            } else {
                removeTree(path)
            }
            if let error = error as? ProviderError { throw error }
            throw ProviderError(.ioError, "cannot create store \(path): \(error)")
        }
    }

    private static func insertInitialTree(_ db: Database, layout: Layout, folders: Bool) throws {
        let now = Date()
        let rootCaps = Capabilities.all.subtracting([.allowsRenaming, .allowsReparenting, .allowsDeleting, .allowsTrashing])
        var root = Record(
            row: rootRow, parent: nil,
            item: Item(
                identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
                contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
                capabilities: rootCaps))
        let trash = Record(
            row: trashRow, parent: nil,
            item: Item(
                identifier: .trashContainer, parentIdentifier: .rootContainer, filename: trashName, kind: .folder,
                contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
                capabilities: rootCaps))
        var records: [Int64: Record] = [:]
        var nextRow: Int64 = 3
        var pathToRow: [String: Int64] = ["": rootRow]
        // Shallow paths first, so a declared parent exists before its children.
        let declared = folders ? layout.folders.sorted { $0.components.count < $1.components.count } : []
        for folder in declared {
            var parentPath = ""
            var parentRow = rootRow
            let components = folder.components
            for (index, component) in components.enumerated() {
                let path = parentPath.isEmpty ? component : parentPath + "/" + component
                let isDeclaredFolder = index == components.count - 1
                if let existing = pathToRow[path] {
                    if isDeclaredFolder {
                        records[existing]!.item.capabilities = try folder.folderCapabilities
                        records[existing]!.contentsPolicy = try folder.contentsCapabilities
                    }
                    parentRow = existing
                } else {
                    let row = nextRow
                    nextRow += 1
                    var record = Record(
                        row: row, parent: parentRow,
                        item: Item(
                            identifier: ItemIdentifier(String(row)), parentIdentifier: identifier(forRow: parentRow),
                            filename: component, kind: .folder, contentType: .folder, childItemCount: 0,
                            creationDate: now, contentModificationDate: now, capabilities: .all))
                    if isDeclaredFolder {
                        record.item.capabilities = try folder.folderCapabilities
                        record.contentsPolicy = try folder.contentsCapabilities
                    } else if let parentPolicy = records[parentRow]?.contentsPolicy {
                        // An undeclared intermediate inside a declared folder follows its parent's policy.
                        record.item.capabilities = parentPolicy
                        record.contentsPolicy = parentPolicy
                    }
                    records[row] = record
                    pathToRow[path] = row
                    parentRow = row
                }
                parentPath = path
            }
        }
        root.item.childItemCount = records.values.filter { $0.parent == rootRow }.count
        root.item.childFolderCount = root.item.childItemCount ?? 0
        try Schema.upsert(db, root)
        try Schema.upsert(db, trash)
        for record in records.values.sorted(by: { $0.row < $1.row }) {
            try Schema.upsert(db, record)
        }
    }
}

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
    func commit(
        _ database: DatabaseQueue, saving records: [Record], deleting deletions: [Int64] = [],
        replicated: Bool = true, _ what: @autoclosure () -> String
    ) throws(ProviderError) {
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
        FaultInjection.hold(.fsync) // test-only (DOCFS_FAULT): a slow disk's fsync
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
