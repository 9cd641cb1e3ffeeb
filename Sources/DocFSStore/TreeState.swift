import Foundation
import DocFSProvider

/// The whole tree in memory: records by row and each folder's children by name.
struct TreeState: Sendable {
    var records = RecordTable()
    var children: [Int64: [NameKey: Int64]] = [:]
    /// Children in name order, built on demand and dropped when a folder changes.
    var sortedCache: [Int64: [Int64]] = [:]
    var nextRow: Int64 = 3
    /// Content files written since the last `synchronize()`.
    var dirty: Set<Int64> = []
    /// Stored extended attributes (`user.*`) by item row, then name.
    var xattrs: [Int64: [String: Data]] = [:]

    func path(of row: Int64) -> String {
        if row == LocalStore.rootRow { return "/" }
        var names: [String] = []
        var cursor: Int64? = row
        var guardCount = 0
        while let current = cursor, current != LocalStore.rootRow, guardCount < 4096 {
            guard let record = records[current] else { names.append("?"); break }
            names.append(current == LocalStore.trashRow ? LocalStore.trashName : record.item.filename)
            cursor = record.parent
            guardCount += 1
        }
        return "/" + names.reversed().joined(separator: "/")
    }

    func isInTrash(_ row: Int64) -> Bool {
        var cursor = records[row]?.parent
        while let current = cursor {
            if current == LocalStore.trashRow { return true }
            cursor = records[current]?.parent
        }
        return false
    }

    mutating func sortedChildren(of row: Int64) -> [Int64] {
        if let cached = sortedCache[row] { return cached }
        let kids = children[row] ?? [:]
        // Swift's String order (fast for ASCII), ties between canonically equivalent names broken by bytes.
        let order = kids.sorted { lhs, rhs in
            if lhs.key.name < rhs.key.name { return true }
            if rhs.key.name < lhs.key.name { return false }
            return lhs.key.name.utf8.lexicographicallyPrecedes(rhs.key.name.utf8)
        }.map(\.value)
        sortedCache[row] = order
        return order
    }

    /// Children in name order without filling the cache (for callers holding a borrowed tree).
    func sortedChildrenUncached(of row: Int64) -> [Int64] {
        if let cached = sortedCache[row] { return cached }
        return (children[row] ?? [:]).sorted { $0.key.name.utf8.lexicographicallyPrecedes($1.key.name.utf8) }.map(\.value)
    }

    /// A name not yet used in `folder`: `name`, then `name 2`, `name 3`, … before the extension.
    func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) -> String {
        let kids = children[folder] ?? [:]
        return ItemNames.unique(name, isFolder: isFolder) { kids[NameKey($0)] != nil }
    }

    // MARK: Write-through updates (after the commit)

    /// Adds a new record under its parent and updates the parent's counts.
    mutating func insert(_ record: Record) {
        var record = record
        if record.item.isFolder {
            // Counts follow the children actually in memory (they are inserted after their folder).
            let kids = children[record.row] ?? [:]
            record.item.childItemCount = kids.count
            record.item.childFolderCount = kids.values.reduce(0) { $0 + (records[$1]?.item.isFolder == true ? 1 : 0) }
        }
        records[record.row] = record
        if let parent = record.parent {
            children[parent, default: [:]][NameKey(record.item.filename)] = record.row
            sortedCache[parent] = nil
            records[parent]?.item.childItemCount = children[parent]?.count ?? 0
            if record.item.isFolder { records[parent]?.item.childFolderCount += 1 }
        }
    }

    /// Removes a record (and its entry in its parent).
    mutating func remove(_ row: Int64) {
        guard let record = records.removeValue(forKey: row) else { return }
        children[row] = nil
        sortedCache[row] = nil
        dirty.remove(row)
        xattrs[row] = nil
        if let parent = record.parent {
            children[parent]?[NameKey(record.item.filename)] = nil
            sortedCache[parent] = nil
            records[parent]?.item.childItemCount = children[parent]?.count ?? 0
            if record.item.isFolder { records[parent]?.item.childFolderCount -= 1 }
        }
    }

    /// Replaces an existing record that moved or was renamed (new parent and/or name).
    mutating func move(_ row: Int64, to updated: Record) {
        guard let old = records[row] else { insert(updated); return }
        if let parent = old.parent {
            children[parent]?[NameKey(old.item.filename)] = nil
            sortedCache[parent] = nil
            records[parent]?.item.childItemCount = children[parent]?.count ?? 0
            if old.item.isFolder { records[parent]?.item.childFolderCount -= 1 }
        }
        var updated = updated
        updated.item.childItemCount = old.item.childItemCount
        updated.item.childFolderCount = old.item.childFolderCount
        records[row] = updated
        if let parent = updated.parent {
            children[parent, default: [:]][NameKey(updated.item.filename)] = row
            sortedCache[parent] = nil
            records[parent]?.item.childItemCount = children[parent]?.count ?? 0
            if updated.item.isFolder { records[parent]?.item.childFolderCount += 1 }
        }
    }

    /// Replaces a record's metadata where name and parent did not change; counts are kept from memory.
    mutating func replaceKeepingCounts(_ updated: Record) {
        guard let old = records[updated.row] else { return }
        var updated = updated
        updated.item.childItemCount = old.item.childItemCount
        updated.item.childFolderCount = old.item.childFolderCount
        updated.item.filename = old.item.filename
        updated.parent = old.parent
        updated.item.parentIdentifier = old.item.parentIdentifier
        records[updated.row] = updated
    }
}
