#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The contents' side of opening a store: staged leftovers removed, `contents/` made if missing,
// the segments scanned, and after an unclean shutdown the content files compared with the rows.
extension StoreContents {
    /// Removes files a bridge staged but never imported, makes `staging/` and `contents/` if
    /// missing, and opens the segments.
    func prepare(_ database: DatabaseQueue) throws {
        if !FileManager.default.fileExists(atPath: stagingPath) {
            try FileManager.default.createDirectory(atPath: stagingPath, withIntermediateDirectories: false)
        }
        let staged = try directoryEntries(stagingPath)
        for name in staged {
            removeTree(stagingPath + "/" + name)
        }
        if !staged.isEmpty {
            logger.notice(
                "store \(storePath): removed \(staged.count) leftover staged file(s): \(staged.prefix(10).joined(separator: ", "))\(staged.count > 10 ? ", …" : "")"
            )
        }
        if !FileManager.default.fileExists(atPath: contentsPath) {
            try FileManager.default.createDirectory(atPath: contentsPath, withIntermediateDirectories: false)
        }
        try openSegments(database)
    }

    /// After an unclean shutdown: removes content files without a file item (an import
    /// interrupted before its commit), warns of file items without contents, and returns the
    /// rows whose recorded size is not their content file's (a modify may have landed without
    /// its row), with the content file's size.
    func reconcile(_ database: DatabaseQueue) throws -> [(row: Int64, size: Int64)] {
        // Content files by name, then file items by row: both sorted, walked side by side.
        var contentRows: [Int64] = []
        var removed: [String] = []
        for name in try directoryEntries(contentsPath) {
            if let row = Int64(name), String(row) == name, row > LocalStore.trashRow {
                contentRows.append(row)
            } else {
                removeTree(contentsPath + "/" + name)
                removed.append(name)
            }
        }
        contentRows.sort()
        var missing: [Int64] = []
        var fixes: [(row: Int64, size: Int64)] = []
        var orphans: [Int64] = []
        try database.inDatabase { db in
            let cursor = try Row.fetchCursor(db, sql: "SELECT id, size FROM item WHERE kind = 0 AND absent = 0 AND linkOf IS NULL ORDER BY id")
            var next = 0
            while let row = try cursor.next() {
                let id: Int64 = row[0]
                let size: Int64 = row[1]
                while next < contentRows.count, contentRows[next] < id { orphans.append(contentRows[next]); next += 1 }
                guard next < contentRows.count, contentRows[next] == id else {
                    if segments.location(of: id) == nil { missing.append(id) }
                    continue
                }
                next += 1
                if case .success(let status) = fileStatus(path(id)), status.size != size {
                    fixes.append((id, status.size))
                }
            }
            orphans.append(contentsOf: contentRows[next...])
        }
        for row in orphans {
            removeTree(path(row))
            removed.append(String(row))
        }
        if !removed.isEmpty {
            logger.notice(
                "store \(storePath): removed \(removed.count) content file(s) with no item: \(removed.prefix(10).joined(separator: ", "))\(removed.count > 10 ? ", …" : "")"
            )
        }
        if !missing.isEmpty {
            logger.warning(
                "store \(storePath): \(missing.count) file item(s) have no contents (ids \(missing.prefix(10).map(String.init).joined(separator: ", "))); they read as empty"
            )
        }
        return fixes
    }
}
