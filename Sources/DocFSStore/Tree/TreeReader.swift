import Foundation
import DocFSProvider
import GRDB

/// Reads the tree from SQLite when the working set in memory (`TreeState`) misses: a connection
/// of its own, read-only, which WAL lets read while the writer applies a batch. Every query is one
/// cached statement on the primary key, the unique `(parent, name)` index or the partial index of
/// folders by parent (`item_folders`), so a miss costs a few microseconds at any tree size.
///
/// It answers for what SQLite holds; `TreeState` lays the changes still only in the journal over
/// it. A failed read (a closed store, an I/O error) answers "nothing", and is logged by the caller
/// of `lastError` when it matters.
final class TreeReader: @unchecked Sendable {
    private var queue: DatabaseQueue?
    private(set) var lastError: String?

    init(path: String) throws {
        var config = Configuration()
        config.readonly = false // a WAL reader needs the shared-memory index, which it may have to create
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA query_only = 1")
            // SQLite's default page cache (2 MiB) holds the interior pages of the indexes of a
            // million items; more only grew the daemon.
            try db.execute(sql: "PRAGMA cache_size = -2048")
        }
        queue = try DatabaseQueue(path: path, configuration: config)
    }

    func close() {
        try? queue?.close()
        queue = nil
    }

    private func run<T>(_ body: (Database) throws -> T?) -> T? {
        guard let queue else { return nil }
        do { return try queue.inDatabase(body) } catch {
            lastError = "\(error)"
            return nil
        }
    }

    /// One item by row, counts filled for a folder.
    func record(_ row: Int64) -> Record? {
        run { db in
            guard let found = try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Schema.columns) FROM item WHERE id = ?"), arguments: [row]) else {
                return nil
            }
            return try Self.counted(Schema.record(from: found), db)
        }
    }

    /// The item named `name` (byte for byte) in folder `parent`.
    func child(named name: String, in parent: Int64) -> Record? {
        run { db in
            guard
                let found = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT \(Schema.columns) FROM item WHERE parent = ? AND name = ?"), arguments: [parent, name])
            else { return nil }
            return try Self.counted(Schema.record(from: found), db)
        }
    }

    /// Every item in folder `parent` (in no particular order), folders with their counts.
    func children(of parent: Int64) -> [Record] {
        run { db in
            var records: [Record] = []
            let cursor = try Row.fetchCursor(db.cachedStatement(sql: "SELECT \(Schema.columns) FROM item WHERE parent = ?"), arguments: [parent])
            while let row = try cursor.next() { records.append(Schema.record(from: row)) }
            for index in records.indices where records[index].item.isFolder {
                records[index] = try Self.counted(records[index], db)
            }
            return records
        } ?? []
    }

    /// Every item (no counts: the caller counts children in memory), for a store that fits the
    /// working set whole.
    func allRecords() -> [Record] {
        run { db in
            var records: [Record] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT \(Schema.columns) FROM item")
            while let row = try cursor.next() { records.append(Schema.record(from: row)) }
            return records
        } ?? []
    }

    /// Stored `user.*` attributes of one item.
    func attributes(of row: Int64) -> [String: Data] {
        run { db in
            var found: [String: Data] = [:]
            let cursor = try Row.fetchCursor(db.cachedStatement(sql: "SELECT name, value FROM xattr WHERE item = ?"), arguments: [row])
            while let row = try cursor.next() { found[row[0] as String] = row[1] as Data }
            return found
        } ?? [:]
    }

    /// The value of `key` in `meta` (`Schema.meta`), nil when it is not set.
    func meta(_ key: String) -> String? {
        run { db in try Schema.meta(db, key) }
    }

    func count(_ sql: String) -> Int {
        run { db in try Int.fetchOne(db, sql: sql) } ?? 0
    }

    /// A folder's `childItemCount` and `childFolderCount` from the indexes.
    private static func counted(_ record: Record, _ db: Database) throws -> Record {
        guard record.item.isFolder else { return record }
        var record = record
        let counts = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT (SELECT COUNT(*) FROM item WHERE parent = ?1), (SELECT COUNT(*) FROM item WHERE parent = ?1 AND kind = 1)
                    """), arguments: [record.row])
        let total: Int = counts?[0] ?? 0
        let folders: Int = counts?[1] ?? 0
        record.item.childItemCount = total
        record.item.childFolderCount = folders
        return record
    }
}
