import Foundation
import DocFSProvider
import GRDB

/// The SQLite schema and row mapping.
enum Schema {
    static func create(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT NOT NULL
                );
                """)
        try createItemTable(db, named: "item")
        try db.execute(sql: folderIndexSQL)
        try db.execute(sql: "CREATE INDEX IF NOT EXISTS item_names ON item(linkOf) WHERE linkOf IS NOT NULL")
        try createXattrTable(db)
    }

    /// Format 2: times are INTEGER nanoseconds since the epoch (format 1 kept REAL seconds, which
    /// rounded nanoseconds away); every item has an owner, a group and a change time.
    static func createItemTable(_ db: Database, named table: String) throws {
        try db.execute(
            sql: """
                CREATE TABLE \(table) (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    parent INTEGER,
                    name TEXT NOT NULL,
                    kind INTEGER NOT NULL,
                    contentType TEXT NOT NULL,
                    size INTEGER NOT NULL DEFAULT 0,
                    created INTEGER NOT NULL,
                    modified INTEGER NOT NULL,
                    lastUsed INTEGER,
                    tagData BLOB,
                    favoriteRank INTEGER,
                    caps INTEGER NOT NULL,
                    contentsCaps INTEGER,
                    contentVersion INTEGER NOT NULL DEFAULT 1,
                    metadataVersion INTEGER NOT NULL DEFAULT 1,
                    symlinkTarget TEXT,
                    perms INTEGER NOT NULL,
                    trashedFrom INTEGER,
                    trashedName TEXT,
                    changed INTEGER NOT NULL DEFAULT 0,
                    uid INTEGER NOT NULL DEFAULT 0,
                    gid INTEGER NOT NULL DEFAULT 0,
                    remoteKey TEXT,
                    absent INTEGER NOT NULL DEFAULT 0,
                    linkOf INTEGER,
                    links INTEGER NOT NULL DEFAULT 1,
                    rdev INTEGER NOT NULL DEFAULT 0
                );
                CREATE UNIQUE INDEX \(table)_parent_name ON \(table)(parent, name);
                """)
    }

    /// Brings a format-1 store to format 2 in one transaction: times to exact nanoseconds, and
    /// `owner` / `group` for every item (nobody owned anything before; the items showed the
    /// mounting user, so they go to him). Returns the number of items migrated, nil when the
    /// store was current already.
    static func migrate(_ db: Database, owner: UInt32, group: UInt32) throws -> Int? {
        let format = try Schema.meta(db, "format")
        guard format == "1" else { return nil }
        var count = 0
        try db.inTransaction {
            let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
            try db.execute(sql: "DROP INDEX IF EXISTS item_parent_name")
            try createItemTable(db, named: "item_v2")
            // Whole seconds and the fraction apart: seconds × 1e9 in a Double would round away
            // what the old value held (a double near 1.6e18 is exact only to 256 ns).
            let ns = { (column: String) in
                "(CAST(\(column) AS INTEGER) * 1000000000 + CAST(ROUND((\(column) - CAST(\(column) AS INTEGER)) * 1e9) AS INTEGER))"
            }
            try db.execute(
                sql: """
                    INSERT INTO item_v2 (\(format2Columns))
                    SELECT id, parent, name, kind, contentType, size, \(ns("created")), \(ns("modified")),
                           CASE WHEN lastUsed IS NULL THEN NULL ELSE \(ns("lastUsed")) END, tagData, favoriteRank, caps,
                           contentsCaps, contentVersion, metadataVersion, symlinkTarget, perms, trashedFrom, trashedName,
                           \(ns("modified")), ?, ? FROM item
                    """, arguments: [Int64(owner), Int64(group)])
            count = db.changesCount
            try db.execute(sql: "DROP TABLE item")
            try db.execute(sql: "ALTER TABLE item_v2 RENAME TO item")
            try db.execute(sql: "DROP INDEX item_v2_parent_name")
            try db.execute(sql: "CREATE UNIQUE INDEX item_parent_name ON item(parent, name)")
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'item'", arguments: [sequence])
            try setMeta(db, "format", LocalStore.formatVersion)
            return .commit
        }
        return count
    }

    /// Stored extended attributes; added to format 1 later, so an older store gets it at open.
    static func createXattrTable(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE IF NOT EXISTS xattr (
                    item INTEGER NOT NULL,
                    name TEXT NOT NULL,
                    value BLOB NOT NULL,
                    PRIMARY KEY (item, name)
                ) WITHOUT ROWID
                """)
    }

    /// The value of `key` in `meta`, nil when it is not set.
    static func meta(_ db: Database, _ key: String) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key])
    }

    /// The values of these keys in `meta` that are set.
    static func meta(_ db: Database, _ keys: [String]) throws -> [String: String] {
        guard !keys.isEmpty else { return [:] }
        let marks = Array(repeating: "?", count: keys.count).joined(separator: ", ")
        var values: [String: String] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT key, value FROM meta WHERE key IN (\(marks))", arguments: StatementArguments(keys)) {
            values[row[0]] = row[1] as String
        }
        return values
    }

    static func removeMeta(_ db: Database, _ key: String) throws {
        try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key])
    }

    static func setMeta(_ db: Database, _ key: String, _ value: String) throws {
        try db.execute(
            sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            arguments: [key, value])
    }

    /// A replica's file adds `remoteKey` (the server's object with the same bytes as its current
    /// contents, nil when none is known) and `absent` (1: only on the server, downloaded on open).
    static let columns = contentColumns + ", linkOf, links, rdev"
    /// The columns before hard links and device nodes (a journal an earlier docfs left).
    static let contentColumns = format2Columns + ", remoteKey, absent"
    static let contentColumnCount = 24
    static let format2Columns =
        "id, parent, name, kind, contentType, size, created, modified, lastUsed, tagData, favoriteRank, caps, contentsCaps, contentVersion, metadataVersion, symlinkTarget, perms, trashedFrom, trashedName, changed, uid, gid"
    static let format2ColumnCount = 22
    /// Format 1's columns: a journal left by a crash of an older docfs holds rows in this shape,
    /// applied before the store is migrated.
    static let legacyColumns =
        "id, parent, name, kind, contentType, size, created, modified, lastUsed, tagData, favoriteRank, caps, contentsCaps, contentVersion, metadataVersion, symlinkTarget, perms, trashedFrom, trashedName"
    static let legacyColumnCount = 19

    /// A record's row as column values, in the order of `columns` (what the journal logs).
    static func values(of record: Record) -> [DatabaseValue] {
        let item = record.item
        return [
            record.row.databaseValue, record.parent.databaseValue, item.filename.databaseValue,
            Int64(item.kind.rawValue).databaseValue, item.contentType.rawValue.databaseValue,
            item.documentSize.databaseValue, item.creationTime.totalNanoseconds.databaseValue,
            item.modificationTime.totalNanoseconds.databaseValue,
            item.accessTime?.totalNanoseconds.databaseValue ?? .null, item.tagData.databaseValue,
            item.favoriteRank.databaseValue, Int64(item.capabilities.rawValue).databaseValue,
            (record.contentsPolicy.map { Int64($0.rawValue) }).databaseValue,
            Int64(bitPattern: item.itemVersion.contentVersion).databaseValue,
            Int64(bitPattern: item.itemVersion.metadataVersion).databaseValue,
            item.symlinkTargetPath.databaseValue, Int64(item.posixPermissions).databaseValue,
            record.trashedFrom.databaseValue, record.trashedName.databaseValue,
            item.changeTime.totalNanoseconds.databaseValue, Int64(item.ownerID).databaseValue,
            Int64(item.groupID).databaseValue, record.remoteKey.databaseValue,
            Int64(item.isDownloaded ? 0 : 1).databaseValue,
            record.linkOf.databaseValue, Int64(item.linkCount).databaseValue,
            Int64(bitPattern: item.deviceNumber).databaseValue,
        ]
    }

    static func upsert(_ db: Database, _ record: Record) throws {
        try upsert(db, values: values(of: record))
    }

    /// Inserts or replaces one row given as column values (see `values(of:)`).
    static func upsert(_ db: Database, values: [DatabaseValue]) throws {
        if values.count == legacyColumnCount {
            try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO item (\(legacyColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )
            .execute(arguments: StatementArguments(values))
            return
        }
        // A journal an earlier docfs left (format 2's columns): the newer columns keep what they had.
        // Cached: every action runs this, and parsing it cost more than executing it.
        let sql =
            switch values.count {
            case format2ColumnCount: format2UpsertSQL
            case contentColumnCount: contentUpsertSQL
            default: upsertSQL
            }
        try db.cachedStatement(sql: sql)
            .execute(arguments: StatementArguments(values))
    }

    static let upsertSQL = upsertSQL(columns)
    static let format2UpsertSQL = upsertSQL(format2Columns)
    static let contentUpsertSQL = upsertSQL(contentColumns)

    /// INSERT … ON CONFLICT(id) DO UPDATE of every named column but `id`.
    private static func upsertSQL(_ names: String) -> String {
        let list = names.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let placeholders = Array(repeating: "?", count: list.count).joined(separator: ", ")
        let updates = list.dropFirst().map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return "INSERT INTO item (\(names)) VALUES (\(placeholders)) ON CONFLICT(id) DO UPDATE SET \(updates)"
    }

    static func delete(_ db: Database, _ row: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [row])
        try db.cachedStatement(sql: "DELETE FROM xattr WHERE item = ?").execute(arguments: [row])
    }

    static func record(from row: Row) -> Record {
        let id: Int64 = row[0]
        let parent: Int64? = row[1]
        let kind = ItemKind(rawValue: UInt8(clamping: row[3] as Int)) ?? .file
        let lastUsed: Int64? = row[8]
        let contentsCaps: Int64? = row[12]
        var item = Item(
            identifier: LocalStore.identifier(forRow: id),
            parentIdentifier: parent.map(LocalStore.identifier(forRow:)) ?? .rootContainer,
            filename: row[2], kind: kind, contentType: ContentType(row[4] as String), documentSize: row[5],
            childItemCount: kind == .folder ? 0 : nil,
            creationDate: .distantPast, contentModificationDate: .distantPast,
            tagData: row[9], favoriteRank: row[10],
            capabilities: Capabilities(rawValue: UInt32(truncatingIfNeeded: row[11] as Int64)),
            itemVersion: ItemVersion(contentVersion: UInt64(bitPattern: row[13] as Int64), metadataVersion: UInt64(bitPattern: row[14] as Int64)),
            symlinkTargetPath: row[15], posixPermissions: UInt16(truncatingIfNeeded: row[16] as Int),
            ownerID: UInt32(truncatingIfNeeded: row[20] as Int64), groupID: UInt32(truncatingIfNeeded: row[21] as Int64))
        item.creationTime = FileTime(totalNanoseconds: row[6])
        item.modificationTime = FileTime(totalNanoseconds: row[7])
        item.accessTime = lastUsed.map { FileTime(totalNanoseconds: $0) }
        item.changeTime = FileTime(totalNanoseconds: row[19])
        item.isDownloaded = (row[23] as Int64? ?? 0) == 0
        item.linkCount = max(Int(row[25] as Int64? ?? 1), 1)
        item.deviceNumber = UInt64(bitPattern: row[26] as Int64? ?? 0)
        var record = Record(
            row: id, parent: parent, item: item,
            contentsPolicy: contentsCaps.map { Capabilities(rawValue: UInt32(truncatingIfNeeded: $0)) },
            trashedFrom: row[17], trashedName: row[18])
        record.remoteKey = row[22]
        record.linkOf = row[24]
        return record
    }
}

