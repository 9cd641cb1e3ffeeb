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

    /// The bucket answers with these credentials (one list, no prefix in the query: some
    /// S3-compatible servers check the signature of `/` in query values wrongly), then `then`;
    /// an S3 refusal of either is one line. Keys that may not list the bucket (a replica's own,
    /// with the policy `docfs remote add-replica` prints) answer by reading the tree's marker.
    static func checkBucket(
        _ configuration: ReplicaConfiguration, _ s3: S3Client,
        then: () async throws -> Void
    ) async throws {
        do {
            do {
                _ = try await s3.listObjects(bucket: configuration.bucket, maxKeys: 1)
            } catch let error as S3Error where error.code == "AccessDenied" {
                guard try await TreeMarker.isThere(configuration, s3) else { throw error }
            }
            try await then()
        } catch let error as S3Error {
            throw ReplicaConfiguration.Problem(ServerExchangeError(error, bucket: configuration.bucket).message)
        }
    }

    /// The layout the tree uses: the server's when it has one (a different one given is
    /// refused); else the one given, which the server keeps from now on. `set`: given here.
    static func settleLayout(_ given: Layout?, _ database: RemoteDatabase) async throws -> (layout: Layout?, set: Bool) {
        if let json = try await database.layout() {
            let server = try JSONDecoder().decode(Layout.self, from: Data(json.utf8))
            if let given, given != server {
                throw ReplicaConfiguration.Problem("the server has a layout of its own already; leave out --layout to use it")
            }
            try await publishMIMEWords(server, database)
            return (server, false)
        }
        guard let given else { return (nil, false) }
        let json = String(decoding: try JSONEncoder().encode(given), as: UTF8.self)
        do { _ = try await database.setLayout(operationID: UUID(), json: json) } catch RemoteError.notPermitted {
            throw ReplicaConfiguration.Problem(
                "the server has no layout and this role may not give it one: its owner runs `docfs init --remote … --layout FILE` or sets it up with `docfs remote setup --layout FILE`"
            )
        }
        try await publishMIMEWords(given, database)
        return (given, true)
    }

    /// The owner gives the server the layout's MIME words as its content-type table resolves
    /// them, so that the server checks them too (`docfs_set_layout_mime`, the owner's alone since
    /// schema 15; a replica role's init skips it). A word that resolves to no concrete type is
    /// left out: the server leaves it to the replicas, which resolve it themselves.
    static func publishMIMEWords(_ layout: Layout, _ database: RemoteDatabase) async throws {
        let resolved = layout.mimeWords.filter { RemoteSchema.isConcreteIdentifier($0.value) }
        guard !resolved.isEmpty else { return }
        let json = String(decoding: try JSONEncoder().encode(resolved), as: UTF8.self)
        do { try await database.setLayoutMIMETypes(json: json) } catch RemoteError.notPermitted {}
    }

    /// `progress` is told each step as it starts (for `docfs remote setup` on a terminal).
    package static func run(
        configuration: ReplicaConfiguration, replicaRole: String?, password: String?,
        layout: Layout?, logger: Logger, progress: (@Sendable (String) -> Void)? = nil
    ) async throws -> Report {
        progress?("reaching PostgreSQL")
        try await RemoteDatabase.probe(configuration.postgres)
        return try await configuration.withClients(logger: logger) { database, s3 in
            progress?("the schema (up to version \(RemoteSchema.latest))" + (replicaRole.map { " and the replica role \($0)" } ?? ""))
            let setup: RemoteDatabase.SetupReport
            do { setup = try await database.setUp(replicaRole: replicaRole, password: password) } catch RemoteError.notPermitted(let why) {
                throw ReplicaConfiguration.Problem(
                    "this role may not set the server up (\(why)): run it as the database's owner, with CREATEROLE for --replica-role")
            }
            progress?("the bucket and its tree marker")
            try await checkBucket(configuration, s3) {
                try await TreeMarker.claim(
                    tree: setup.treeID, database: configuration.postgres.database,
                    configuration: configuration, objects: s3)
            }
            // The tree's prefix is settled: the server checks recorded packs lie under it.
            try await database.setPacksFolder(ContentObjectKey.packFolder(prefix: configuration.prefix))
            progress?("the bucket's versioning")
            try await BucketVersioning.turnOn(configuration, s3, database, logger: logger)
            progress?("the layout")
            let (_, layoutSet) = try await settleLayout(layout, database)
            return Report(
                schemaVersion: setup.schemaVersion, treeID: setup.treeID, replicaRole: setup.replicaRole,
                createdRole: setup.createdRole, layoutSet: layoutSet)
        }
    }
}
