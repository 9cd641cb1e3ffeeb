import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import NIOSSL

/// The metadata half of the server: items with permanent identifiers, content versions, the
/// layout and the change log, in PostgreSQL, through postgres-nio's `PostgresClient`.
///
/// Every change is an operation with a client-supplied id (the outbox entry's UUID). It runs in
/// one transaction that takes a global advisory lock, answers a retry from `docfs_operations`
/// (nothing is applied twice), applies the change, appends to `docfs_changes` and sends
/// `pg_notify('docfs_changes', position)`, delivered on commit. Because writers are serialized
/// by the lock, change log positions commit in increasing order: a reader that has seen position
/// N never later finds a smaller position appear (a plain bigserial does not promise that).
///
/// The client's `run()` runs in a task for the database object's whole life; call `shutdown()`.
package final class RemoteDatabase: Sendable {
    package static let notificationChannel = "docfs_changes"
    /// The advisory lock key that serializes writers (and migrations, with another key).
    static let writeLock: Int64 = 0x646f_6366_7301
    static let migrationLock: Int64 = 0x646f_6366_7302

    let client: PostgresClient
    let runTask: Task<Void, Never>
    let logger: Logger
    /// How long one call may wait for a connection and its answer before it reports the server
    /// unreachable (the pool itself keeps trying to connect, with backoff, for as long as it lives).
    let operationTimeout: Duration
    /// The transaction `batched` holds open: operations go into it (`RemoteDatabase+Batch`).
    let activeBatch = Mutex<OperationBatch?>(nil)
    /// Where batches open their own connection.
    let url: PostgresURL

    package init(url: PostgresURL, logger: Logger = Logger(label: "docfs.postgres"), maximumConnections: Int = 8,
                operationTimeout: Duration = .seconds(30)) {
        // A certificate file that cannot be read fails every connection (and `probe` says why).
        let tls = (try? url.clientTLS()) ?? .require(TLSConfiguration.makeClientConfiguration())
        var configuration = PostgresClient.Configuration(host: url.host, port: url.port, username: url.user,
                                                          password: url.password, database: url.database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(10)
        // The pool logs every failed connection attempt at info: keep its background log to warnings.
        var background = logger
        background.logLevel = max(logger.logLevel, .warning)
        let client = PostgresClient(configuration: configuration, backgroundLogger: background)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.url = url
        self.runTask = Task { await client.run() }
    }

    /// Stops the client (cancels its `run()` and waits for it).
    package func shutdown() async {
        runTask.cancel()
        await runTask.value
    }

    // MARK: Schema

    /// The schema version on the server (0: none yet).
    package func schemaVersion() async throws -> Int {
        try await mapped { [self] in
            let exists = try await client.query("SELECT to_regclass('docfs_schema_migrations') IS NOT NULL", logger: logger)
            var present = false
            for try await (value) in exists.decode(Bool.self) { present = value }
            guard present else { return 0 }
            let rows = try await client.query("SELECT coalesce(max(version), 0) FROM docfs_schema_migrations", logger: logger)
            var version = 0
            for try await (value) in rows.decode(Int.self) { version = value }
            return version
        }
    }

    /// Applies the migrations the server lacks; returns the schema version afterwards. Refuses
    /// (`RemoteError.schemaTooNew`) a server whose schema is newer than this code knows.
    /// `upTo` stops at an older version (a test of what a newer docfs does to an older server).
    @discardableResult
    package func migrate(upTo target: Int = RemoteSchema.latest) async throws -> Int {
        let logger = self.logger
        return try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> Int in
                try await conn.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                try await conn.query("""
                    CREATE TABLE IF NOT EXISTS docfs_schema_migrations (
                        version    integer PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """, logger: logger)
                var current = 0
                for try await (v) in try await conn.query("SELECT coalesce(max(version), 0) FROM docfs_schema_migrations",
                                                          logger: logger).decode(Int.self) { current = v }
                if current > RemoteSchema.latest {
                    throw RemoteError.schemaTooNew(found: current, supported: RemoteSchema.latest)
                }
                for migration in RemoteSchema.migrations where migration.version > current && migration.version <= target {
                    for statement in migration.statements {
                        try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await conn.query("INSERT INTO docfs_schema_migrations (version) VALUES (\(migration.version))",
                                         logger: logger)
                    logger.info("applied docfs schema migration", metadata: ["version": "\(migration.version)"])
                    current = migration.version
                }
                return current
            }
        }
    }

    // MARK: Reading

    static let itemColumns = """
        id, parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode, tags,
        favorite_rank, symlink_target, content_key, content_version, metadata_version, trashed_ns, deleted
        """

    package func rootID() async throws -> Int64 {
        try await mapped { [self] in
            let rows = try await client.query("SELECT id FROM docfs_items WHERE parent_id IS NULL", logger: logger)
            for try await (id) in rows.decode(Int64.self) { return id }
            throw RemoteError.invalid("the server has no root item: run the migration first")
        }
    }

    package func item(_ id: Int64) async throws -> RemoteItem? {
        try await mapped { [self] in
            let rows = try await client.query(
                "SELECT \(unescaped: Self.itemColumns) FROM docfs_items WHERE id = \(id)", logger: logger)
            return try await Self.decodeItems(rows).first
        }
    }

    /// The live (not deleted, not trashed) children of a folder, by name.
    package func children(of parentID: Int64) async throws -> [RemoteItem] {
        try await mapped { [self] in
            let rows = try await client.query("""
                SELECT \(unescaped: Self.itemColumns) FROM docfs_items
                WHERE parent_id = \(parentID) AND NOT deleted AND trashed_ns IS NULL ORDER BY name
                """, logger: logger)
            return try await Self.decodeItems(rows)
        }
    }

    /// Change log entries after `anchor` (0: from the start), in order.
    package func changes(since anchor: Int64, limit: Int = 1000) async throws -> [RemoteChange] {
        try await mapped { [self] in
            let rows = try await client.query("""
                SELECT position, item_id, kind, operation_id, content_version, metadata_version, at_ns
                FROM docfs_changes WHERE position > \(anchor) ORDER BY position LIMIT \(limit)
                """, logger: logger)
            var out: [RemoteChange] = []
            for try await (position, item, kind, op, cv, mv, at) in rows.decode((Int64, Int64, String, UUID, Int64, Int64, Int64).self) {
                guard let k = RemoteChange.Kind(rawValue: kind) else { continue }
                out.append(RemoteChange(position: position, itemID: item, kind: k, operationID: op,
                                        contentVersion: cv, metadataVersion: mv, atNs: at))
            }
            return out
        }
    }

    /// The latest change log position (0: none yet).
    /// The change at `position` (nil: none there, trimmed by gc or never made): a replica's
    /// witness that the server still has the history it applied (a restore rewinds positions).
    package func change(at position: Int64) async throws -> RemoteChange? {
        try await changes(since: position - 1, limit: 1).first { $0.position == position }
    }

    package func latestPosition() async throws -> Int64 {
        try await mapped { [self] in
            let rows = try await client.query("SELECT coalesce(max(position), 0) FROM docfs_changes", logger: logger)
            for try await (p) in rows.decode(Int64.self) { return p }
            return 0
        }
    }

    /// The MIME words of the server's layout as this replica resolves them (`{"image/png":
    /// "public.png"}`): the server's rules compare identifiers only, and cannot read the
    /// shared-mime-info database a replica resolves them with.
    package func setLayoutMIMETypes(json: String) async throws {
        let logger = self.logger
        try await mapped { [self] in
            _ = try await client.query("SELECT docfs_set_layout_mime(\(json))", logger: logger)
        }
    }

    /// The stored layout JSON, if one was set.
    package func layout() async throws -> String? {
        try await mapped { [self] in
            let rows = try await client.query("SELECT layout::text FROM docfs_layout WHERE id = 1", logger: logger)
            for try await (json) in rows.decode(String.self) { return json }
            return nil
        }
    }

    /// LISTENs on `docfs_changes` on a connection of its own for as long as `body` runs; each
    /// element is the change log position a committed change wrote.
    package func withChangeNotifications<T: Sendable>(
        _ body: (AsyncCompactMapSequence<PostgresNotificationSequence, Int64>) async throws -> T
    ) async throws -> T {
        do {
            return try await client.withConnection { conn in
                try await conn.listen(on: Self.notificationChannel) { notifications in
                    try await body(notifications.compactMap { Int64($0.payload) })
                }
            }
        } catch {
            throw Self.map(error)
        }
    }

    // MARK: Operations (each idempotent by operation id)

    /// Creates an item under `parentID` and returns its permanent id (`AppliedChange.itemID`).
    /// A file may come with its first content version's object. A name another item took first
    /// gets a suffix (`AppliedChange.name` says which); a folder deleted meanwhile comes back.
    package func createItem(operationID: UUID, parentID: Int64, name: String, kind: RemoteItemKind,
                           attributes: RemoteItemAttributes, content: RemoteContent? = nil) async throws -> AppliedChange {
        try Self.checkName(name)
        return try await apply(operationID: operationID, kind: .create) { conn, logger in
            try await Self.destinationFolder(parentID, operationID: operationID, conn: conn, logger: logger)
            let name = try await Self.freeName(name, isFolder: kind == .directory, parentID: parentID, except: nil,
                                               conn: conn, logger: logger)
            let now = Self.serverNow
            let rows = try await conn.query("""
                INSERT INTO docfs_items (parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns,
                                         uid, gid, mode, tags, symlink_target, content_key, types)
                VALUES (\(parentID), \(name), \(kind.rawValue), \(content?.size ?? 0), \(attributes.createdNs),
                        \(attributes.modifiedNs), \(unescaped: now), \(attributes.modifiedNs), \(Int64(attributes.uid)),
                        \(Int64(attributes.gid)), \(Int32(bitPattern: attributes.mode & 0o7777)), \(attributes.tags),
                        \(attributes.symlinkTarget), \(content?.key), \(attributes.types))
                RETURNING id
                """, logger: logger)
            var id: Int64 = 0
            for try await (v) in rows.decode(Int64.self) { id = v }
            if kind == .file {
                try await Self.insertVersion(id, 1, content, now: now, conn: conn, logger: logger)
            }
            return (id, 1, 1)
        }
    }

    /// A new content version of a file, if its content version is still `expectedVersion`
    /// (compare-and-swap); otherwise `RemoteError.versionConflict` with the current one.
    /// Whether a file that does not allow writing takes them is the server's to decide (its
    /// rules trigger: the first contents of a file made empty are its creating program's).
    package func newContentVersion(operationID: UUID, itemID: Int64, expectedVersion: Int64, content: RemoteContent,
                                  modifiedNs: Int64) async throws -> AppliedChange {
        try await apply(operationID: operationID, kind: .content) { conn, logger in
            let now = Self.serverNow
            // An edit against a delete keeps the edit: the file comes back with these contents.
            let deletedRows = try await conn.query(
                "SELECT parent_id, name, kind FROM docfs_items WHERE id = \(itemID) AND deleted FOR UPDATE", logger: logger)
            for try await (parent, name, kind) in deletedRows.decode((Int64?, String, String).self) where kind == "file" {
                guard let parent else { break }
                try await Self.destinationFolder(parent, operationID: operationID, conn: conn, logger: logger)
                let free = try await Self.freeName(name, isFolder: false, parentID: parent, except: itemID, conn: conn, logger: logger)
                let rows = try await conn.query("""
                    UPDATE docfs_items SET deleted = false, trashed_ns = NULL, name = \(free), content_key = \(content.key),
                           size = \(content.size), content_version = content_version + 1,
                           metadata_version = metadata_version + 1, modified_ns = \(modifiedNs), changed_ns = \(unescaped: now)
                    WHERE id = \(itemID) RETURNING content_version, metadata_version
                    """, logger: logger)
                for try await (cv, mv) in rows.decode((Int64, Int64).self) {
                    try await Self.insertVersion(itemID, cv, content, now: now, conn: conn, logger: logger)
                    return (itemID, cv, mv)
                }
            }
            let rows = try await conn.query("""
                UPDATE docfs_items SET content_key = \(content.key), size = \(content.size),
                       content_version = content_version + 1, metadata_version = metadata_version + 1,
                       modified_ns = \(modifiedNs), changed_ns = \(unescaped: now)
                WHERE id = \(itemID) AND content_version = \(expectedVersion) AND NOT deleted AND kind = 'file'
                RETURNING content_version, metadata_version
                """, logger: logger)
            for try await (cv, mv) in rows.decode((Int64, Int64).self) {
                try await Self.insertVersion(itemID, cv, content, now: now, conn: conn, logger: logger)
                return (itemID, cv, mv)
            }
            let item = try await Self.liveItem(itemID, conn: conn, logger: logger)
            guard item.kind == "file" else { throw RemoteError.invalid("item \(itemID) is not a file") }
            throw RemoteError.versionConflict(itemID: itemID, expected: expectedVersion, current: item.contentVersion)
        }
    }

    /// Renames and/or moves an item (rename: same parent, new name). With `expectedParentID` and
    /// `expectedName` (where the replica saw it), a move made elsewhere first wins: the item is
    /// left where it is and `RemoteError.movedElsewhere` tells the replica to follow it.
    package func moveItem(operationID: UUID, itemID: Int64, toParentID: Int64, name: String,
                         expectedParentID: Int64? = nil, expectedName: String? = nil, types: [String]? = nil) async throws -> AppliedChange {
        try Self.checkName(name)
        return try await apply(operationID: operationID, kind: .move) { conn, logger in
            let item = try await Self.liveItem(itemID, conn: conn, logger: logger)
            guard item.parentID != nil else { throw RemoteError.invalid("the root cannot be moved") }
            if let expectedParentID, let expectedName {
                let current = try await Self.currentName(itemID, conn: conn, logger: logger)
                if item.parentID != expectedParentID || current != expectedName || item.trashed {
                    throw RemoteError.movedElsewhere(itemID: itemID)
                }
            }
            try await Self.destinationFolder(toParentID, operationID: operationID, conn: conn, logger: logger)
            if item.kind == "directory" {
                // Refuse a move into the item itself or one of its descendants.
                let rows = try await conn.query("""
                    WITH RECURSIVE up(id, parent_id) AS (
                        SELECT id, parent_id FROM docfs_items WHERE id = \(toParentID)
                        UNION ALL SELECT i.id, i.parent_id FROM docfs_items i JOIN up ON i.id = up.parent_id)
                    SELECT count(*) FROM up WHERE id = \(itemID)
                    """, logger: logger)
                for try await (n) in rows.decode(Int64.self) where n > 0 {
                    throw RemoteError.invalid("item \(itemID) cannot move into itself or its own subfolder")
                }
            }
            // A name taken there is suffixed ("NAME 2.EXT"): the rules trigger tells that from a rename.
            let name = try await Self.freeName(name, isFolder: item.kind == "directory", parentID: toParentID,
                                               except: itemID, conn: conn, logger: logger)
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET parent_id = \(toParentID), name = \(name), types = coalesce(\(types), types),
                       metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(itemID) RETURNING content_version, metadata_version
                """)
            return (itemID, mv.0, mv.1)
        }
    }

    /// Deletes an item for good (a tombstone stays). A directory must have no children left.
    /// With `expectedContentVersion`, a file changed since (by another replica) is not deleted:
    /// `RemoteError.versionConflict` (an edit against a delete keeps the edit).
    package func deleteItem(operationID: UUID, itemID: Int64, expectedContentVersion: Int64? = nil) async throws -> AppliedChange {
        try await apply(operationID: operationID, kind: .delete) { conn, logger in
            let item = try await Self.liveItem(itemID, conn: conn, logger: logger)
            guard item.parentID != nil else { throw RemoteError.invalid("the root cannot be deleted") }
            if let expectedContentVersion, item.kind == "file", item.contentVersion != expectedContentVersion {
                throw RemoteError.versionConflict(itemID: itemID, expected: expectedContentVersion, current: item.contentVersion)
            }
            if item.kind == "directory" {
                let rows = try await conn.query(
                    "SELECT count(*) FROM docfs_items WHERE parent_id = \(itemID) AND NOT deleted", logger: logger)
                for try await (n) in rows.decode(Int64.self) where n > 0 { throw RemoteError.notEmpty(itemID: itemID) }
            }
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET deleted = true, metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(itemID) RETURNING content_version, metadata_version
                """)
            return (itemID, mv.0, mv.1)
        }
    }

    /// Moves an item to the trash: it keeps its parent and name (where it came from) and gives
    /// up its name there until it is restored.
    package func trashItem(operationID: UUID, itemID: Int64) async throws -> AppliedChange {
        try await apply(operationID: operationID, kind: .trash) { conn, logger in
            let item = try await Self.liveItem(itemID, conn: conn, logger: logger)
            guard item.parentID != nil else { throw RemoteError.invalid("the root cannot be trashed") }
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET trashed_ns = coalesce(trashed_ns, \(unescaped: Self.serverNow)),
                       metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(itemID) RETURNING content_version, metadata_version
                """)
            return (itemID, mv.0, mv.1)
        }
    }

    /// Restores a trashed item into `toParentID` under `name`.
    package func untrashItem(operationID: UUID, itemID: Int64, toParentID: Int64, name: String,
                            types: [String]? = nil) async throws -> AppliedChange {
        try Self.checkName(name)
        return try await apply(operationID: operationID, kind: .untrash) { conn, logger in
            let item = try await Self.liveItem(itemID, conn: conn, logger: logger)
            guard item.trashed else { throw RemoteError.invalid("item \(itemID) is not in the trash") }
            try await Self.destinationFolder(toParentID, operationID: operationID, conn: conn, logger: logger)
            let name = try await Self.freeName(name, isFolder: item.kind == "directory", parentID: toParentID,
                                               except: itemID, conn: conn, logger: logger)
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET trashed_ns = NULL, parent_id = \(toParentID), name = \(name), types = coalesce(\(types), types),
                       metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(itemID) RETURNING content_version, metadata_version
                """)
            return (itemID, mv.0, mv.1)
        }
    }

    /// Owners, mode, times, tags, favourite rank.
    package func setAttributes(operationID: UUID, itemID: Int64, changes: RemoteAttributeChanges) async throws -> AppliedChange {
        try await apply(operationID: operationID, kind: .attributes) { conn, logger in
            _ = try await Self.liveItem(itemID, conn: conn, logger: logger)
            let setRank = changes.favoriteRank != nil
            let rank: Int64? = changes.favoriteRank ?? nil
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET
                    uid = coalesce(\(changes.uid.map { Int64($0) }), uid),
                    gid = coalesce(\(changes.gid.map { Int64($0) }), gid),
                    mode = coalesce(\(changes.mode.map { Int32(bitPattern: $0 & 0o7777) }), mode),
                    created_ns = coalesce(\(changes.createdNs), created_ns),
                    modified_ns = coalesce(\(changes.modifiedNs), modified_ns),
                    accessed_ns = coalesce(\(changes.accessedNs), accessed_ns),
                    tags = coalesce(\(changes.tags), tags),
                    favorite_rank = CASE WHEN \(setRank) THEN \(rank) ELSE favorite_rank END,
                    metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(itemID) RETURNING content_version, metadata_version
                """)
            return (itemID, mv.0, mv.1)
        }
    }

    /// Stores the layout (folder rules, types) as JSON; logged as a change of the root.
    package func setLayout(operationID: UUID, json: String) async throws -> AppliedChange {
        try await apply(operationID: operationID, kind: .layout) { conn, logger in
            let now = Self.serverNow
            try await conn.query("""
                INSERT INTO docfs_layout (id, layout, updated_ns) VALUES (1, \(json)::jsonb, \(unescaped: now))
                ON CONFLICT (id) DO UPDATE SET layout = excluded.layout, updated_ns = excluded.updated_ns
                """, logger: logger)
            let mv = try await Self.updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET metadata_version = metadata_version + 1, changed_ns = \(unescaped: now)
                WHERE parent_id IS NULL RETURNING content_version, metadata_version
                """)
            let root = try await conn.query("SELECT id FROM docfs_items WHERE parent_id IS NULL", logger: logger)
            var rootID: Int64 = 0
            for try await (id) in root.decode(Int64.self) { rootID = id }
            return (rootID, mv.0, mv.1)
        }
    }

    // MARK: Machinery

    typealias Body = @Sendable (PostgresConnection, Logger) async throws -> (itemID: Int64, contentVersion: Int64, metadataVersion: Int64)

    /// One operation in one transaction: serialize, answer a replay, apply, log, notify.
    private func apply(operationID: UUID, kind: RemoteChange.Kind, _ body: @escaping Body) async throws -> AppliedChange {
        let logger = self.logger
        if let batch = activeBatch.withLock({ $0 }) {
            do {
                return try await batch.savepoint { conn in
                    try await Self.applyOperation(operationID: operationID, kind: kind, body, conn: conn, logger: logger)
                }
            } catch {
                throw Self.map(error)
            }
        }
        return try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> AppliedChange in
                try await conn.query("SELECT pg_advisory_xact_lock(\(Self.writeLock))", logger: logger)
                return try await Self.applyOperation(operationID: operationID, kind: kind, body, conn: conn, logger: logger)
            }
        }
    }

    /// The operation in the transaction the caller holds (with the write lock).
    static func applyOperation(operationID: UUID, kind: RemoteChange.Kind, _ body: Body, conn: PostgresConnection,
                               logger: Logger) async throws -> AppliedChange {
        let prior = try await conn.query("""
            SELECT kind, item_id, content_version, metadata_version, position
            FROM docfs_operations WHERE operation_id = \(operationID)
            """, logger: logger)
        for try await (k, item, cv, mv, position) in prior.decode((String, Int64, Int64, Int64, Int64).self) {
            guard k == kind.rawValue else { throw RemoteError.operationReused(operationID, previousKind: k) }
            let name = try await Self.currentName(item, conn: conn, logger: logger)
            return AppliedChange(itemID: item, contentVersion: cv, metadataVersion: mv, position: position,
                                 replayed: true, name: name)
        }
        let result = try await body(conn, logger)
        let now = Self.serverNow
        // The change logged, the operation recorded, the replicas notified and the item's name
        // read back in one statement (one round trip).
        let rows = try await conn.query("""
            WITH c AS (
                INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns)
                VALUES (\(result.itemID), \(kind.rawValue), \(operationID), \(result.contentVersion),
                        \(result.metadataVersion), \(unescaped: now))
                RETURNING position),
            o AS (
                INSERT INTO docfs_operations (operation_id, kind, item_id, content_version, metadata_version, position, applied_ns)
                SELECT \(operationID), \(kind.rawValue), \(result.itemID), \(result.contentVersion), \(result.metadataVersion),
                       c.position, \(unescaped: now) FROM c)
            SELECT c.position, (SELECT name FROM docfs_items WHERE id = \(result.itemID))
            FROM c, LATERAL (SELECT pg_notify(\(Self.notificationChannel), c.position::text)) AS n
            """, logger: logger)
        var position: Int64 = 0
        var name: String?
        for try await (p, n) in rows.decode((Int64, String?).self) { position = p; name = n }
        return AppliedChange(itemID: result.itemID, contentVersion: result.contentVersion,
                             metadataVersion: result.metadataVersion, position: position, replayed: false, name: name)
    }

    struct Row {
        var kind: String
        var parentID: Int64?
        var contentVersion: Int64
        var trashed: Bool
    }

    /// The item, which must exist and not be deleted (`RemoteError.notFound` otherwise). Locks its row.
    static func liveItem(_ id: Int64, conn: PostgresConnection, logger: Logger) async throws -> Row {
        let rows = try await conn.query("""
            SELECT kind, parent_id, content_version, trashed_ns IS NOT NULL FROM docfs_items
            WHERE id = \(id) AND NOT deleted FOR UPDATE
            """, logger: logger)
        for try await (kind, parent, cv, trashed) in rows.decode((String, Int64?, Int64, Bool).self) {
            return Row(kind: kind, parentID: parent, contentVersion: cv, trashed: trashed)
        }
        throw RemoteError.notFound(itemID: id)
    }

    static func checkNameFree(parentID: Int64, name: String, except: Int64?, conn: PostgresConnection,
                              logger: Logger) async throws {
        let rows = try await conn.query("""
            SELECT id FROM docfs_items
            WHERE parent_id = \(parentID) AND name = \(name) AND NOT deleted AND trashed_ns IS NULL
            """, logger: logger)
        for try await (id) in rows.decode(Int64.self) where id != except {
            throw RemoteError.nameCollision(parentID: parentID, name: name)
        }
    }

    static func updateReturningVersions(conn: PostgresConnection, logger: Logger,
                                        _ query: PostgresQuery) async throws -> (Int64, Int64) {
        let rows = try await conn.query(query, logger: logger)
        for try await (cv, mv) in rows.decode((Int64, Int64).self) { return (cv, mv) }
        throw RemoteError.invalid("the item changed under the update")
    }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.utf8.contains(0),
              name.utf8.count <= 255 else {
            throw RemoteError.invalid("\"\(name)\" is not a valid item name")
        }
    }

    /// The server's time in nanoseconds (the transaction's start), for every time the server
    /// keeps that gc or the log trimming compare: one clock for all replicas, however theirs run.
    static let serverNow = "(extract(epoch from now()) * 1000000000)::bigint"

    /// The server's time now, in nanoseconds: the cutoffs of `docfs remote gc` are measured by it.
    package func serverTimeNs() async throws -> Int64 {
        try await mapped { [self] in
            let rows = try await client.query("SELECT \(unescaped: Self.serverNow)", logger: logger)
            for try await (ns) in rows.decode(Int64.self) { return ns }
            throw RemoteError.server("the server gave no time")
        }
    }

    static func decodeItems(_ rows: PostgresRowSequence) async throws -> [RemoteItem] {
        var out: [RemoteItem] = []
        for try await row in rows {
            let c = row.makeRandomAccess()
            out.append(RemoteItem(
                id: try c[0].decode(Int64.self), parentID: try c[1].decode(Int64?.self), name: try c[2].decode(String.self),
                kind: RemoteItemKind(rawValue: try c[3].decode(String.self)) ?? .file, size: try c[4].decode(Int64.self),
                createdNs: try c[5].decode(Int64.self), modifiedNs: try c[6].decode(Int64.self),
                changedNs: try c[7].decode(Int64.self), accessedNs: try c[8].decode(Int64.self),
                uid: UInt32(truncatingIfNeeded: try c[9].decode(Int64.self)),
                gid: UInt32(truncatingIfNeeded: try c[10].decode(Int64.self)),
                mode: UInt32(bitPattern: try c[11].decode(Int32.self)), tags: try c[12].decode([String].self),
                favoriteRank: try c[13].decode(Int64?.self), symlinkTarget: try c[14].decode(String?.self),
                contentKey: try c[15].decode(String?.self), contentVersion: try c[16].decode(Int64.self),
                metadataVersion: try c[17].decode(Int64.self), trashedNs: try c[18].decode(Int64?.self),
                deleted: try c[19].decode(Bool.self)))
        }
        return out
    }

    /// Runs `body` within `operationTimeout`, turning postgres-nio's errors into `RemoteError`s.
    func mapped<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = operationTimeout
        do {
            return try await withDeadline(timeout, timedOut: { RemoteError.unreachable("no answer within \(timeout)") }, body)
        } catch {
            throw Self.map(error)
        }
    }
}
