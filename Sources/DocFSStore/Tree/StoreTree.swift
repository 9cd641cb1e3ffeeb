import DocFSProvider
import Synchronization

/// The tree of a store, a part `LocalStore` owns: its records in memory (`TreeState`: a bounded
/// working set, folder indexes, and what the journal has not yet applied to SQLite; a miss is
/// read through `TreeReader`), and the identifiers, rows, names and paths by which the store
/// reaches them.
///
/// A lookup takes the one lock (`state`) once and builds its answer inside it, as the store did
/// before the tree was a part of its own: no other lock and no allocation per lookup. The lock
/// is held only for short lookups and updates, never across I/O.
final class StoreTree: @unchecked Sendable {
    /// The tree in memory; actions update it under the writer lock, after their commit. Reached
    /// only through this type's methods.
    private let state: Mutex<TreeState>
    /// A replica's new items have temporary rows until the server numbers them (`row(for:)`).
    private let resolvesTemporaryRows: Bool

    init(_ state: TreeState, replica: Bool) {
        self.state = Mutex(state)
        self.resolvesTemporaryRows = replica
    }

    // MARK: - Identifiers, rows and paths

    static func identifier(forRow row: Int64) -> ItemIdentifier {
        switch row {
        case LocalStore.rootRow: return .rootContainer
        case LocalStore.trashRow: return .trashContainer
        default: return ItemIdentifier(String(row))
        }
    }

    static func row(for identifier: ItemIdentifier) -> Int64? {
        if identifier == .rootContainer { return LocalStore.rootRow }
        if identifier == .trashContainer { return LocalStore.trashRow }
        guard let row = Int64(identifier.rawValue), row > LocalStore.trashRow, String(row) == identifier.rawValue else { return nil }
        return row
    }

    /// The row an identifier names now: a temporary row the server replaced answers as its
    /// permanent one (a request may still carry the old identifier).
    func row(for identifier: ItemIdentifier) -> Int64? {
        guard let row = Self.row(for: identifier) else { return nil }
        guard row >= LocalStore.temporaryRowBase, resolvesTemporaryRows else { return row }
        return state.withLock { $0.resolve(row) }
    }

    /// The mount path of a row, for messages (`/Projects/a.txt`, `/.Trash/x`).
    func path(of row: Int64) -> String {
        state.withLock { $0.path(of: row) }
    }

    // MARK: - Lookups (memory, and SQLite on a miss)

