import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import NIOSSL
import DocFSProvider
import DocFSWire

/// The metadata half of the server: items with permanent identifiers, content versions, the
/// layout and the change log, in PostgreSQL, through postgres-nio's `PostgresClient`.
///
/// A replica reads the tables and writes only through the server's functions, which check what
/// it sends (`RemoteSchema+Operations`, `RemoteSchema+Doors`): a chunk of operations is one call
/// of `docfs_apply` (`RemoteDatabase+Apply`), each operation idempotent by its client-supplied
/// id (the outbox entry's UUID). Change log positions are given as each call commits, in commit
/// order (`RemoteSchema+Positions`, schema 17; a global lock before): a reader that has seen
/// position N never later finds a smaller position appear (a plain bigserial does not promise that).
///
/// The client's `run()` runs in a task for the database object's whole life; call `shutdown()`.
package final class RemoteDatabase: Sendable {
    package static let notificationChannel = "docfs_changes"
    /// The advisory key that serialized writers before schema 14 (now a row of `docfs_locks`, which
    /// no replica may lock: `RemoteSchema+Guards`), and the one of migrations.
    static let writeLock: Int64 = 0x646f_6366_7301
    static let migrationLock: Int64 = 0x646f_6366_7302

    let client: PostgresClient
    let runTask: Task<Void, Never>
    let logger: Logger
    /// How long one call may wait for a connection and its answer before it reports the server
    /// unreachable (the pool itself keeps trying to connect, with backoff, for as long as it lives).
    let operationTimeout: Duration
    /// Where gc's lock opens a connection of its own.
    let url: PostgresURL
    /// Where `withChangeNotifications` LISTENs, on a connection of its own (`RemoteDatabase+Listen`).
    let listenURL: PostgresURL
    /// Whether the server's items have `link_of` (schema 12 on): 0 not known yet, 1 no, 2 yes
    /// (learnt from `schemaVersion()` or `migrate()`, and asked before the first read of items).
    let serverKeepsNames = Atomic<Int>(0)
    /// When this client last asked the server to end overstaying sessions (`RemoteDatabase+Overstayers`).
    let lastOverstayCheck = Mutex<ContinuousClock.Instant?>(nil)

    /// `maximumConnections`: the pool's bound (it opens them on demand and closes one idle for
    /// 60 s); `listenURL`: where notifications are listened for (default `url`).
    package init(
        url: PostgresURL, logger: Logger = Logger(label: "docfs.postgres"), maximumConnections: Int = 8,
        operationTimeout: Duration = .seconds(30), listenURL: PostgresURL? = nil
    ) {
        // A certificate file that cannot be read fails every connection (and `probe` says why).
        let tls = (try? url.clientTLS()) ?? .require(TLSConfiguration.makeClientConfiguration())
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user,
            password: url.password, database: url.database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = .seconds(10)
        configuration.options.additionalStartupParameters = [("application_name", Self.poolApplicationName)]
        // The pool logs every failed connection attempt at info: keep its background log to warnings.
        var background = logger
        background.logLevel = max(logger.logLevel, .warning)
        let client = PostgresClient(configuration: configuration, backgroundLogger: background)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.url = url
        self.listenURL = listenURL ?? url
        self.runTask = Task { await client.run() }
    }

    /// Stops the client (cancels its `run()` and waits for it, at most `operationTimeout`: the pool
    /// ends once its connections have, and one a faulty link left half made may never end; the
    /// caller, a command ending or a mount going away, goes on without it).
    package func shutdown() async {
        runTask.cancel()
        let run = runTask
        _ = try? await withDeadline(operationTimeout, timedOut: { RemoteError.unreachable("the client did not stop") }) {
            await run.value
        }
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
            serverKeepsNames.store(version >= ServerSchemaVersions.names ? 2 : 1, ordering: .relaxed)
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
                try await Self.lockMigrations(conn, logger: logger)
                try await conn.perform(
                    """
                    CREATE TABLE IF NOT EXISTS docfs_schema_migrations (
                        version    integer PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """, logger: logger)
                var current = 0
                for try await (v) in try await conn.query(
                    "SELECT coalesce(max(version), 0) FROM docfs_schema_migrations",
                    logger: logger
                ).decode(Int.self) { current = v }
                if current > RemoteSchema.latest {
                    throw RemoteError.schemaTooNew(found: current, supported: RemoteSchema.latest)
                }
                for migration in RemoteSchema.migrations where migration.version > current && migration.version <= target {
                    for statement in migration.statements {
                        try await conn.perform(PostgresQuery(unsafeSQL: statement), logger: logger)
                    }
                    try await conn.perform(
                        "INSERT INTO docfs_schema_migrations (version) VALUES (\(migration.version))",
                        logger: logger)
                    logger.info("applied docfs schema migration", metadata: ["version": "\(migration.version)"])
                    current = migration.version
                }
                serverKeepsNames.store(current >= ServerSchemaVersions.names ? 2 : 1, ordering: .relaxed)
                return current
            }
        }
    }

    // MARK: Reading

    static let itemColumnsBeforeNames = """
        id, parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode, tags,
        favorite_rank, symlink_target, content_key, content_version, metadata_version, trashed_ns, deleted
        """

    /// The columns of an item row; an older server has no names: its rows read as items.
    func itemColumns() async throws -> String {
        if serverKeepsNames.load(ordering: .relaxed) == 0 { _ = try await schemaVersion() }
        return Self.itemColumnsBeforeNames + (serverKeepsNames.load(ordering: .relaxed) == 2 ? ", link_of" : ", NULL::bigint")
    }

    package func rootID() async throws -> Int64 {
        try await mapped { [self] in
            let rows = try await client.query("SELECT id FROM docfs_items WHERE parent_id IS NULL", logger: logger)
            for try await (id) in rows.decode(Int64.self) { return id }
            throw RemoteError.invalid("the server has no root item: run the migration first")
        }
    }

    package func item(_ id: Int64) async throws -> ServerItem? {
        let columns = try await itemColumns()
        return try await mapped { [self] in
            let rows = try await client.query(
                "SELECT \(unescaped: columns) FROM docfs_items WHERE id = \(id)", logger: logger)
            return try await Self.decodeItems(rows).first
        }
    }

    /// The live (not deleted, not trashed) children of a folder, by name.
    package func children(of parentID: Int64) async throws -> [ServerItem] {
        let columns = try await itemColumns()
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT \(unescaped: columns) FROM docfs_items
                WHERE parent_id = \(parentID) AND NOT deleted AND trashed_ns IS NULL ORDER BY name
                """, logger: logger)
            return try await Self.decodeItems(rows)
        }
    }

    /// Change log entries after `anchor` (0: from the start), in order.
    package func changes(since anchor: Int64, limit: Int = 1000) async throws -> [RemoteChange] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT position, item_id, kind, operation_id, content_version, metadata_version, at_ns
                FROM docfs_changes WHERE position > \(anchor) ORDER BY position LIMIT \(limit)
                """, logger: logger)
            var out: [RemoteChange] = []
            for try await (position, item, kind, op, cv, mv, at) in rows.decode((Int64, Int64, String, UUID, Int64, Int64, Int64).self) {
                guard let k = RemoteChange.Kind(rawValue: kind) else { continue }
                out.append(
                    RemoteChange(
                        position: position, itemID: item, kind: k, operationID: op,
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

    /// The MIME words of the server's layout as the owner resolves them (`{"image/png":
    /// "public.png"}`): the server's rules compare identifiers only, and cannot read the
    /// shared-mime-info database a replica resolves them with. The owner's alone since schema 15
    /// (`RemoteSchema+Bounds`): a replica role is refused (notPermitted).
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

    /// Stores the layout (folder rules, types) as JSON; logged as a change of the root. The
    /// owner's work (`docfs_set_layout`; a replica role may not).
    package func setLayout(operationID: UUID, json: String) async throws {
        let logger = self.logger
        try await mapped { [self] in
            _ = try await client.query("SELECT docfs_set_layout(\(operationID), \(json))", logger: logger)
        }
    }

    static func checkName(_ name: String) throws {
        guard !name.isEmpty, name != ".", name != "..", !name.contains("/"), !name.utf8.contains(0),
            name.utf8.count <= 255
        else {
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

    static func decodeItems(_ rows: PostgresRowSequence) async throws -> [ServerItem] {
        var out: [ServerItem] = []
        for try await row in rows {
            let c = row.makeRandomAccess()
            out.append(
                ServerItem(
                    id: try c[0].decode(Int64.self), parentID: try c[1].decode(Int64?.self), name: try c[2].decode(String.self),
                    kind: ServerItem.serverKind(try c[3].decode(String.self)), size: try c[4].decode(Int64.self),
                    creationTime: FileTime(totalNanoseconds: try c[5].decode(Int64.self)),
                    modificationTime: FileTime(totalNanoseconds: try c[6].decode(Int64.self)),
                    changeTime: FileTime(totalNanoseconds: try c[7].decode(Int64.self)),
                    accessTime: FileTime(totalNanoseconds: try c[8].decode(Int64.self)),
                    ownerID: UInt32(truncatingIfNeeded: try c[9].decode(Int64.self)),
                    groupID: UInt32(truncatingIfNeeded: try c[10].decode(Int64.self)),
                    // The kind is its own column: only the permission bits (set-ID and sticky included) are kept.
                    posixPermissions: UInt16(UInt32(bitPattern: try c[11].decode(Int32.self)) & 0o7777),
                    tagData: ServerTags.data(try c[12].decode([String].self)),
                    favoriteRank: try c[13].decode(Int64?.self), symlinkTargetPath: try c[14].decode(String?.self),
                    contentKey: try c[15].decode(String?.self), contentVersion: try c[16].decode(Int64.self),
                    metadataVersion: try c[17].decode(Int64.self),
                    trashTime: try c[18].decode(Int64?.self).map(FileTime.init(totalNanoseconds:)),
                    deleted: try c[19].decode(Bool.self), linkOf: try c[20].decode(Int64?.self)))
        }
        return out
    }

    /// Runs `body` within `operationTimeout`, turning postgres-nio's errors into `RemoteError`s.
    func mapped<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = operationTimeout
        let expired = Atomic<Bool>(false)
        do {
            return try await withDeadline(
                timeout,
                timedOut: {
                    expired.store(true, ordering: .relaxed)
                    return RemoteError.unreachable("no answer within \(timeout)")
                }, body)
        } catch {
            if expired.load(ordering: .relaxed) || Self.isHeldUp(error) { endOverstayersSoon() }
            throw Self.map(error)
        }
    }
}
