import Foundation
import DocFSProvider

/// The tree's working set in memory, over the tree in SQLite.
///
/// The tree lives in SQLite; memory keeps a bounded cache of it:
/// - records by row (`RecordTable`, evicted in CLOCK order past `cacheLimit`),
/// - the complete child index (names → rows, and the name order once asked) of folders that were
///   listed or made since they were last evicted, up to `cacheLimit` entries in all,
/// - and, pinned until their batch reaches SQLite, every record an action changed since the last
///   journal flush (`pinned`, with its current place in `pinnedPlaces`) and every row it deleted
///   (`removed`, tombstones). SQLite lags the journal by up to a batch, so what it answers for a
///   pinned or removed row is old: memory wins. Every other row is the same in SQLite and memory,
///   so a miss read from SQLite (`TreeReader`) is correct.
///
/// Folder counts (`childItemCount`, `childFolderCount`) come from COUNTs on the indexes when a
/// folder's record is read from SQLite and are kept up to date write-through after that. A folder
/// whose children changed since the last flush is itself pinned (every action saves the parents
/// whose children it changes), so its SQLite counts are never used while they are stale.
///
/// Concurrency: the tree is used under its `StoreTree.state` lock, reads of SQLite included.
/// Eviction runs only while no action is between its reads and its memory update (the store calls
/// `trim` holding the writer lock), so the records an action read stay until it updates them.
final class TreeState: @unchecked Sendable {
    /// `docfs mount -o cache_items=N`'s default.
    static let defaultCacheItems = LocalStore.defaultCacheItems
    /// Folders of at most this many items are read whole at their first name lookup.
    static let wholeFolderLookup = 256

    struct Place: Hashable {
        var parent: Int64
        var name: NameKey
    }

    struct FolderIndex {
        var names: [NameKey: Int64]
        /// Children in name order, built on demand and dropped when the folder changes.
        var sorted: [Int64]?
        var lastUse: UInt64
    }

    /// nil: no database behind the tree (everything is in memory; for tests).
    let reader: TreeReader?
    /// Records (and folder index entries) kept at most, pinned ones aside.
    let cacheLimit: Int

    private var cache = RecordTable()
    private var pinned: Set<Int64> = []
    private var removed: Set<Int64> = []
    private var pinnedPlaces: [Place: Int64] = [:]
    private var indexes: [Int64: FolderIndex] = [:]
    private var indexEntries = 0
    private var tick: UInt64 = 0

    var nextRow: Int64 = 3
    /// A replica's temporary rows the server has replaced (`renumber`): a read that resolved an
    /// identifier before the replacement finds the item under its new row.
    private var replacedRows: [Int64: Int64] = [:]

    @inline(__always)
    func resolve(_ row: Int64) -> Int64 {
        row >= LocalStore.temporaryRowBase ? (replacedRows[row] ?? row) : row
    }
    /// Content files written since the last `synchronize()`.
    var dirty: Set<Int64> = []

    init(reader: TreeReader?, cacheLimit: Int = TreeState.defaultCacheItems) {
        self.reader = reader
        self.cacheLimit = max(cacheLimit, 64)
    }

    // MARK: Views kept from the all-in-memory tree (`tree.records[row]`, `tree.children[f]?[name]`)

    struct Records {
        fileprivate let tree: TreeState
        subscript(row: Int64) -> Record? { tree.record(row) }
    }

    struct FolderNames {
        fileprivate let tree: TreeState
        fileprivate let parent: Int64
        subscript(name: NameKey) -> Int64? { tree.childRecord(name, in: parent)?.row }
        var isEmpty: Bool { (tree.record(parent)?.item.childItemCount ?? 0) == 0 }
    }

    struct Children {
        fileprivate let tree: TreeState
        subscript(parent: Int64) -> FolderNames? { FolderNames(tree: tree, parent: parent) }
    }

    var records: Records { Records(tree: self) }
    var children: Children { Children(tree: self) }

    // MARK: Warming up

    /// Reads the whole tree into the working set (records, counts and every folder's index), for
    /// a store that fits in it: the first walk after a mount then answers from memory, as the
    /// whole-tree store did, instead of reading SQLite (from disk, after a cache drop) item by item.
    func preloadAll() {
        guard let reader else { return }
        let all = reader.allRecords()
        var names: [Int64: [NameKey: Int64]] = [:]
        var folders: [Int64: Int] = [:]
        for record in all {
            guard let parent = record.parent else { continue }
            names[parent, default: [:]][NameKey(record.item.filename)] = record.row
            if record.item.isFolder { folders[parent, default: 0] += 1 }
        }
        tick += 1
        for var record in all {
            if record.item.isFolder {
                let children = names[record.row] ?? [:]
                record.item.childItemCount = children.count
                record.item.childFolderCount = folders[record.row] ?? 0
                if indexes[record.row] == nil {
                    indexes[record.row] = FolderIndex(names: children, sorted: nil, lastUse: tick)
                    indexEntries += children.count
                }
            }
            if !pinned.contains(record.row) { cache[record.row] = record }
        }
    }

