import Foundation
import Logging
import PostgresNIO

/// A replica's login role as `docfs remote replicas` lists it.
package struct ReplicaRecord: Sendable, Equatable, Codable {
    package var name: String
    /// It may log in and is in the tree's replicas group (false: removed).
    package var active: Bool
    /// Its last call (nil: never seen), in the server's nanoseconds.
    package var lastSeenNs: Int64?
    package var operations: Int64
    package var versions: Int64
    package var bytes: Int64
}

// One login role per replica (schema 11): the owner adds, lists and removes them. Each is a
// member of the tree's replicas group, which holds a replica's privileges (`RemoteSchema+Doors`),
// and nothing else.
extension RemoteDatabase {
    /// The tree's replicas group (`docfs_meta.replicas_group`).
    package func replicasGroup() async throws -> String {
        try await mapped { [self] in
            let rows = try await client.query("SELECT value FROM docfs_meta WHERE key = 'replicas_group'", logger: logger)
            for try await (name) in rows.decode(String.self) { return name }
            throw RemoteError.schemaTooOld(found: try await schemaVersion(), needed: RemoteSchema.latest)
        }
    }

    /// Makes `name` a login role in the replicas group (with `password`, if given), or lets a
    /// removed one in again; returns whether the role was made here. Run by the owner (with
    /// CREATEROLE).
    @discardableResult
    package func addReplica(_ name: String, password: String?) async throws -> Bool {
        try Self.checkRoleName(name)
        let group = try await replicasGroup()
        let logger = self.logger
        let created = try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> Bool in
                try await Self.lockMigrations(conn, logger: logger)
                // The group and its grants (a migration run by an owner without CREATEROLE made none).
                try await conn.perform(
                    PostgresQuery(
                        unsafeSQL: """
                            DO $do$ BEGIN
                                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = \(RemoteSchema.quoteLiteral(group))) THEN
                                    CREATE ROLE \(RemoteSchema.quoteIdentifier(group)) NOLOGIN;
                                END IF;
                            END $do$
                            """), logger: logger)
                try await conn.perform(PostgresQuery(unsafeSQL: RemoteSchema.replicasGroupGrants), logger: logger)
                var exists = false
                for try await (n) in try await conn.query(
                    "SELECT count(*) FROM pg_roles WHERE rolname = \(name)",
                    logger: logger
                ).decode(Int64.self) { exists = n > 0 }
                var statement = (exists ? "ALTER ROLE " : "CREATE ROLE ") + RemoteSchema.quoteIdentifier(name) + " LOGIN"
                if let password { statement += " PASSWORD \(RemoteSchema.quoteLiteral(password))" }
                try await conn.perform(PostgresQuery(unsafeSQL: statement), logger: logger)
                try await conn.perform(
                    PostgresQuery(
                        unsafeSQL: """
                            GRANT \(RemoteSchema.quoteIdentifier(group)) TO \(RemoteSchema.quoteIdentifier(name))
                            """), logger: logger)
                try await conn.perform("INSERT INTO docfs_replicas (role) VALUES (\(name)) ON CONFLICT (role) DO NOTHING", logger: logger)
                // CONNECT through the group only (a role made before schema 14 had its own: taken
                // back, so that leaving the group leaves the database), limits and timeouts of its
                // own unless the owner set others, and the owner's right to end its sessions.
                for statement in [
                    RemoteSchema.databaseGrants, RemoteSchema.signalGrant, RemoteSchema.statsGrant,
                    RemoteSchema.overstayersGrant,
                    RemoteSchema.replicaLimits(rolesSQL: "SELECT \(RemoteSchema.quoteLiteral(name))::text"),
                ] {
                    try await conn.perform(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await conn.perform(
                    PostgresQuery(
                        unsafeSQL: """
                            DO $do$ BEGIN
                                EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM %I', current_database(), \(RemoteSchema.quoteLiteral(name)));
                            EXCEPTION WHEN insufficient_privilege THEN NULL;
                            END $do$
                            """), logger: logger)
                return !exists
            }
        }
        // No DDL for anyone but the owner (PostgreSQL 15 grants no CREATE on `public` by default;
        // a database made otherwise gets it taken back). Best effort: the schema may belong to
        // another role, and then the check below says so.
        _ = try? await mapped { [self] in
            try await client.perform("REVOKE CREATE ON SCHEMA public FROM PUBLIC", logger: logger)
        }
        let canCreate = try await mapped { [self] in
            var allowed = false
            for try await (v) in try await client.query(
                "SELECT has_schema_privilege(\(name), 'public', 'CREATE')",
                logger: logger
            ).decode(Bool.self) { allowed = v }
            return allowed
        }
        if canCreate {
            throw RemoteError.invalid("role \(name) may create tables in schema public: its owner runs REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        }
        // No temporary tables, no other tree's database (`RemoteSchema+Guards`).
        let publicMayConnect = try await mapped { [self] in
            var open = false
            for try await (v) in try await client.query(
                PostgresQuery(unsafeSQL: RemoteSchema.publicMayConnectQuery),
                logger: logger
            ).decode(Bool.self) { open = v }
            return open
        }
        if publicMayConnect {
            throw RemoteError.invalid(
                "every role may connect to this database or make TEMP tables in it: its owner runs "
                    + "REVOKE TEMPORARY, CONNECT ON DATABASE <db> FROM PUBLIC; GRANT CONNECT ON DATABASE <db> TO \(group)")
        }
        return created
    }

    /// Whether every role may still create large objects in the tree's database (outside every
    /// quota): only a superuser may take that back (`RemoteSchema.largeObjectRevoke`).
    package func publicMayCreateLargeObjects() async throws -> Bool {
        try await mapped { [self] in
            var open = false
            for try await (v) in try await client.query(
                PostgresQuery(unsafeSQL: RemoteSchema.publicMayCreateLargeObjectsQuery),
                logger: logger
            ).decode(Bool.self) { open = v }
            return open
        }
    }

    /// What `removeReplica` could not do: the sessions of the role still running afterwards.
    package struct Removal: Sendable {
        /// Sessions ended.
        package var ended = 0
        /// Process ids of the sessions that survived, and why.
        package var survivors: [Int32] = []
        package var why: String?
    }

    /// Revokes a replica: out of the group and no login, committed first (so a reconnect meanwhile
    /// is refused), then its sessions ended (with `pg_signal_backend`, which a CREATEROLE owner
    /// has from set-up; a superuser needs none). Its mount stops syncing (its changes stay in its
    /// outbox); nothing of the others changes. Says which sessions it could not end.
    package func removeReplica(_ name: String) async throws -> Removal {
        try Self.checkRoleName(name)
        let group = try await replicasGroup()
        let logger = self.logger
        try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn in
                var member = false
                for try await (n) in try await conn.query(
                    """
                    SELECT count(*) FROM pg_auth_members am JOIN pg_roles r ON r.oid = am.member JOIN pg_roles g ON g.oid = am.roleid
                    WHERE g.rolname = \(group) AND r.rolname = \(name)
                    """, logger: logger
                ).decode(Int64.self) { member = n > 0 }
                guard member else { throw RemoteError.invalid("\(name) is not a replica of this tree (not in \(group))") }
                try await conn.perform(
                    PostgresQuery(
                        unsafeSQL: """
                            REVOKE \(RemoteSchema.quoteIdentifier(group)) FROM \(RemoteSchema.quoteIdentifier(name))
                            """), logger: logger)
                try await conn.perform(PostgresQuery(unsafeSQL: "ALTER ROLE \(RemoteSchema.quoteIdentifier(name)) NOLOGIN"), logger: logger)
            }
        }
        // Best effort: an owner set up before schema 14 may make itself a member now.
        _ = try? await mapped { [self] in
            try await client.perform(PostgresQuery(unsafeSQL: RemoteSchema.signalGrant), logger: logger)
        }
        var removal = Removal()
        // A session may log in between the commit and this list only with a login started before it.
        for _ in 0..<3 {
            let sessions = try await sessions(of: name)
            if sessions.isEmpty { break }
            removal.survivors = []
            for pid in sessions {
                do {
                    let ended = try await mapped { [self] in
                        var done = false
                        for try await (v) in try await client.query(
                            "SELECT pg_terminate_backend(\(pid), 5000)",
                            logger: logger
                        ).decode(Bool.self) { done = v }
                        return done
                    }
                    if ended { removal.ended += 1 } else { removal.survivors.append(pid) }
                } catch {
                    removal.survivors.append(pid)
                    removal.why = "\(error)"
                }
            }
        }
        removal.survivors = try await sessions(of: name)
        return removal
    }