extension Schema {
    /// The partial index of folders by parent, which counts a folder's subfolders without reading
    /// its files (`TreeReader`). Returns the number of folders indexed when it had to be made (a
    /// store made by an earlier docfs), nil when it was there.
    static func addFolderIndex(_ db: Database) throws -> Int? {
        let exists = try Bool.fetchOne(db, sql: "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'index' AND name = 'item_folders'") ?? false
        if exists { return nil }
        try db.execute(sql: folderIndexSQL)
        return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item WHERE kind = 1") ?? 0
    }

    /// The columns of contents on demand (`remoteKey`, `absent`), added to a store made by an
    /// earlier docfs. Cheap: SQLite adds columns with defaults without rewriting the table.
    static func addContentColumns(_ db: Database) throws {
        let names = Set(try Row.fetchAll(db, sql: "PRAGMA table_info(item)").map { $0["name"] as String })
        if !names.contains("remoteKey") { try db.execute(sql: "ALTER TABLE item ADD COLUMN remoteKey TEXT") }
        if !names.contains("absent") { try db.execute(sql: "ALTER TABLE item ADD COLUMN absent INTEGER NOT NULL DEFAULT 0") }
        // Hard links (a name row's `linkOf` is the item it names; `links` counts an item's names)
        // and device nodes' numbers (`rdev`).
        if !names.contains("linkOf") { try db.execute(sql: "ALTER TABLE item ADD COLUMN linkOf INTEGER") }
        if !names.contains("links") { try db.execute(sql: "ALTER TABLE item ADD COLUMN links INTEGER NOT NULL DEFAULT 1") }
        if !names.contains("rdev") { try db.execute(sql: "ALTER TABLE item ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0") }
        try db.execute(sql: "CREATE INDEX IF NOT EXISTS item_names ON item(linkOf) WHERE linkOf IS NOT NULL")
    }

    static let folderIndexSQL = "CREATE INDEX IF NOT EXISTS item_folders ON item(parent) WHERE kind = 1"
}
