import DocFSRemote
import Foundation
import PostgresNIO
import XCTest

/// Schema 14 on a server that was at 13, upgraded by an owner with CREATEROLE (no superuser):
/// every function gets `pg_temp` last, PUBLIC loses TEMP and CONNECT, replica roles made before
/// get their limits, and the owner may end other roles' sessions.
final class ServerGuardTests: XCTestCase {
    /// The first column of the first row of `sql`, as text (nil: no row or NULL).
    static func value(_ url: PostgresURL, _ sql: String) async throws -> String? {
        let client = PostgresClient(
            configuration: .init(
                host: url.host, port: url.port, username: url.user,
                password: url.password, database: url.database, tls: .disable))
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                await client.run(); return nil
            }
            var result: String?
            for try await (v) in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(String?.self) { result = v; break }
            group.cancelAll()
            return result
        }
    }

    func testAnUpgradeTo14ClosesTheTrapsForRolesMadeBefore() async throws {
        try await RemoteDatabaseTests.withDatabase(migrated: false) { db, url in
            let at13 = try await db.migrate(upTo: 13)
            XCTAssertEqual(at13, 13)
            let group = try await db.replicasGroup()
            let role = url.database + "_old"
            // A replica role of schema 13: in the group, its own CONNECT, no limits.
            try await RemoteDatabaseTests.adminQuery(url, "CREATE ROLE \(role) LOGIN")
            try await RemoteDatabaseTests.adminQuery(url, "GRANT \(group) TO \(role)")
            try await RemoteDatabaseTests.adminQuery(url, "GRANT CONNECT ON DATABASE \(url.database) TO \(role)")
            let unguarded = try await Self.value(
                url,
                """
                SELECT count(*)::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND p.proname LIKE 'docfs\\_%'
                  AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, public, pg_temp']
                """)
            XCTAssertNotEqual(unguarded, "0", "schema 13's helper functions have no search_path of their own")

            let at14 = try await db.migrate()
            XCTAssertEqual(at14, RemoteSchema.latest)
            let left = try await Self.value(
                url,
                """
                SELECT string_agg(p.proname, ', ') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND p.proname LIKE 'docfs\\_%'
                  AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, public, pg_temp']
                """)
            XCTAssertNil(left, "every function has pg_temp last")
            let publicRights = try await Self.value(
                url,
                """
                SELECT string_agg(a.privilege_type, ',') FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                WHERE d.datname = current_database() AND a.grantee = 0
                """)
            XCTAssertNil(publicRights, "PUBLIC keeps nothing on the tree's database")
            let groupConnects = try await Self.value(url, "SELECT has_database_privilege('\(group)', current_database(), 'CONNECT')::text")
            XCTAssertEqual(groupConnects, "true")
            let limit = try await Self.value(url, "SELECT rolconnlimit::text FROM pg_roles WHERE rolname = '\(role)'")
            XCTAssertEqual(limit, String(RemoteSchema.replicaConnectionLimit))
            let settings =
                try await Self.value(
                    url,
                    """
                    SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
                    JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = '\(role)' AND d.datname = current_database()
                    """) ?? ""
            for (name, value) in RemoteSchema.replicaSettings {
                XCTAssert(settings.contains("\(name)=\(value)"), "\(name): \(settings)")
            }
            let signals = try await Self.value(url, "SELECT pg_has_role(current_user, 'pg_signal_backend', 'MEMBER')::text")
            XCTAssertEqual(signals, "true", "the CREATEROLE owner may end a replica's sessions")
            let writers = try await Self.value(url, "SELECT has_table_privilege('\(role)', 'docfs_locks', 'SELECT')::text")
            XCTAssertEqual(writers, "false", "no replica may read, so lock, the writers' row")

            // An owner's own value survives the next set-up.
            try await RemoteDatabaseTests.adminQuery(url, "ALTER ROLE \(role) IN DATABASE \(url.database) SET statement_timeout = '5min'")
            try await db.addReplica(role, password: nil)
            let kept =
                try await Self.value(
                    url,
                    """
                    SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
                    JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = '\(role)' AND d.datname = current_database()
                    """) ?? ""
            XCTAssert(kept.contains("statement_timeout=5min"), kept)
            try? await RemoteDatabaseTests.adminQuery(url, "DROP ROLE IF EXISTS \(role)")
        }
    }
}