    /// Reads the tree under the lock; the closure may throw a ProviderError.
    func read<T>(_ body: (borrowing TreeState) throws(ProviderError) -> T) throws(ProviderError) -> T {
        let result: Result<T, ProviderError> = state.withLock { tree in
            do throws(ProviderError) { return .success(try body(tree)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The item of `row` (nil: none), and whether the working set is over its limit now.
    func item(_ row: Int64) -> (item: Item?, full: Bool) {
        state.withLock { tree in (tree.record(tree.resolve(row)).map { tree.presented($0) }, tree.needsTrim) }
    }

    /// The child `name` of the folder `parentRow` (`parent` names it in messages), and whether the
    /// working set is over its limit now.
    func childItem(named name: String, in parentRow: Int64, _ parent: ItemIdentifier) -> (result: Result<Item, ProviderError>, full: Bool) {
        state.withLock { tree in
            let parentRow = tree.resolve(parentRow)
            guard let folder = tree.record(parentRow) else {
                return (.failure(ProviderError(.noSuchItem, "no folder with identifier '\(parent)'")), false)
            }
            guard folder.item.isFolder else {
                return (.failure(ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder")), false)
            }
            guard let child = tree.childRecord(named: name, in: parentRow) else {
                // A miss is the common answer (every create looks first): no message to build.
                return (.failure(ProviderError(.noSuchItem)), tree.needsTrim)
            }
            return (.success(tree.presented(child)), tree.needsTrim)
        }
    }

    /// The children of the folder `parentRow` (`container` names it in messages), and whether the
    /// working set is over its limit now.
    func childItems(of parentRow: Int64, _ container: ItemIdentifier) -> (result: Result<[Item], ProviderError>, full: Bool) {
        state.withLock { tree in
            let parentRow = tree.resolve(parentRow)
            guard let folder = tree.record(parentRow) else {
                return (.failure(ProviderError(.noSuchItem, "no folder with identifier '\(container)'")), false)
            }
            guard folder.item.isFolder else {
                return (.failure(ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder")), false)
            }
            let records = tree.childRecords(of: parentRow)
            var items: [Item] = []
            items.reserveCapacity(records.count)
            for record in records { items.append(tree.presented(record)) }
            return (.success(items), tree.needsTrim)
        }
    }

    // MARK: - Records, for the actions (memory, and SQLite on a miss)

    /// The record of `row` (nil: none).
    func record(_ row: Int64) -> Record? { state.withLock { $0.record(row) } }

    /// The row a replaced temporary row is now (itself otherwise).
    func resolve(_ row: Int64) -> Int64 { state.withLock { $0.resolve(row) } }

    /// The row the next new item gets.
    var nextRow: Int64 { state.withLock { $0.nextRow } }

    /// `name`, or a suffixed one free in the folder.
    func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) -> String {
        state.withLock { $0.uniqueName(name, in: folder, isFolder: isFolder) }
    }

    /// A question of several steps, answered under the lock at once (nothing thrown; `read` for
    /// one that throws).
    func reading<T>(_ body: (borrowing TreeState) -> T) -> T { state.withLock { body($0) } }

    // MARK: - Memory after a commit (under the writer lock)

    /// An action's records in memory once its commit is in the journal: inserted, moved,
    /// replaced and removed in one step under the lock.
    func update<T>(_ body: (TreeState) -> T) -> T { state.withLock { body($0) } }

    /// Records changed in place (their folders' counts kept).
    func replaceKeepingCounts(_ records: [Record]) {
        state.withLock { tree in for record in records { tree.replaceKeepingCounts(record) } }
    }

    /// The content files written since the last `synchronize`, handed over (and forgotten here).
    func takeDirty() -> Set<Int64> {
        state.withLock { tree -> Set<Int64> in
            let dirty = tree.dirty
            tree.dirty.removeAll()
            return dirty
        }
    }

    /// Content files still to fsync (a `synchronize` that failed gives its rows back).
    func markDirty(_ rows: Set<Int64>) { state.withLock { $0.dirty.formUnion(rows) } }

    /// The journal's batch is in SQLite: what memory pinned for it is let go.
    func didFlush() { state.withLock { $0.didFlush() } }

    // MARK: - The reader (SQLite)

    /// A count through the tree's own connection (nil once it is closed).
    func count(_ sql: String) -> Int? { state.withLock { $0.reader?.count(sql) } }

    /// A key of the store's `meta` table, through the tree's own connection.
    func meta(_ key: String) -> String? { state.withLock { $0.reader?.meta(key) } }

    /// Runs `body` with the tree's connection under the lock (nil once it is closed).
    func withReader<T>(_ body: (TreeReader?) -> T) -> T { state.withLock { body($0.reader) } }

    /// Closes the tree's connection (the store closes).
    func closeReader() { state.withLock { $0.reader?.close() } }

    // MARK: - The working set

    /// Trims the working set if it is over its limit; true when it did. Under the writer lock
    /// (no action is between its reads and its update).
    func trimIfFull() -> Bool {
        state.withLock { tree -> Bool in
            guard tree.needsTrim else { return false }
            tree.trim()
            return true
        }
    }

    /// Records and folder index entries in memory, the records pinned until the journal's batch
    /// lands, and the limit.
    var statistics: (records: Int, indexEntries: Int, pinned: Int, limit: Int) {
        state.withLock { ($0.cachedRecords, $0.cachedIndexEntries, $0.pinnedCount, $0.cacheLimit) }
    }
}
