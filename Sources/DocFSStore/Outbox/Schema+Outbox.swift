import Foundation
import GRDB

// The replica's tables: `outbox` (changes not yet on the server, in order) and `replica`
// (key/value state of the sync: nothing yet but what `docfs status` shows after a restart).
extension Schema {
    static func createOutboxTable(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS outbox (
                    seq INTEGER PRIMARY KEY,
                    id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    row INTEGER NOT NULL,
                    parent INTEGER,
                    name TEXT,
                    bytes INTEGER NOT NULL DEFAULT 0,
                    enqueued INTEGER NOT NULL,
                    details TEXT NOT NULL
                );
                CREATE INDEX IF NOT EXISTS outbox_row ON outbox(row);
                CREATE INDEX IF NOT EXISTS outbox_parent ON outbox(parent) WHERE parent IS NOT NULL;
                """)
    }

    /// Items kept downloaded (`docfs pin`): a file, or a folder and everything below it.
    static func createPinnedTable(_ db: Database) throws {
        try db.execute(sql: "CREATE TABLE IF NOT EXISTS pinned (row INTEGER PRIMARY KEY)")
    }

    static let outboxColumns = "seq, id, kind, row, parent, name, bytes, enqueued, details"

    private static let detailsEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return encoder
    }()

    private static let detailsDecoder = JSONDecoder()

    static func values(of entry: OutboxEntry) -> [DatabaseValue] {
        let details = (try? detailsEncoder.encode(entry.details)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return [
            entry.seq.databaseValue, entry.id.uuidString.databaseValue, entry.kind.rawValue.databaseValue,
            entry.row.databaseValue, entry.parent.databaseValue, entry.name.databaseValue,
            entry.bytes.databaseValue, entry.enqueuedNs.databaseValue, details.databaseValue,
        ]
    }

    static func insertOutbox(_ db: Database, values: [DatabaseValue]) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO outbox (\(outboxColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            .execute(arguments: StatementArguments(values))
    }

    static func outboxEntry(from row: Row) -> OutboxEntry? {
        guard let id = UUID(uuidString: row[1]), let kind = OutboxEntry.Kind(rawValue: row[2]) else { return nil }
        let detailsText: String = row[8]
        let details = (try? detailsDecoder.decode(OutboxDetails.self, from: Data(detailsText.utf8))) ?? OutboxDetails()
        return OutboxEntry(
            seq: row[0], id: id, kind: kind, row: row[3], parent: row[4], name: row[5],
            bytes: row[6], enqueuedNs: row[7], details: details)
    }
}