    // MARK: Statistics (tests, logs)

    var cachedRecords: Int { cache.count }
    var pinnedCount: Int { pinned.count + removed.count }
    var cachedIndexEntries: Int { indexEntries }

    // MARK: Reads

    /// A record by row: memory, else SQLite (then cached).
    func record(_ row: Int64) -> Record? {
        if let found = cache.lookup(row) { return found }
        if removed.contains(row) { return nil }
        guard let reader, let found = reader.record(row) else { return nil }
        cache[row] = found
        return found
    }

    /// The child named `name` of folder `parent` (which the caller checked is a folder).
    func childRecord(_ key: NameKey, in parent: Int64) -> Record? {
        if indexes[parent] != nil {
            tick += 1
            indexes[parent]!.lastUse = tick
            guard let row = indexes[parent]!.names[key] else { return nil }
            return record(row)
        }
        if let row = pinnedPlaces[Place(parent: parent, name: key)] { return record(row) }
        // A small folder is read whole at its first lookup: the next lookups in it (every create
        // looks first, and mostly misses) answer from memory. A big one is asked name by name.
        if let folder = cache[parent], (folder.item.childItemCount ?? 0) <= Self.wholeFolderLookup {
            guard let row = loadedIndex(parent)[key] else { return nil }
            return record(row)
        }
        guard let reader, let found = reader.child(named: key.name, in: parent) else { return nil }
        // Deleted, moved or renamed since the last flush: its place in SQLite is old.
        if removed.contains(found.row) || pinned.contains(found.row) { return nil }
        if let cached = cache.lookup(found.row) { return cached }
        cache[found.row] = found
        return found
    }

    func childRecord(named name: String, in parent: Int64) -> Record? { childRecord(NameKey(name), in: parent) }

    /// The folder's child index, read from SQLite (with the journal's changes laid over) if it is
    /// not in memory.
    private func loadedIndex(_ parent: Int64) -> [NameKey: Int64] {
        tick += 1
        if indexes[parent] != nil {
            indexes[parent]!.lastUse = tick
            return indexes[parent]!.names
        }
        var names: [NameKey: Int64] = [:]
        if let reader {
            for found in reader.children(of: parent) {
                if removed.contains(found.row) || pinned.contains(found.row) { continue }
                names[NameKey(found.item.filename)] = found.row
                if !cache.contains(found.row) { cache[found.row] = found }
            }
        }
        for (place, row) in pinnedPlaces where place.parent == parent { names[place.name] = row }
        indexes[parent] = FolderIndex(names: names, sorted: nil, lastUse: tick)
        indexEntries += names.count
        return names
    }

    /// The rows of a folder's children, in no particular order.
    func childRows(of parent: Int64) -> [Int64] { Array(loadedIndex(parent).values) }

    /// The names in use in a folder.
    func childNames(of parent: Int64) -> Set<NameKey> { Set(loadedIndex(parent).keys) }

    func sortedChildren(of row: Int64) -> [Int64] {
        let names = loadedIndex(row)
        if let sorted = indexes[row]?.sorted { return sorted }
        // Swift's String order (fast for ASCII), ties between canonically equivalent names broken by bytes.
        let order = names.sorted { lhs, rhs in
            if lhs.key.name < rhs.key.name { return true }
            if rhs.key.name < lhs.key.name { return false }
            return lhs.key.name.utf8.lexicographicallyPrecedes(rhs.key.name.utf8)
        }.map(\.value)
        indexes[row]?.sorted = order
        return order
    }

    func sortedChildrenUncached(of row: Int64) -> [Int64] { sortedChildren(of: row) }

    /// A folder's children in name order, as records. When many of them were evicted since the
    /// index was built, the folder is read again in one query instead of row by row.
    func childRecords(of parent: Int64) -> [Record] {
        var order = sortedChildren(of: parent)
        var missing = 0
        for row in order where !cache.contains(row) { missing += 1 }
        if missing > 64, let index = indexes.removeValue(forKey: parent) {
            indexEntries -= index.names.count
            order = sortedChildren(of: parent)
        }
        var found: [Record] = []
        found.reserveCapacity(order.count)
        for row in order { if let child = record(row) { found.append(child) } }
        return found
    }

