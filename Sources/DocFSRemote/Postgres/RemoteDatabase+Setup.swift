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

    /// Applies or upgrades the schema and, with `replicaRole`, adds that replica
    /// (`addReplica`). Run with a role that owns the database (and may create roles).
    package func setUp(replicaRole: String?, password: String?) async throws -> SetupReport {
        let version = try await migrate()
        guard let tree = try await treeID() else { throw RemoteError.invalid("the server has no tree id after its migration") }
        var report = SetupReport(schemaVersion: version, treeID: tree, replicaRole: replicaRole)
        guard let role = replicaRole else { return report }
        report.createdRole = try await addReplica(role, password: password)
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
    /// The bucket keeps versions (schema 18): from now on the server records a pack only with
    /// the version of its object its upload made (`docfs_meta.pack_versions`; the owner's alone).
    package func requirePackVersions() async throws {
        try await mapped { [self] in
            try await client.perform(
                """
                INSERT INTO docfs_meta (key, value) VALUES ('pack_versions', 'on')
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """, logger: logger)
        }
    }

    package func setPacksFolder(_ folder: String) async throws {
        try await mapped { [self] in
            try await client.perform(
                """
                INSERT INTO docfs_meta (key, value) VALUES ('packs_folder', \(folder))
                ON CONFLICT (key) DO UPDATE SET value = excluded.value
                """, logger: logger)
        }
    }
}