    /// The process ids of `role`'s sessions on the cluster.
    func sessions(of role: String) async throws -> [Int32] {
        try await mapped { [self] in
            var pids: [Int32] = []
            for try await (pid) in try await client.query(
                "SELECT pid FROM pg_stat_activity WHERE usename = \(role)",
                logger: logger
            ).decode(Int32.self) { pids.append(pid) }
            return pids
        }
    }

    /// Every replica role of this tree, current and removed, with what it sent.
    package func replicas() async throws -> [ReplicaRecord] {
        let group = try await replicasGroup()
        let logger = self.logger
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                WITH members AS (
                    SELECT r.rolname::text AS name, r.rolcanlogin AS login FROM pg_auth_members am
                    JOIN pg_roles r ON r.oid = am.member JOIN pg_roles g ON g.oid = am.roleid WHERE g.rolname = \(group)),
                known AS (SELECT name FROM members UNION SELECT role FROM docfs_replicas),
                sent AS (SELECT role, count(*) AS n, coalesce(sum(size), 0)::bigint AS bytes FROM docfs_versions GROUP BY role)
                SELECT k.name, coalesce(m.login, false), r.last_seen_ns, coalesce(r.operations, 0), coalesce(s.n, 0), coalesce(s.bytes, 0)
                FROM known k LEFT JOIN members m ON m.name = k.name LEFT JOIN docfs_replicas r ON r.role = k.name
                LEFT JOIN sent s ON s.role = k.name
                WHERE k.name IN (SELECT name FROM members) OR k.name NOT IN (SELECT rolname FROM pg_roles WHERE rolsuper)
                ORDER BY k.name
                """, logger: logger)
            var out: [ReplicaRecord] = []
            for try await (name, login, seen, operations, versions, bytes) in rows.decode((String, Bool, Int64?, Int64, Int64, Int64).self) {
                out.append(ReplicaRecord(name: name, active: login, lastSeenNs: seen, operations: operations, versions: versions, bytes: bytes))
            }
            return out
        }
    }

    /// A replica says it is here (`docfs_hello`).
    package func hello() async throws {
        let logger = self.logger
        try await mapped { [self] in
            _ = try await client.query("SELECT docfs_hello()", logger: logger)
        }
    }

    /// A role name docfs makes: 1–63 bytes of letters, digits, `_`, `-` and `.`.
    static func checkRoleName(_ name: String) throws {
        guard (1...63).contains(name.utf8.count),
            name.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_-.".unicodeScalars.contains($0)) }),
            !name.hasPrefix("pg_")
        else {
            throw RemoteError.invalid("\"\(name)\" is not a replica name (1–63 letters, digits, _, - or .; not pg_…)")
        }
    }
}