    func path(of row: Int64) -> String {
        if row == LocalStore.rootRow { return "/" }
        var names: [String] = []
        var cursor: Int64? = row
        var guardCount = 0
        while let current = cursor, current != LocalStore.rootRow, guardCount < 4096 {
            guard let record = record(current) else { names.append("?"); break }
            names.append(current == LocalStore.trashRow ? LocalStore.trashName : record.item.filename)
            cursor = record.parent
            guardCount += 1
        }
        return "/" + names.reversed().joined(separator: "/")
    }

    func isInTrash(_ row: Int64) -> Bool {
        var cursor = record(row)?.parent
        var steps = 0
        while let current = cursor, steps < 4096 {
            if current == LocalStore.trashRow { return true }
            cursor = record(current)?.parent
            steps += 1
        }
        return false
    }

    /// A name not yet used in `folder`: `name`, then `name 2`, `name 3`, … before the extension.
    func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) -> String {
        ItemNames.unique(name, isFolder: isFolder) { childRecord(NameKey($0), in: folder) != nil }
    }

    // MARK: Write-through updates (after the commit)

    /// Memory holds `record` as the truth until the next flush lands it in SQLite.
    private func pin(_ record: Record) {
        cache[record.row] = record
        pinned.insert(record.row)
        if let parent = record.parent {
            pinnedPlaces[Place(parent: parent, name: NameKey(record.item.filename))] = record.row
        }
    }

    private func unplace(_ record: Record) {
        guard let parent = record.parent else { return }
        let place = Place(parent: parent, name: NameKey(record.item.filename))
        if pinnedPlaces[place] == record.row { pinnedPlaces[place] = nil }
    }

    private func addChild(_ key: NameKey, row: Int64, isFolder: Bool, to parent: Int64) {
        if indexes[parent] != nil {
            if indexes[parent]!.names.updateValue(row, forKey: key) == nil { indexEntries += 1 }
            indexes[parent]!.sorted = nil
        }
        if var folder = cache[parent] {
            folder.item.childItemCount = (folder.item.childItemCount ?? 0) + 1
            if isFolder { folder.item.childFolderCount += 1 }
            cache[parent] = folder
        }
    }

    private func removeChild(_ key: NameKey, row: Int64, isFolder: Bool, from parent: Int64) {
        if indexes[parent] != nil, indexes[parent]!.names[key] == row {
            indexes[parent]!.names[key] = nil
            indexes[parent]!.sorted = nil
            indexEntries -= 1
        }
        if var folder = cache[parent] {
            folder.item.childItemCount = max(0, (folder.item.childItemCount ?? 0) - 1)
            if isFolder { folder.item.childFolderCount = max(0, folder.item.childFolderCount - 1) }
            cache[parent] = folder
        }
    }

    /// Adds a new record under its parent and updates the parent's counts. A new folder starts
    /// with a complete (empty) index: its children arrive through `insert` too.
    func insert(_ record: Record) {
        var record = record
        if record.item.isFolder {
            record.item.childItemCount = 0
            record.item.childFolderCount = 0
            tick += 1
            if indexes[record.row] == nil { indexes[record.row] = FolderIndex(names: [:], sorted: [], lastUse: tick) }
        }
        pin(record)
        if let parent = record.parent {
            addChild(NameKey(record.item.filename), row: record.row, isFolder: record.item.isFolder, to: parent)
        }
    }

    /// Removes a record (and its entry in its parent).
    func remove(_ row: Int64) {
        guard let record = record(row) else { return }
        cache.removeValue(forKey: row)
        pinned.remove(row)
        removed.insert(row)
        unplace(record)
        dirty.remove(row)
        if let index = indexes.removeValue(forKey: row) { indexEntries -= index.names.count }
        if let parent = record.parent {
            removeChild(NameKey(record.item.filename), row: row, isFolder: record.item.isFolder, from: parent)
        }
    }

    /// Replaces an existing record that moved or was renamed (new parent and/or name).
    func move(_ row: Int64, to updated: Record) {
        guard let old = record(row) else { insert(updated); return }
        unplace(old)
        if let parent = old.parent {
            removeChild(NameKey(old.item.filename), row: row, isFolder: old.item.isFolder, from: parent)
        }
        // The old parent's record may be this one's own (never), or counts changed above: reread.
        let current = cache[row] ?? old
        var updated = updated
        updated.item.childItemCount = current.item.childItemCount
        updated.item.childFolderCount = current.item.childFolderCount
        pin(updated)
        if let parent = updated.parent {
            addChild(NameKey(updated.item.filename), row: row, isFolder: updated.item.isFolder, to: parent)
        }
    }

    /// Replaces a record's metadata where name and parent did not change; counts are kept from memory.
    func replaceKeepingCounts(_ updated: Record) {
        guard let old = record(updated.row) else { return }
        var updated = updated
        updated.item.childItemCount = old.item.childItemCount
        updated.item.childFolderCount = old.item.childFolderCount
        updated.item.filename = old.item.filename
        updated.parent = old.parent
        updated.item.parentIdentifier = old.item.parentIdentifier
        pin(updated)
    }

    /// A record changed outside an action's write-through (sizes mended at open): pinned like one.
    func replace(_ updated: Record) {
        unplace(cache[updated.row] ?? updated)
        pin(updated)
    }

    // MARK: Flushes and eviction

    /// Drops what memory holds of a row that is not pinned (it was changed in SQLite directly).
    func forget(_ row: Int64) {
        guard !pinned.contains(row) else { return }
        cache.removeValue(forKey: row)
        if let index = indexes.removeValue(forKey: row) { indexEntries -= index.names.count }
    }

    /// The journal's batch reached SQLite: what memory pinned is now what SQLite holds.
    func didFlush() {
        pinned.removeAll(keepingCapacity: true)
        removed.removeAll(keepingCapacity: true)
        pinnedPlaces.removeAll(keepingCapacity: true)
    }

    /// A replica's temporary row became the server's permanent one (SQLite was changed already,
    /// right after a flush: nothing is pinned). The record, its place in its parent's index, its
    /// own index and its children's parent follow; the caller read the record first, so that it
    /// is in memory here.
    func renumber(_ old: Int64, to new: Int64) {
        replacedRows[old] = new
        let identifier = LocalStore.identifier(forRow: new)
        if var record = cache.removeValue(forKey: old) {
            if let parent = record.parent, indexes[parent] != nil {
                let key = NameKey(record.item.filename)
                if indexes[parent]!.names[key] == old { indexes[parent]!.names[key] = new }
                indexes[parent]!.sorted = indexes[parent]!.sorted?.map { $0 == old ? new : $0 }
            }
            record.row = new
            record.item.identifier = identifier
            cache[new] = record
        } else {
            // Not in memory: a folder index that names it is dropped and read again when used.
            for (row, index) in indexes where index.names.values.contains(old) {
                indexes[row] = nil
                indexEntries -= index.names.count
            }
        }
        var children: [Int64] = []
        if let index = indexes.removeValue(forKey: old) {
            indexes[new] = index
            children = Array(index.names.values)
        } else if cache[new]?.item.isFolder == true, (cache[new]?.item.childItemCount ?? 0) > 0 {
            // A folder whose index was evicted: its children in memory are found by a scan (rare).
            children = cache.keys.filter { cache[$0]?.parent == old }
        }
        for child in children where cache.contains(child) {
            cache[child]!.parent = new
            cache[child]!.item.parentIdentifier = identifier
        }
        // Items trashed out of it remember it as their origin (the top of the trash, when listed).
        for row in indexes[LocalStore.trashRow]?.names.values ?? [:].values where cache[row]?.trashedFrom == old {
            cache[row]!.trashedFrom = new
        }
        if dirty.remove(old) != nil { dirty.insert(new) }
        // A file with further names: they name it by its new row (those not in memory are read so).
        if (cache[new]?.item.linkCount ?? 1) > 1 {
            for row in Array(cache.keys) where cache[row]?.linkOf == old { cache[row]!.linkOf = new }
        }
    }

    var needsTrim: Bool { cache.count > cacheLimit || indexEntries > cacheLimit }

    /// Evicts records down to three quarters of the limit (CLOCK order; pinned records, the root
    /// and the trash stay) and the least recently used folder indexes likewise.
    func trim() {
        let target = cacheLimit - cacheLimit / 4
        if cache.count > cacheLimit {
            cache.evict(downTo: target) { row in row <= LocalStore.trashRow || pinned.contains(row) }
        }
        if indexEntries > cacheLimit {
            let byAge = indexes.map { ($0.key, $0.value.lastUse, $0.value.names.count) }.sorted { $0.1 < $1.1 }
            for (row, _, count) in byAge where indexEntries > target {
                indexes[row] = nil
                indexEntries -= count
            }
        }
    }
}
