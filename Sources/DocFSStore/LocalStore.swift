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

/// The embedded default provider: a store directory holding item metadata in SQLite
/// (`store.sqlite`, WAL mode) and file contents as plain files (`contents/<id>`).
///
/// Reads (`item`, `childItem`, `enumerateItems`) never touch SQL: every item is loaded into
/// memory at open and kept up to date write-through. Actions are serialised by one writer lock;
/// each action appends its row changes to the journal before it returns, and the journal goes to
/// SQLite in batches of about a thousand changes, one transaction each (`StoreJournal`).
///
/// On disk (format 1):
/// - `store.sqlite` — tables `meta(key, value)` (`format`, `layout` as JSON, `cleanShutdown`,
///   `created`) and `item` (one row per item; `id` is the identifier, 1 = root, 2 = trash;
///   unique `(parent, name)`; `contentsCaps` is a folder's policy for new children;
///   `trashedFrom`/`trashedName` remember where a trashed item came from), and
///   `xattr(item, name, value)` for the `user.*` extended attributes users store on items (added
///   to format 1 later: a store without it gets the empty table when it is opened).
/// - `contents/<id>` — the bytes of each file item; nothing else belongs there.
/// - `staging/` — the bridge stages files here (same filesystem, so import is a rename);
///   emptied at every open.
/// - `lock` — flock'ed while mounted, holds the mounting pid.
/// - `journal` — row changes not yet in SQLite (`StoreJournal`); applied at the next open after a crash.
///
/// Durability: a returned action is written to the journal and its content file renamed into
/// place, so it survives `kill -9` of the process. `synchronize()` applies the journal to SQLite
/// (WAL, `synchronous = NORMAL`), fsyncs content files written since the last call, `contents/`
/// and the store directory, and runs `PRAGMA wal_checkpoint(FULL)`, so everything acknowledged
/// survives a power cut.
public final class LocalStore: Provider, @unchecked Sendable {
    // MARK: Files of a store

    static let databaseName = "store.sqlite"
    static let contentsName = "contents"
    static let stagingName = "staging"
    static let lockName = "lock"
    static let formatVersion = "2"

    static let rootRow: Int64 = 1
    static let trashRow: Int64 = 2
    static let trashName = ".Trash"

    /// The store directory.
    public let url: URL
    /// The layout as declared at `docfs init`.
    public let layout: Layout
    public let stagingDirectory: URL
    /// `stagingDirectory` as a path, kept (`URL.path` decodes the URL on every call).
    let stagingPath: String
    let contentsPath: String
    let logger: Logger
    /// Removes unowned content files after actions answer.
    let reaper: ContentReaper
    let types: ContentTypeTable

    /// Serialises actions (check, file moves, commit, memory update). Guards `database` and `lockFD`.
    private let writer = NSLock()
    private var database: DatabaseQueue?
    /// Row changes not yet in SQLite; guarded by `writer`.
    private let journal: StoreJournal
    private var lockFD: Int32

    /// The tree in memory. Held only for short lookups and updates, never across I/O.
    let state: Mutex<TreeState>

    private init(url: URL, layout: Layout, database: DatabaseQueue, journal: StoreJournal, lockFD: Int32, state: TreeState, logger: Logger) {
        self.url = url
        self.journal = journal
        self.layout = layout
        self.stagingDirectory = url.appendingPathComponent(Self.stagingName, isDirectory: true)
        self.stagingPath = stagingDirectory.path
        self.contentsPath = url.appendingPathComponent(Self.contentsName, isDirectory: true).path
        self.database = database
        self.lockFD = lockFD
        self.state = Mutex(state)
        self.logger = logger
        self.reaper = ContentReaper(logger: logger)
        self.types = ContentTypeTable(layout: layout)
    }

    deinit {
        close()
    }

    // MARK: - Creating a store

