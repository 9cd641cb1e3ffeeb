import Foundation
import DocFSProvider
import GRDB

/// An entry the server has (or that can never be sent), and for a create the permanent
/// identifier the server gave the item.
package struct OutboxCompletion: Sendable {
    package var entry: OutboxEntry
    package var permanentRow: Int64?
    /// The object the entry's contents went up as: the file's bytes can be evicted and
    /// downloaded from it again, while it has no newer contents.
    package var contentKey: String?
    package init(entry: OutboxEntry, permanentRow: Int64? = nil, contentKey: String? = nil) {
        self.entry = entry
        self.permanentRow = permanentRow
        self.contentKey = contentKey
    }
}

// The outbox's rows in SQLite. Each is called under the store's writer lock with the journal's
// batch applied first (`StoreReplica+Outbox`), so that the table is complete.
extension StoreOutbox {
    /// The oldest `limit` entries, in order, but for those of the `skipping` rows (set aside by
    /// the engine: a change the server refused for a reason a retry will not mend).
    func entries(_ database: DatabaseQueue, limit: Int, skipping: Set<Int64>) throws(ProviderError) -> [OutboxEntry] {
        do {
            return try database.inDatabase { db in
                let skip = skipping.isEmpty ? "" : "WHERE row NOT IN (\(skipping.sorted().map(String.init).joined(separator: ",")))"
                return try Row.fetchAll(db, sql: "SELECT \(Schema.outboxColumns) FROM outbox \(skip) ORDER BY seq LIMIT ?", arguments: [limit])
                    .compactMap(Schema.outboxEntry(from:))
            }
        } catch let error as DatabaseError {
            throw StoreWriter.providerError(error, "read the outbox")
        } catch {
            throw ProviderError(.ioError, "read the outbox: \(error)")
        }
    }

    /// In one transaction: each temporary row of `renumbers` replaced by its permanent one
    /// everywhere SQLite names it (the item, its children, the trash's memory of it, its stored
    /// attributes, the entries still waiting, pins, further names and the links waiting that name
    /// it), the completed entries removed, and `noteRefetch` (the items whose server state is
    /// fetched again) written. Memory and content files are the store's (`completeOutbox`).
    func complete(
        _ database: DatabaseQueue, _ completions: [OutboxCompletion], renumbering renumbers: [(old: Int64, new: Int64)],
        noteRefetch: ((Database) throws -> Void)?
    ) throws {
        try database.inDatabase { db in
            try db.inTransaction {
                for (old, new) in renumbers {
                    try db.execute(sql: "UPDATE item SET id = ? WHERE id = ?", arguments: [new, old])
                    try db.execute(sql: "UPDATE item SET parent = ? WHERE parent = ?", arguments: [new, old])
                    // Only items at the top of the trash remember an origin (and the index on parent finds them).
                    try db.execute(
                        sql: "UPDATE item SET trashedFrom = ? WHERE parent = ? AND trashedFrom = ?", arguments: [new, LocalStore.trashRow, old])
                    try db.execute(sql: "UPDATE xattr SET item = ? WHERE item = ?", arguments: [new, old])
                    try db.execute(sql: "UPDATE outbox SET row = ? WHERE row = ?", arguments: [new, old])
                    try db.execute(sql: "UPDATE outbox SET parent = ? WHERE parent = ?", arguments: [new, old])
                    try db.execute(sql: "UPDATE pinned SET row = ? WHERE row = ?", arguments: [new, old])
                    // A file's further names, and the links waiting that name it (hard links).
                    try db.execute(sql: "UPDATE item SET linkOf = ? WHERE linkOf = ?", arguments: [new, old])
                    try db.execute(
                        sql:
                            "UPDATE outbox SET details = json_set(details, '$.linkOf', ?) WHERE kind = 'link' AND json_extract(details, '$.linkOf') = ?",
                        arguments: [new, old])
                }
                for completion in completions {
                    try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq = ?").execute(arguments: [completion.entry.seq])
                }
                if let noteRefetch { try noteRefetch(db) }
                return .commit
            }
        }
    }

    /// Drops the entries of `rows` in one transaction; answers how many there were and their bytes.
    func forget(_ database: DatabaseQueue, rows: [Int64]) throws(ProviderError) -> (count: Int, bytes: Int64) {
        do {
            return try database.inDatabase { db in
                var dropped = (count: 0, bytes: Int64(0))
                try db.inTransaction {
                    let list = rows.map(String.init).joined(separator: ",")
                    let condition = "row IN (\(list))"
                    if let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(bytes), 0) FROM outbox WHERE \(condition)") {
                        dropped = (row[0], row[1])
                    }
                    try db.execute(sql: "DELETE FROM outbox WHERE \(condition)")
                    return .commit
                }
                return dropped
            }
        } catch {
            throw ProviderError(.ioError, "drop outbox entries: \(error)")
        }
    }

    /// For each of `rows` with entries waiting: how many, and the newest one's seq.
    func waiting(_ database: DatabaseQueue, rows: Set<Int64>) throws(ProviderError) -> [Int64: (count: Int, latest: Int64)] {
        do {
            return try database.inDatabase { db in
                let list = rows.sorted().map(String.init).joined(separator: ",")
                var found: [Int64: (count: Int, latest: Int64)] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT row, count(*), max(seq) FROM outbox WHERE row IN (\(list)) GROUP BY row") {
                    found[row[0]] = (row[1], row[2])
                }
                return found
            }
        } catch {
            throw ProviderError(.ioError, "read the outbox: \(error)")
        }
    }

    /// Which of these operation ids are entries still waiting.
    func entryIDs(_ database: DatabaseQueue, among ids: [UUID]) throws(ProviderError) -> [String] {
        do {
            return try database.inDatabase { db in
                let list = ids.map { "'\($0.uuidString)'" }.joined(separator: ",")
                return try String.fetchAll(db, sql: "SELECT id FROM outbox WHERE id IN (\(list))")
            }
        } catch {
            throw ProviderError(.ioError, "read the outbox: \(error)")
        }
    }

    /// How many entries wait for `row`, through the tree's reader (the connection lookups read
    /// SQLite with, under the tree's lock: no writer lock taken).
    static func waitingCount(row: Int64, _ reader: TreeReader?) -> Int {
        reader?.count("SELECT COUNT(*) FROM outbox WHERE row = \(row)") ?? 0
    }
}
