import Foundation
import Logging
import DocFSProvider
import DocFSRemote
import DocFSStore

/// `docfs remote setup`: the owner's one step for a server. Applies or upgrades the schema,
/// creates the replica role with only what a replica needs, gives the server its layout (when
/// given and it has none), and writes the tree marker beside the objects. Run again after
/// upgrading docfs; every step is idempotent.
package enum RemoteSetup {
    package struct Report: Sendable {
        package var schemaVersion: Int
        package var treeID: String
        package var replicaRole: String?
        package var createdRole: Bool
        package var layoutSet: Bool
    }

    package static func run(configuration: ReplicaConfiguration, replicaRole: String?, password: String?,
                            layout: Layout?, logger: Logger) async throws -> Report {
        try await RemoteDatabase.probe(configuration.postgres)
        return try await configuration.withClients(logger: logger) { database, s3 in
            let setup: RemoteDatabase.SetupReport
            do { setup = try await database.setUp(replicaRole: replicaRole, password: password) } catch RemoteError.notPermitted(let why) {
                throw ReplicaConfiguration.Problem("this role may not set the server up (\(why)): run it as the database's owner, with CREATEROLE for --replica-role")
            }
            do {
                _ = try await s3.listObjects(bucket: configuration.bucket, maxKeys: 1)
                try await TreeMarker.claim(tree: setup.treeID, database: configuration.postgres.database,
                                           configuration: configuration, objects: s3)
            } catch let error as S3Error {
                throw ReplicaConfiguration.Problem(SyncFailure(error, bucket: configuration.bucket).message)
            }
            var layoutSet = false
            if let layout {
                if let json = try await database.layout() {
                    let current = try JSONDecoder().decode(Layout.self, from: Data(json.utf8))
                    if current != layout { throw ReplicaConfiguration.Problem("the server has a layout of its own already; leave out --layout") }
                } else {
                    let json = String(decoding: try JSONEncoder().encode(layout), as: UTF8.self)
                    _ = try await database.setLayout(operationID: UUID(), json: json)
                    layoutSet = true
                }
            }
            return Report(schemaVersion: setup.schemaVersion, treeID: setup.treeID, replicaRole: setup.replicaRole,
                          createdRole: setup.createdRole, layoutSet: layoutSet)
        }
    }
}