    /// `docfs init`: makes a new store at `url`, which must be a new path or an empty directory.
    public static func create(at url: URL, layout: Layout?) throws {
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
                throw ProviderError(.directoryNotEmpty, "cannot create store \(path): the directory is not empty (\(entries.count) entries); give a new path or an empty directory")
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
                    try Self.insertInitialTree(db, layout: layout)
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

    private static func insertInitialTree(_ db: Database, layout: Layout) throws {
        let now = Date()
        let rootCaps = Capabilities.all.subtracting([.allowsRenaming, .allowsReparenting, .allowsDeleting, .allowsTrashing])
        var root = Record(row: rootRow, parent: nil, item: Item(
            identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
            contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
            capabilities: rootCaps))
        let trash = Record(row: trashRow, parent: nil, item: Item(
            identifier: .trashContainer, parentIdentifier: .rootContainer, filename: trashName, kind: .folder,
            contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
            capabilities: rootCaps))
        var records: [Int64: Record] = [:]
        var nextRow: Int64 = 3
        var pathToRow: [String: Int64] = ["": rootRow]
        // Shallow paths first, so a declared parent exists before its children.
        let declared = layout.folders.sorted { $0.components.count < $1.components.count }
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
                    var record = Record(row: row, parent: parentRow, item: Item(
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

    // MARK: - Opening and closing

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

    // MARK: - Identifiers and paths

    static func identifier(forRow row: Int64) -> ItemIdentifier {
        switch row {
        case rootRow: return .rootContainer
        case trashRow: return .trashContainer
        default: return ItemIdentifier(String(row))
        }
    }

    static func row(for identifier: ItemIdentifier) -> Int64? {
        if identifier == .rootContainer { return rootRow }
        if identifier == .trashContainer { return trashRow }
        guard let row = Int64(identifier.rawValue), row > trashRow, String(row) == identifier.rawValue else { return nil }
        return row
    }

    func contentPath(_ row: Int64) -> String { contentsPath + "/" + String(row) }

    /// The content file of a file item, for `docfs check` and tests.
    public func contentURL(of identifier: ItemIdentifier) -> URL? {
        guard let row = Self.row(for: identifier) else { return nil }
        return URL(fileURLWithPath: contentPath(row))
    }

    /// The mount path of an item, for messages (`/Projects/a.txt`, `/.Trash/x`).
    public func path(of identifier: ItemIdentifier) -> String {
        guard let row = Self.row(for: identifier) else { return "?" }
        return state.withLock { $0.path(of: row) }
    }

    // MARK: - Reading the tree (memory only)

    public func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        guard let row = Self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        let found: Item? = state.withLock { tree in tree.records[row].map { tree.presented($0) } }
        guard let found else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return found
    }

    public func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item {
        guard let parentRow = Self.row(for: parent) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'")
        }
        let result: Result<Item, ProviderError> = state.withLock { tree in
            guard let folder = tree.records[parentRow] else {
                return .failure(ProviderError(.noSuchItem, "no folder with identifier '\(parent)'"))
            }
            guard folder.item.isFolder else {
                return .failure(ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder"))
            }
            guard let row = tree.children[parentRow]?[NameKey(name)], let child = tree.records[row] else {
                // A miss is the common answer (every create looks first): no message to build.
                return .failure(ProviderError(.noSuchItem))
            }
            return .success(tree.presented(child))
        }
        return try result.get()
    }

    public func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        guard let parentRow = Self.row(for: container) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(container)'")
        }
        let result: Result<[Item], ProviderError> = state.withLock { tree in
            guard let folder = tree.records[parentRow] else {
                return .failure(ProviderError(.noSuchItem, "no folder with identifier '\(container)'"))
            }
            guard folder.item.isFolder else {
                return .failure(ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder"))
            }
            let order = tree.sortedChildren(of: parentRow)
            var items: [Item] = []
            items.reserveCapacity(order.count)
            for row in order { if let record = tree.records[row] { items.append(tree.presented(record)) } }
            return .success(items)
        }
        return try result.get()
    }

    public func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        let found = try item(for: identifier)
        switch found.kind {
        case .folder: throw ProviderError(.isDirectory, "\(path(of: identifier)) is a folder")
        case .symlink: throw ProviderError(.invalidArgument, "\(path(of: identifier)) is a symbolic link")
        case .fifo, .socket: throw ProviderError(.invalidArgument, "\(path(of: identifier)) has no stored contents (a FIFO or socket)")
        case .file: break
        }
        let row = Self.row(for: identifier)!
        let fd = sysOpen(contentPath(row), O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw ProviderError.posix(errno, "open contents of \(path(of: identifier))") }
        return fd
    }

    public func storageStatistics() -> StorageStatistics {
        sysStatvfs(url.path)
    }

    /// The number of items in the store, root and trash included.
    public var itemCount: Int { state.withLock { $0.records.count } }

    // MARK: - Writing: helpers

    /// Runs an action under the writer lock.
    private func write<T>(_ body: (DatabaseQueue) throws(ProviderError) -> T) throws(ProviderError) -> T {
        writer.lock()
        defer { writer.unlock() }
        guard let database else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        return try body(database)
    }

    /// Commits `records` (upserts) and `deletions` as one journal entry; every so many entries the
    /// batch goes to SQLite. A failed batch stays in the journal and is retried: the actions in it
    /// were already accepted.
    private func commit(_ database: DatabaseQueue, saving records: [Record], deleting deletions: [Int64] = [],
                        _ what: @autoclosure () -> String) throws(ProviderError) {
        var changes: [StoreJournal.Change] = []
        changes.reserveCapacity(deletions.count + records.count)
        for row in deletions { changes.append(.delete(row)) }
        for record in records { changes.append(.upsert(Schema.values(of: record))) }
        do throws(ProviderError) {
            try journal.append(changes)
        } catch {
            throw ProviderError(error.code, "\(what()): \(error.reason)", errno: error.errnoOverride)
        }
        if journal.shouldFlush {
            do throws(ProviderError) { try flushJournal(database) } catch {
                journal.flushFailed()
                logger.warning("store \(url.path): \(error.reason); the changes stay in the journal and are retried")
            }
        }
    }

    /// Applies the journal's pending changes to SQLite in one transaction that records the
    /// journal's generation, then starts a new generation. Call under the writer lock.
    private func flushJournal(_ database: DatabaseQueue) throws(ProviderError) {
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

    /// The name rules: non-empty, not `.` or `..`, no `/` or NUL, at most 255 bytes of UTF-8.
    static func validateName(_ name: String) throws(ProviderError) {
        if name.isEmpty { throw ProviderError(.invalidName, "a name may not be empty") }
        if name == "." || name == ".." { throw ProviderError(.invalidName, "'\(name)' is not a valid name") }
        if name.utf8.contains(UInt8(ascii: "/")) { throw ProviderError(.invalidName, "'\(name)' contains '/'") }
        if name.utf8.contains(0) { throw ProviderError(.invalidName, "a name may not contain a NUL byte") }
        if name.utf8.count > 255 {
            throw ProviderError(.nameTooLong, "'\(name.prefix(40))…' is \(name.utf8.count) bytes long; names are limited to 255 bytes")
        }
    }

    /// A folder that can receive a new child named `name`, or the rule that refuses.
    private func checkedParent(_ tree: TreeState, _ parentRow: Int64, _ parent: ItemIdentifier, name: String) throws(ProviderError) -> Record {
        guard let folder = tree.records[parentRow] else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'")
        }
        guard folder.item.isFolder else {
            throw ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder")
        }
        if tree.children[parentRow]?[NameKey(name)] != nil {
            throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parentRow))")
        }
        return folder
    }

    private func parentRow(_ identifier: ItemIdentifier) throws(ProviderError) -> Int64 {
        guard let row = Self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(identifier)'")
        }
        return row
    }

    private func itemRow(_ identifier: ItemIdentifier) throws(ProviderError) -> Int64 {
        guard let row = Self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        return row
    }

    /// Reads the tree under the state lock; the closure may throw a ProviderError.
    private func read<T>(_ body: (borrowing TreeState) throws(ProviderError) -> T) throws(ProviderError) -> T {
        let result: Result<T, ProviderError> = state.withLock { tree in
            do throws(ProviderError) { return .success(try body(tree)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// A parent's record after a child was added or removed: directory-mtime semantics.
    private static func touched(_ record: Record, now: FileTime) -> Record {
        var record = record
        record.item.modificationTime = now
        record.item.noteMetadataChange(at: now)
        return record
    }

    /// A new record for an item created inside `parent`, with the parent's contents policy.
    /// `typed: false` leaves the content type to the caller (an import types every item from its
    /// bytes afterwards; typing the name here too cost a glob match per file).
    /// Owner, group and mode come from `attributes` (the caller's, set by the bridge); without
    /// them the item belongs to whoever runs the store. Times: `modified` (and `accessed`) as
    /// given, birth and change time now.
    private func newRecord(row: Int64, parent: Record, name: String, kind: ItemKind, size: Int64 = 0,
                           now: FileTime, modified: FileTime? = nil, accessed: FileTime? = nil,
                           attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil,
                           typed: Bool = true) -> Record {
        let policy = parent.contentsPolicy ?? .all
        let type = typed || kind != .file ? types.type(forFilename: name, kind: kind) : ContentType.data
        var item = Item(
            identifier: Self.identifier(forRow: row), parentIdentifier: parent.item.identifier, filename: name,
            kind: kind, contentType: type, documentSize: size,
            childItemCount: kind == .folder ? 0 : nil, creationDate: .distantPast, contentModificationDate: .distantPast,
            capabilities: types.capabilities(policy, for: type), symlinkTargetPath: target,
            posixPermissions: mode ?? attributes?.posixPermissions, ownerID: attributes?.ownerID, groupID: attributes?.groupID)
        item.creationTime = now
        item.changeTime = now
        item.modificationTime = modified ?? attributes?.modificationTime ?? now
        // An item made through the mount was last used when it was made, as on ext4.
        item.accessTime = accessed ?? attributes?.accessTime ?? (attributes == nil ? nil : now)
        if kind == .symlink { item.posixPermissions = 0o777 }
        var record = Record(row: row, parent: parent.row, item: item)
        if kind == .folder { record.contentsPolicy = parent.contentsPolicy }
        return record
    }

    // MARK: - Actions

    public func importDocument(at fileURL: URL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try importSync(path: fileURL.path, name: fileURL.lastPathComponent, toParent: parent, attributes: nil)
    }

    /// Without `attributes` (docfs import of a user's files, the plain API), the items keep the
    /// mode and times of the files imported and belong to whoever runs the store. With them (a
    /// copy through the mount), the top item takes the caller's owner, group and mode and the
    /// times the program set; its contents (a package's files) belong to the same owner.
    func importSync(path sourcePath: String, name: String, toParent parent: ItemIdentifier,
                    attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        try Self.validateName(name)
        let parentRow = try parentRow(parent)
        return try write { (database) throws(ProviderError) -> Item in
            let status = try fileStatus(sourcePath).get()
            let parentRecord = try read { (tree) throws(ProviderError) in try checkedParent(tree, parentRow, parent, name: name) }
            // Plan the new items: one for a file or symlink, a tree for a directory.
            var plan: [PlannedItem] = []
            var nextRow = state.withLock { $0.nextRow }
            let now = FileTime.now()
            try planImport(path: sourcePath, name: name, status: status, parent: parentRecord, into: &plan, nextRow: &nextRow,
                           now: now, attributes: attributes, top: true)
            // Content types from the bytes, the folder's allowed types, document validation:
            // refused here, nothing has been moved yet.
            let admitted = try admitImport(plan.map { ($0.record, $0.source) }, into: parentRecord)
            for index in plan.indices { plan[index].record = admitted[index] }
            // Move the contents in first, then commit the rows: a crash in between leaves only
            // content files without rows, which the next open removes.
            // A staged file on another filesystem (EXDEV) is copied instead, and the original
            // removed once the rows are committed.
            var moved: [(item: PlannedItem, copied: Bool)] = []
            func undoMoves() {
                for done in moved.reversed() {
                    if done.copied { sysUnlink(contentPath(done.item.record.row)) }
                    else { try? sysRename(contentPath(done.item.record.row), done.item.source, "") }
                }
            }
            for planned in plan where planned.record.item.kind == .file {
                let target = contentPath(planned.record.row)
                do throws(ProviderError) {
                    do throws(ProviderError) {
                        try sysRename(planned.source, target, "rename staged file \(planned.source) into the store")
                        moved.append((planned, false))
                    } catch where error.errno == EXDEV {
                        try sysCopyFile(planned.source, to: target)
                        moved.append((planned, true))
                    }
                } catch {
                    undoMoves()
                    throw error
                }
            }
            FaultInjection.point(.importCommit)  // test-only crash point (DOCFS_FAULT)
            let newParent = Self.touched(parentRecord, now: now)
            do throws(ProviderError) {
                try commit(database, saving: plan.map(\.record) + [newParent], "import \(name)")
            } catch {
                undoMoves()
                throw error
            }
            for done in moved where done.copied { sysUnlink(done.item.source) }
            // Committed: the staged directories (and symlinks) are no longer needed.
            if status.kind != .file { removeTree(sourcePath) }
            let top = state.withLock { tree -> Item in
                tree.nextRow = max(tree.nextRow, nextRow)
                for planned in plan {
                    tree.insert(planned.record)
                    if planned.record.item.kind == .file { tree.dirty.insert(planned.record.row) }
                }
                tree.replaceKeepingCounts(newParent)
                return tree.records[plan[0].record.row]!.item
            }
            return top
        }
    }

    private struct PlannedItem {
        var record: Record
        var source: String
    }

    private func planImport(path: String, name: String, status: FileStatus, parent: Record,
                            into plan: inout [PlannedItem], nextRow: inout Int64,
                            now: FileTime, attributes: NewItemAttributes?, top: Bool) throws(ProviderError) {
        try Self.validateName(name)
        let row = nextRow
        nextRow += 1
        // The top item of a copy through the mount: the caller's owner, group and mode, and the
        // times the staged file carries (what the program wrote or set). Otherwise the source's.
        let given = top ? attributes : nil
        var owned = attributes
        owned?.posixPermissions = status.mode
        let own = given ?? owned
        switch status.kind {
        case .file:
            let record = newRecord(row: row, parent: parent, name: name, kind: .file, size: status.size, now: now,
                                   modified: given?.modificationTime ?? status.modificationTime,
                                   accessed: given?.accessTime ?? (attributes == nil ? nil : status.accessTime),
                                   attributes: own, mode: given == nil ? status.mode : nil, typed: false)
            plan.append(PlannedItem(record: record, source: path))
        case .symlink:
            let target = try sysReadlink(path)
            let record = newRecord(row: row, parent: parent, name: name, kind: .symlink, size: Int64(target.utf8.count),
                                   now: now, modified: given?.modificationTime ?? status.modificationTime,
                                   attributes: own, target: target)
            plan.append(PlannedItem(record: record, source: path))
        case .directory:
            var folder = newRecord(row: row, parent: parent, name: name, kind: .folder, now: now,
                                   modified: given?.modificationTime ?? status.modificationTime,
                                   attributes: own, mode: given == nil ? status.mode : nil)
            let index = plan.count
            plan.append(PlannedItem(record: folder, source: path))
            let names = try directoryEntries(path).sorted()
            var folderCount = 0
            for child in names {
                let childPath = path + "/" + child
                let childStatus = try fileStatus(childPath).get()
                if childStatus.kind == .directory { folderCount += 1 }
                try planImport(path: childPath, name: child, status: childStatus, parent: folder, into: &plan, nextRow: &nextRow,
                               now: now, attributes: attributes, top: false)
            }
            folder.item.childItemCount = names.count
            folder.item.childFolderCount = folderCount
            plan[index].record = folder
        case .other:
            throw ProviderError(.unsupported, "cannot import '\(name)': only files, folders, symbolic links, FIFOs and sockets can be stored, and only FIFOs and sockets made in the mount")
        }
    }

    public func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try createSync(name: name, parent: parent, kind: .folder, target: nil, attributes: nil)
    }

    public func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier,
                                attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        try createSync(name: name, parent: parent, kind: .folder, target: nil, attributes: attributes)
    }

    public func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try createSymbolicLinkSync(name: name, target: target, parent: parent, attributes: nil)
    }

    public func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
                                   attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        try createSymbolicLinkSync(name: name, target: target, parent: parent, attributes: attributes)
    }

    private func createSymbolicLinkSync(name: String, target: String, parent: ItemIdentifier,
                                        attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        if target.isEmpty { throw ProviderError(.invalidArgument, "a symbolic link needs a target") }
        if target.utf8.count >= Int(PATH_MAX) { throw ProviderError(.nameTooLong, "symbolic link target is longer than \(PATH_MAX) bytes") }
        return try createSync(name: name, parent: parent, kind: .symlink, target: target, attributes: attributes)
    }

    /// FIFOs and sockets: items with no contents, never typed or validated as documents.
    public func createSpecialItem(withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
                                  attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        guard kind.isSpecial else { throw ProviderError(.invalidArgument, "only FIFOs and sockets are special items") }
        return try createSync(name: name, parent: parent, kind: kind, target: nil, attributes: attributes)
    }

    private func createSync(name: String, parent: ItemIdentifier, kind: ItemKind, target: String?,
                            attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        try Self.validateName(name)
        let parentRow = try parentRow(parent)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRecord = try read { (tree) throws(ProviderError) in try checkedParent(tree, parentRow, parent, name: name) }
            let row = state.withLock { $0.nextRow }
            let now = FileTime.now()
            let record = newRecord(row: row, parent: parentRecord, name: name, kind: kind,
                                   size: Int64(target?.utf8.count ?? 0), now: now, attributes: attributes, target: target)
            let newParent = Self.touched(parentRecord, now: now)
            try commit(database, saving: [record, newParent], "create \(kind == .folder ? "folder" : kind == .symlink ? "symbolic link" : kind == .fifo ? "FIFO" : "socket") \(name)")
            return state.withLock { tree -> Item in
                tree.nextRow = max(tree.nextRow, row + 1)
                tree.insert(record)
                tree.replaceKeepingCounts(newParent)
                return tree.records[row]!.item
            }
        }
    }

    public func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        try Self.validateName(name)
        let row = try itemRow(identifier)
        return try write { (database) throws(ProviderError) -> Item in
            let (record, parentRecord) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard let parent = record.parent, let parentRecord = tree.records[parent] else {
                    throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be renamed")
                }
                if let existing = tree.children[parent]?[NameKey(name)], existing != row {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parent))")
                }
                return (record, parentRecord)
            }
            if record.item.filename.utf8.elementsEqual(name.utf8) { return record.item }
            let now = FileTime.now()
            var renamed = record
            renamed.item.filename = name
            renamed.item.noteMetadataChange(at: now)
            renamed.item = types.retyped(renamed.item, name: name, policy: parentRecord.contentsPolicy)
            let newParent = Self.touched(parentRecord, now: now)
            try commit(database, saving: [renamed, newParent], "rename \(record.item.filename) to \(name)")
            return state.withLock { tree -> Item in
                tree.move(row, to: renamed)
                tree.replaceKeepingCounts(newParent)
                return tree.records[row]!.item
            }
        }
    }

    public func reparentItem(withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
                             newName: String?, replacing: ItemIdentifier?) async throws(ProviderError) -> Item {
        if let newName { try Self.validateName(newName) }
        let row = try itemRow(identifier)
        let destinationRow = try parentRow(parent)
        return try write { (database) throws(ProviderError) -> Item in
            try moveSync(row: row, identifier: identifier, to: destinationRow, parent: parent, newName: newName,
                         replacing: replacing, database: database, trashing: nil)
        }
    }

    private enum TrashMove { case into(originalName: String), outOf }

    /// Moves an item to another folder (or the same one under a new name), replacing the item at
    /// the destination if `replacing` names it. One transaction; the replaced content file is
    /// unlinked after the commit.
    private func moveSync(row: Int64, identifier: ItemIdentifier, to destinationRow: Int64, parent: ItemIdentifier,
                          newName: String?, replacing: ItemIdentifier?, database: DatabaseQueue,
                          trashing: TrashMove?, gathering: [Record] = []) throws(ProviderError) -> Item {
        struct Plan {
            var record: Record
            var oldParent: Record
            var newParent: Record
            var replaced: Record?
        }
        let plan = try read { (tree) throws(ProviderError) -> Plan? in
            guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
            guard let oldParentRow = record.parent, let oldParent = tree.records[oldParentRow] else {
                throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be moved")
            }
            guard let newParent = tree.records[destinationRow] else { throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'") }
            guard newParent.item.isFolder else { throw ProviderError(.notDirectory, "\(tree.path(of: destinationRow)) is not a folder") }
            let name = newName ?? record.item.filename
            if record.item.isFolder {
                // A folder may not move into itself or below itself.
                var cursor: Int64? = destinationRow
                while let current = cursor {
                    if current == row {
                        throw ProviderError(.invalidArgument, "cannot move \(tree.path(of: row)) into itself (\(tree.path(of: destinationRow)))")
                    }
                    cursor = tree.records[current]?.parent
                }
            }
            var replaced: Record?
            if let existingRow = tree.children[destinationRow]?[NameKey(name)] {
                if existingRow == row { return nil }  // already there under that name
                guard let replacing, Self.row(for: replacing) == existingRow, let existing = tree.records[existingRow] else {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: destinationRow))")
                }
                if record.item.isFolder && !existing.item.isFolder {
                    throw ProviderError(.notDirectory, "cannot replace \(tree.path(of: existingRow)), which is not a folder, with a folder")
                }
                if !record.item.isFolder && existing.item.isFolder {
                    throw ProviderError(.isDirectory, "cannot replace the folder \(tree.path(of: existingRow)) with a non-folder")
                }
                if existing.item.isFolder, !(tree.children[existingRow]?.isEmpty ?? true) {
                    throw ProviderError(.directoryNotEmpty, "cannot replace \(tree.path(of: existingRow)): the folder is not empty")
                }
                replaced = existing
            }
            var moved = record
            moved.parent = destinationRow
            moved.item.parentIdentifier = newParent.item.identifier
            moved.item.filename = name
            moved.item.noteMetadataChange(at: FileTime.now())
            if newName != nil { moved.item = types.retyped(moved.item, name: name, policy: oldParent.contentsPolicy) }
            if destinationRow != Self.trashRow { try checkMove(moved, into: destinationRow, in: tree) }
            switch trashing {
            case .into(let originalName):
                moved.trashedFrom = oldParentRow
                moved.trashedName = originalName
            case .outOf, .none:
                if destinationRow != Self.trashRow {
                    moved.trashedFrom = nil
                    moved.trashedName = nil
                } else if oldParentRow != Self.trashRow {
                    // Moved into the trash by hand: remember the origin as trashItem does.
                    moved.trashedFrom = oldParentRow
                    moved.trashedName = record.item.filename
                }
            }
            return Plan(record: moved, oldParent: oldParent, newParent: newParent, replaced: replaced)
        }
        guard let plan else { return try item(for: identifier) }
        let now = plan.record.item.changeTime
        let oldParent = Self.touched(plan.oldParent, now: now)
        var saving = [plan.record, oldParent]
        if plan.newParent.row != plan.oldParent.row { saving.append(Self.touched(plan.newParent, now: now)) }
        let deleting = plan.replaced.map { [$0.row] } ?? []
        try commit(database, saving: gathering + saving, deleting: deleting, "move \(plan.record.item.filename)")
        if let replaced = plan.replaced, replaced.item.kind == .file {
            let replacedRow = replaced.row
            reaper.remove(contentPath(replacedRow)) { "the contents of replaced item \(replacedRow)" }
        }
        return state.withLock { tree -> Item in
            if let replaced = plan.replaced { tree.remove(replaced.row) }
            for gathered in gathering { tree.move(gathered.row, to: gathered) }
            tree.move(row, to: plan.record)
            for parentRecord in saving.dropFirst() { tree.replaceKeepingCounts(parentRecord) }
            return tree.records[row]!.item
        }
    }

    public func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        let row = try itemRow(identifier)
        try write { (database) throws(ProviderError) in
            let (record, parentRecord) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard let parent = record.parent, let parentRecord = tree.records[parent] else {
                    throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be deleted")
                }
                if record.item.isFolder, !(tree.children[row]?.isEmpty ?? true) {
                    throw ProviderError(.directoryNotEmpty, "cannot delete \(tree.path(of: row)): the folder is not empty")
                }
                return (record, parentRecord)
            }
            let newParent = Self.touched(parentRecord, now: FileTime.now())
            try commit(database, saving: [newParent], deleting: [row], "delete \(record.item.filename)")
            if record.item.kind == .file {
                reaper.remove(contentPath(row)) { "the contents of deleted item \(row)" }
            }
            state.withLock { tree in
                tree.remove(row)
                tree.replaceKeepingCounts(newParent)
            }
        }
    }

    public func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        let row = try itemRow(identifier)
        return try write { (database) throws(ProviderError) -> Item in
            let (record, name, gathering) = try read { (tree) throws(ProviderError) -> (Record, String, [Record]) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard record.parent != nil else { throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be trashed") }
                let gathering = record.parent == Self.trashRow ? [] : Self.gatherTrashed(from: row, tree)
                return (record, tree.uniqueName(record.item.filename, in: Self.trashRow, isFolder: record.item.isFolder), gathering)
            }
            if record.parent == Self.trashRow { return record.item }
            return try moveSync(row: row, identifier: identifier, to: Self.trashRow, parent: .trashContainer, newName: name,
                                replacing: nil, database: database, trashing: .into(originalName: record.item.filename),
                                gathering: gathering)
        }
    }

    public func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier?) async throws(ProviderError) -> Item {
        let row = try itemRow(identifier)
        let requested = try parent.map { (p) throws(ProviderError) in try parentRow(p) }
        return try write { (database) throws(ProviderError) -> Item in
            let (destination, name) = try read { (tree) throws(ProviderError) -> (Int64, String) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard tree.isInTrash(row) else { throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not in the trash") }
                var destination = Self.rootRow
                if let requested {
                    destination = requested
                } else if let original = record.trashedFrom, tree.records[original]?.item.isFolder == true, !tree.isInTrash(original) {
                    destination = original
                }
                return (destination, record.trashedName ?? record.item.filename)
            }
            return try moveSync(row: row, identifier: identifier, to: destination, parent: Self.identifier(forRow: destination),
                                newName: name, replacing: nil, database: database, trashing: .outOf)
        }
    }

    /// Trashing a folder takes along what was trashed out of it and is still at the top of the
    /// trash: `rm -r` trashes the files first, one by one, and then the emptied folders, so
    /// without this a folder would land in the trash empty and its files loose beside it. Each
    /// gathered item gets its original name back (unless that is taken in the folder).
    static func gatherTrashed(from folderRow: Int64, _ tree: borrowing TreeState) -> [Record] {
        guard tree.records[folderRow]?.item.isFolder == true else { return [] }
        var gathered: [Record] = []
        var used = Set((tree.children[folderRow] ?? [:]).keys)
        for trashedRow in tree.sortedChildrenUncached(of: trashRow) {
            guard var record = tree.records[trashedRow], record.trashedFrom == folderRow else { continue }
            var name = record.trashedName ?? record.item.filename
            if used.contains(NameKey(name)) { name = record.item.filename }
            if used.contains(NameKey(name)) { continue }  // leave it loose rather than rename it twice
            used.insert(NameKey(name))
            record.parent = folderRow
            record.item.parentIdentifier = identifier(forRow: folderRow)
            record.item.filename = name
            record.item.noteMetadataChange(at: FileTime.now())
            record.trashedFrom = nil
            record.trashedName = nil
            gathered.append(record)
        }
        return gathered
    }

    /// `mv .Trash/x FOLDER/NAME`: restores under the name the move gives, in one step.
    public func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
                            newName: String) async throws(ProviderError) -> Item {
        try Self.validateName(newName)
        let row = try itemRow(identifier)
        let destination = try parentRow(parent)
        return try write { (database) throws(ProviderError) -> Item in
            try read { (tree) throws(ProviderError) in
                guard tree.records[row] != nil else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard tree.isInTrash(row) else { throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not in the trash") }
                if tree.isInTrash(destination) || destination == Self.trashRow {
                    throw ProviderError(.invalidArgument, "cannot restore into the trash")
                }
            }
            return try moveSync(row: row, identifier: identifier, to: destination, parent: parent,
                                newName: newName, replacing: nil, database: database, trashing: .outOf)
        }
    }

    public func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? {
        guard let row = Self.row(for: identifier) else { return nil }
        return state.withLock { tree -> TrashOrigin? in
            guard let record = tree.records[row], let from = record.trashedFrom, record.parent == Self.trashRow else { return nil }
            return TrashOrigin(parentIdentifier: Self.identifier(forRow: from), filename: record.trashedName ?? record.item.filename)
        }
    }

    // MARK: - Extended attributes

    public func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] {
        let row = try itemRow(identifier)
        let names: [String]? = state.withLock { tree in
            tree.records[row] == nil ? nil : (tree.xattrs[row].map { Array($0.keys) } ?? [])
        }
        guard let names else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return names.sorted()
    }

    public func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        let row = try itemRow(identifier)
        let found: (exists: Bool, value: Data?) = state.withLock { tree in
            (tree.records[row] != nil, tree.xattrs[row]?[name])
        }
        guard found.exists else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        guard let value = found.value else { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
        return value
    }

    public func setExtendedAttribute(named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
                                     forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        guard name.hasPrefix(ExtendedAttributes.userPrefix), !name.hasPrefix(ExtendedAttributes.docfsPrefix),
              name.utf8.count > ExtendedAttributes.userPrefix.utf8.count else {
            throw ProviderError(.unsupported, "only user.* attributes (other than user.docfs.*) are stored")
        }
        guard name.utf8.count <= ExtendedAttributes.maxNameBytes else {
            throw ProviderError(.invalidArgument, "attribute name is longer than \(ExtendedAttributes.maxNameBytes) bytes", errno: ERANGE)
        }
        if let value, value.count > ExtendedAttributes.maxValueBytes {
            throw ProviderError(.invalidArgument, "\(name): a value may have at most \(ExtendedAttributes.maxValueBytes) bytes (got \(value.count))", errno: E2BIG)
        }
        let row = try itemRow(identifier)
        try write { (database) throws(ProviderError) in
            let current = try read { (tree) throws(ProviderError) -> [String: Data] in
                guard tree.records[row] != nil else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return tree.xattrs[row] ?? [:]
            }
            let exists = current[name] != nil
            if value == nil || mode == .replace, !exists { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
            if mode == .create, exists { throw ProviderError(.filenameCollision, "\(name) already exists") }
            var updated = current
            updated[name] = value
            let total = updated.reduce(0) { $0 + $1.key.utf8.count + $1.value.count }
            if value != nil, total > ExtendedAttributes.maxBytesPerItem {
                throw ProviderError(.noSpace, "an item's attributes may have at most \(ExtendedAttributes.maxBytesPerItem) bytes in all (this would make \(total))")
            }
            do {
                // The row this attribute belongs to may still be only in the journal.
                try flushJournal(database)
                try database.inDatabase { db in
                    if let value {
                        try db.execute(sql: "INSERT INTO xattr (item, name, value) VALUES (?, ?, ?) ON CONFLICT(item, name) DO UPDATE SET value = excluded.value",
                                       arguments: [row, name, value])
                    } else {
                        try db.execute(sql: "DELETE FROM xattr WHERE item = ? AND name = ?", arguments: [row, name])
                    }
                }
            } catch let error as ProviderError {
                throw error
            } catch let error as DatabaseError {
                throw Self.providerError(error, "set attribute \(name)")
            } catch {
                throw ProviderError(.ioError, "set attribute \(name): \(error)")
            }
            state.withLock { tree in tree.xattrs[row] = updated.isEmpty ? nil : updated }
            // A change of metadata: the item's change time moves (through the journal, as usual).
            if var record = state.withLock({ $0.records[row] }) {
                record.item.noteMetadataChange(at: FileTime.now())
                try commit(database, saving: [record], "set attribute \(name)")
                state.withLock { $0.replaceKeepingCounts(record) }
            }
        }
    }

    /// How many stored attributes the store holds in all (for tests and `docfs check`).
    var storedAttributeCount: Int { state.withLock { $0.xattrs.values.reduce(0) { $0 + $1.count } } }

    // MARK: - Security-scoped import

    /// The staged file is reached only inside its access window, which spans the move into storage.
    public func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try importScoped(file, parent: parent, attributes: nil)
    }

    public func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
                               attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        try importScoped(file, parent: parent, attributes: attributes)
    }

    private func importScoped(_ file: SecurityScopedURL, parent: ItemIdentifier, attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        // The store moves the file into contents/ itself, so it takes it by its sealed name.
        try file.withSealedPath { (path) throws(ProviderError) -> Item in
            let item = try importSync(path: path, name: file.name, toParent: parent, attributes: attributes)
            file.noteMovedAway()  // an import that succeeded has taken (or removed) the staged file
            return item
        }
    }

    /// Changes metadata of one item (one transaction, one new metadata version).
    private func updateSync(_ identifier: ItemIdentifier, _ what: String, _ change: (inout Record) throws(ProviderError) -> Void) throws(ProviderError) -> Item {
        let row = try itemRow(identifier)
        return try write { (database) throws(ProviderError) -> Item in
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return record
            }
            try change(&record)
            record.item.noteMetadataChange(at: FileTime.now())
            try commit(database, saving: [record], what)
            return state.withLock { tree -> Item in
                tree.replaceKeepingCounts(record)
                return tree.records[row]!.item
            }
        }
    }

    public func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set tags") { $0.item.tagData = tagData }
    }

    public func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set favorite rank") { $0.item.favoriteRank = rank }
    }

    public func setLastUsedDate(_ date: Date?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set last-used date") { $0.item.lastUsedDate = date }
    }

    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set attributes") { (record) throws(ProviderError) in
            if changes.posixPermissions != nil, record.item.kind == .symlink {
                throw ProviderError(.unsupported, "the mode of a symbolic link cannot change")
            }
            changes.apply(to: &record.item)
        }
    }

    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, posixPermissions: UInt16?,
                              contentModificationDate: Date?) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set attributes") { record in
            if let posixPermissions { record.item.posixPermissions = posixPermissions & 0o7777 }
            if let contentModificationDate { record.item.contentModificationDate = contentModificationDate }
        }
    }

    public func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, from fileURL: URL) async throws(ProviderError) -> Item {
        let row = try itemRow(identifier)
        let sourcePath = fileURL.path
        return try write { (database) throws(ProviderError) -> Item in
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                switch record.item.kind {
                case .folder: throw ProviderError(.isDirectory, "\(tree.path(of: row)) is a folder")
                case .symlink, .fifo, .socket: throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not a regular file")
                case .file: return record
                }
            }
            let status = try fileStatus(sourcePath).get()
            guard status.kind == .file else {
                throw ProviderError(.invalidArgument, "new contents for \(record.item.filename) must be a regular file")
            }
            record = try admitModified(record, from: sourcePath)
            // Keep the old contents reachable until the row is committed, to undo a failed commit.
            let target = contentPath(row)
            // Named per version: the old backup of this item may still be waiting for the reaper.
            let backup = stagingPath + "/.previous-\(row)-\(record.item.itemVersion.contentVersion)"
            _ = sysUnlink(backup)
            let hasBackup = sysLink(target, backup)
            try sysRename(sourcePath, target, "rename staged file over the contents of \(record.item.filename)")
            record.item.documentSize = status.size
            // The staged file's time: the last write, or what the program set (futimens) after it.
            record.item.modificationTime = status.modificationTime
            FaultInjection.point(.modifyCommit)  // test-only crash point (DOCFS_FAULT)
            record.item.itemVersion.contentVersion += 1
            record.item.noteMetadataChange(at: FileTime.now())
            do throws(ProviderError) {
                try commit(database, saving: [record], "modify \(record.item.filename)")
            } catch {
                if hasBackup {
                    try? sysRename(target, sourcePath, "")
                    try? sysRename(backup, target, "")
                }
                throw error
            }
            if hasBackup { reaper.remove(backup) { "the previous contents of item \(row)" } }
            return state.withLock { tree -> Item in
                tree.replaceKeepingCounts(record)
                tree.dirty.insert(row)
                return tree.records[row]!.item
            }
        }
    }

    public func synchronize() async throws(ProviderError) {
        try synchronizeSync()
    }

    /// Makes everything committed so far survive a power cut: fsync of the content files written
    /// since the last call and of the store's directories, then a full WAL checkpoint.
    public func synchronizeSync() throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            let dirty = state.withLock { tree -> Set<Int64> in
                let dirty = tree.dirty
                tree.dirty.removeAll()
                return dirty
            }
            do throws(ProviderError) {
                for row in dirty { try sysFsync(path: contentPath(row), directory: false) }
                try sysFsync(path: contentsPath, directory: true)
                try sysFsync(path: url.path, directory: true)
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
