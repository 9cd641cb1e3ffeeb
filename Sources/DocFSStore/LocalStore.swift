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
/// The type is a front over parts it owns, each a type with files of its own:
/// - the tree (`StoreTree`, `Tree/`): a bounded working set in memory (`TreeState`: records,
///   folder indexes, and what the journal has not yet applied to SQLite), read from SQLite on a
///   miss through a connection of its own (`TreeReader`); identifiers, rows and paths. Nothing
///   is loaded at open, so any size of tree mounts at once. Reads (`item`, `childItem`,
///   `enumerateItems`) answer from it under its one lock.
/// - the contents (`StoreContents`, `Contents/`): content files, segments and their compaction,
///   the staging folder, the removal of contents no item owns.
/// - the journal and commit (`StoreWriter`, `Journal/`): actions are serialised by its writer
///   lock; each appends its row changes to the journal before it returns, and the journal goes
///   to SQLite in batches of about a thousand changes, one transaction each (`StoreJournal`).
/// - a replica's outbox (`StoreOutbox`, `Outbox/`, held by `ReplicaState`): the entries each
///   action commits with its rows, their counts, and the outbox's rows in SQLite.
///
/// On disk (format 2; a format-1 store is migrated when it is first opened, `Schema.migrate`):
/// - `store.sqlite` — tables `meta(key, value)` (`format`, `layout` as JSON, `cleanShutdown`,
///   `created`, `journalGeneration`) and `item` (one row per item; `id` is the identifier,
///   1 = root, 2 = trash; unique `(parent, name)`; times in nanoseconds, owner, group and mode;
///   `contentsCaps` is a folder's policy for new children;
///   `trashedFrom`/`trashedName` remember where a trashed item came from; see `Schema`), and
///   `xattr(item, name, value)` for the `user.*` extended attributes users store on items (added
///   to format 1 later: a store without it gets the empty table when it is opened).
/// - `contents/<id>` — the bytes of each file item; nothing else belongs there.
/// - `segments/<n>` — the bytes of small files imported while `smallFileLimit` is on, appended
///   one after another (`ContentSegments`); such a file has no `contents/<id>`.
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
///
/// The front is spread over files by role: this file holds the parts, identifiers, and the
/// reads; `+Lifecycle` makes a store (`docfs init`), opens one (making the parts) and closes it,
/// and is what every action commits (records and a replica's outbox entries into the writer's
/// journal, `synchronize`); `+Create` new folders, links, special items, imports and generated
/// trees; `+Contents` the provider's side of file bytes; `+Moves` renames, moves, deletes, the
/// trash and hard links; `+Attributes` item metadata, stored `user.*` attributes, content types
/// and the folders' rules; `+Replica` the provider's side of a replica, whose own part
/// (`StoreReplica`, what the sync engine asks) is in `Replica/`. Each action checks items and
/// plans rows, has the contents put bytes in place, commits, then updates the tree.
/// docs/ARCHITECTURE.md shows where the store sits between the bridge and the disk.
package final class LocalStore: Provider, @unchecked Sendable {
    // MARK: Files of a store

    static let databaseName = "store.sqlite"
    static let contentsName = "contents"
    static let stagingName = "staging"
    static let segmentsName = "segments"
    static let lockName = "lock"
    static let formatVersion = "2"

    /// Items the working set keeps by default (`docfs mount -o cache_items=N`): about 0.4 KiB
    /// each, and the bridge's node for each of twice as many kernel inodes about 0.3 KiB. With
    /// it, `make bench-scale` over a million items peaked at 244 MB (the listing of a
    /// 100,000-entry folder); 100,000 had peaked at 253 MB for an `ls -lR` alone.
    package static let defaultCacheItems = 50_000

    package static let rootRow: Int64 = 1
    package static let trashRow: Int64 = 2
    /// Rows from here up are temporary: given by a replica to items the server has not
    /// numbered yet. The server's identifiers stay below (2^40 items is beyond any tree).
    package static let temporaryRowBase: Int64 = 1 << 40
    static let trashName = ".Trash"

    /// The store directory.
    package let url: URL
    /// The layout as declared at `docfs init`.
    package let layout: Layout
    let logger: Logger
    let types: ContentTypeTable

    /// The bytes of file items: content files, segments, staging, removal (`StoreContents`).
    let contents: StoreContents
    /// Stored files made a writer's live file, for the replica's upload (`LiveDetaches`).
    package let liveDetaches = LiveDetaches()
    package var stagingDirectory: URL { contents.stagingDirectory }
    /// Files imported with at most this many bytes go to a segment; 0: none do (the default, and
    /// always for a replica, whose rows the server renumbers).
    package var smallFileLimit: Int { contents.smallFileLimit }

    /// The write side: writer lock, database, journal and the store's lock file (`StoreWriter`).
    /// Actions reach it through `write` and `commit` (LocalStore+Lifecycle).
    let writer: StoreWriter

    /// The tree: records in memory, identifiers, rows, names and paths (`StoreTree`).
    let tree: StoreTree
    /// A replica's side (`StoreReplica`, `Replica/`: its sync state, its outbox, what the sync
    /// engine asks of the store); nil for a store of its own.
    package let replica: StoreReplica?
    /// A replica's outbox (`StoreOutbox`, `Outbox/`), the changes waiting for the server; nil for
    /// a store of its own.
    var outbox: StoreOutbox? { replica?.outbox }

    /// Called by `open(at:logger:)` only (LocalStore+Lifecycle).
    init(
        url: URL, layout: Layout, writer: StoreWriter, state: TreeState, logger: Logger,
        replica: ReplicaState? = nil, contents: StoreContents
    ) {
        let tree = StoreTree(state, replica: replica != nil)
        self.replica = replica.map {
            StoreReplica(state: $0, url: url, layout: layout, logger: logger, tree: tree, writer: writer, contents: contents)
        }
        self.contents = contents
        self.url = url
        self.layout = layout
        self.writer = writer
        self.tree = tree
        self.logger = logger
        self.types = ContentTypeTable(layout: layout)
        self.replica?.belongs(to: self)
    }

    deinit {
        close()
    }

    // MARK: - Identifiers, rows, names and paths (the tree's)

    package static func identifier(forRow row: Int64) -> ItemIdentifier { StoreTree.identifier(forRow: row) }

    package static func row(for identifier: ItemIdentifier) -> Int64? { StoreTree.row(for: identifier) }

    /// The row an identifier names now (a replica's temporary row answers as its permanent one).
    func row(for identifier: ItemIdentifier) -> Int64? { tree.row(for: identifier) }

    /// The content file of a file item, for `docfs check`, tests and a replica's upload: a file
    /// kept in a segment is given a content file of its own first (`readablePath(of:)`).
    package func contentURL(of identifier: ItemIdentifier) -> URL? {
        guard let path = try? readablePath(of: identifier) else { return nil }
        return URL(fileURLWithPath: path)
    }

    /// The mount path of an item, for messages (`/Projects/a.txt`, `/.Trash/x`).
    package func path(of identifier: ItemIdentifier) -> String {
        guard let row = self.row(for: identifier) else { return "?" }
        return tree.path(of: row)
    }

    func parentRow(_ identifier: ItemIdentifier) throws(ProviderError) -> Int64 {
        guard let row = self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(identifier)'")
        }
        return row
    }

    func itemRow(_ identifier: ItemIdentifier) throws(ProviderError) -> Int64 {
        guard let row = self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        return row
    }

    // MARK: - Reading the tree (memory only)

    /// Reads the tree under its lock; the closure may throw a ProviderError.
    func read<T>(_ body: (borrowing TreeState) throws(ProviderError) -> T) throws(ProviderError) -> T {
        try tree.read(body)
    }

    package func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        guard let row = self.row(for: identifier) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        let (found, full) = tree.item(row)
        if full { trimCache() }
        guard let found else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return found
    }

    package func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item {
        guard let parentRow = self.row(for: parent) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'")
        }
        let (result, full) = tree.childItem(named: name, in: parentRow, parent)
        if full { trimCache() }
        return try result.get()
    }

    package func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        guard let parentRow = self.row(for: container) else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(container)'")
        }
        let (result, full) = tree.childItems(of: parentRow, container)
        if full { trimCache() }
        return try result.get()
    }

    /// Brings the working set back under its limit, unless an action is running (it may hold
    /// records it read and has not updated yet; it trims itself when it ends).
    func trimCache() {
        var trimmed = false
        guard writer.performIfIdle({ trimmed = tree.trimIfFull() }) else { return }
        // Outside the writer lock: handing pages back may take a while.
        if trimmed { Self.releaseFreedMemory() }
    }

    /// Hands the pages freed by an eviction back to the system: the allocator keeps them
    /// otherwise, and records freed among live ones (and the bridge's nodes freed by FORGETs)
    /// left the daemon's resident size at its high-water mark.
    static func releaseFreedMemory() {
        _ = mallocTrim?(0)
    }

    /// glibc's `malloc_trim`, which Swift's Glibc module does not declare.
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        #if canImport(Glibc)
            guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
        #else
            return nil
        #endif
    }()

    package func storageStatistics() -> StorageStatistics {
        sysStatvfs(url.path)
    }

    /// The number of items in the store, root and trash included (a COUNT in SQLite after
    /// applying the journal's batch).
    package var itemCount: Int {
        try? write { (database) throws(ProviderError) in try flushJournal(database) }
        return tree.reading { $0.reader?.count("SELECT COUNT(*) FROM item") ?? $0.cachedRecords }
    }

    /// Items (root and trash included) and the bytes of every file's contents as the items
    /// record them (a replica's evicted files too), for metrics. The journal's batch is applied
    /// first (as `itemCount`), then read through a connection of its own, so a scan of a large
    /// tree never holds the lock lookups take.
    package func figures() -> (items: Int, contentBytes: Int64)? {
        try? write { (database) throws(ProviderError) in try flushJournal(database) }
        var config = Configuration()
        config.prepareDatabase { db in try db.execute(sql: "PRAGMA query_only = 1") }
        guard let queue = try? DatabaseQueue(path: url.path + "/" + Self.databaseName, configuration: config) else { return nil }
        defer { try? queue.close() }
        return try? queue.inDatabase { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), COALESCE(SUM(CASE WHEN kind = 0 THEN size END), 0) FROM item")
            return row.map { (items: ($0[0] as Int?) ?? 0, contentBytes: ($0[1] as Int64?) ?? 0) }
        }
    }

    /// The working set: records and folder index entries in memory, and how many of the records
    /// are pinned until the journal's batch lands (for tests and `make bench-scale`).
    package var cacheStatistics: (records: Int, indexEntries: Int, pinned: Int, limit: Int) {
        tree.statistics
    }
}
