import Foundation
import Logging
import PostgresNIO

// `docfs remote setup`: the owner's step. Replicas never migrate (they check the version and
// name this step when it is older or newer than theirs).
extension RemoteDatabase {
    package struct SetupReport: Sendable {
        package var schemaVersion: Int
        package var treeID: String
        /// The replica role, and whether this set-up created it.
        package var replicaRole: String?
        package var createdRole = false
    }

    /// Applies or upgrades the schema and, with `replicaRole`, creates that role if missing
    /// (LOGIN, with `password` if one is given) and gives it exactly a replica's privileges.
    /// Run with a role that owns the database (and may create roles).
    package func setUp(replicaRole: String?, password: String?) async throws -> SetupReport {
        let version = try await migrate()
        guard let tree = try await treeID() else { throw RemoteError.invalid("the server has no tree id after its migration") }
        var report = SetupReport(schemaVersion: version, treeID: tree, replicaRole: replicaRole)
        guard let role = replicaRole else { return report }
        let logger = self.logger
        report.createdRole = try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> Bool in
                try await conn.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                var exists = false
                for try await (n) in try await conn.query("SELECT count(*) FROM pg_roles WHERE rolname = \(role)",
                                                          logger: logger).decode(Int64.self) { exists = n > 0 }
                if !exists {
                    var statement = "CREATE ROLE \(RemoteSchema.quoteIdentifier(role)) LOGIN"
                    if let password { statement += " PASSWORD \(RemoteSchema.quoteLiteral(password))" }
                    try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                var database = ""
                for try await (name) in try await conn.query("SELECT current_database()", logger: logger).decode(String.self) { database = name }
                try await conn.query(PostgresQuery(unsafeSQL: "GRANT CONNECT ON DATABASE \(RemoteSchema.quoteIdentifier(database)) TO \(RemoteSchema.quoteIdentifier(role))"),
                                     logger: logger)
                for statement in RemoteSchema.replicaRoleGrants(role) {
                    try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                return !exists
            }
        }
        // No DDL for anyone but the owner (PostgreSQL 15 grants no CREATE on `public` by default;
        // a database made otherwise gets it taken back). Best effort: the schema may belong to
        // another role, and then the check below says so.
        _ = try? await mapped { [self] in
            try await client.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC", logger: logger)
        }
        let canCreate = try await mapped { [self] in
            var allowed = false
            for try await (v) in try await client.query("SELECT has_schema_privilege(\(role), 'public', 'CREATE')",
                                                        logger: logger).decode(Bool.self) { allowed = v }
            return allowed
        }
        if canCreate {
            throw RemoteError.invalid("role \(role) may create tables in schema public: its owner runs REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        }
        return report
    }

    /// The tree's identity (`docfs_meta.tree_id`); nil on a server set up before schema 6.
    package func treeID() async throws -> String? {
        try await mapped { [self] in
            let rows = try await client.query("SELECT value FROM docfs_meta WHERE key = 'tree_id'", logger: logger)
            for try await (value) in rows.decode(String.self) { return value }
            return nil
        }
    }
}

extension RemoteDatabase {
    /// `PREFIX/packs/`, once the tree's prefix is settled (the owner's step): the server's block
    /// functions (schema 9) refuse a pack anywhere else.
    package func setPacksFolder(_ folder: String) async throws {
        try await mapped { [self] in
            try await client.query("""
                INSERT INTO docfs_meta (key, value) VALUES ('packs_folder', \(folder))
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """, logger: logger)
        }
    }
}
