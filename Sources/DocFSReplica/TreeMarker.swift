import Foundation
import DocFSRemote

/// One tree per prefix: `PREFIX/docfs-tree.json` names the tree (`docfs_meta.tree_id`) whose
/// objects live under `PREFIX/objects/`. Written by the set-up; checked by every init, mount and
/// gc, which refuse, in one line, a prefix that belongs to another tree or has lost its marker
/// while the database has a tree.
package enum TreeMarker {
    package static func key(prefix: String) -> String { ContentObjectKey.under(prefix: prefix, "docfs-tree.json") }

    struct Marker: Codable { var tree: String; var database: String? }

    /// Writes the marker if the prefix has none; refuses a prefix that names another tree.
    package static func claim(tree: String, database: String, configuration: ReplicaConfiguration,
                              objects: any ObjectStore) async throws {
        if let found = try await read(configuration, objects) {
            guard found.tree == tree else { throw mismatch(found.tree, tree, configuration) }
            return
        }
        let bytes = try JSONEncoder().encode(Marker(tree: tree, database: database))
        try await objects.putObject(bucket: configuration.bucket, key: key(prefix: configuration.prefix), bytes: Array(bytes),
                                    contentType: "application/json")
    }

    /// Checks that the prefix's marker names `tree`.
    package static func check(tree: String, configuration: ReplicaConfiguration, objects: any ObjectStore) async throws {
        guard let found = try await read(configuration, objects) else {
            throw ReplicaConfiguration.Problem("s3://\(configuration.bucket)/\(key(prefix: configuration.prefix)) is missing while the database has tree \(tree): a wrong --objects prefix, or the marker was deleted (the server's owner runs `docfs remote setup` to write it again)")
        }
        guard found.tree == tree else { throw mismatch(found.tree, tree, configuration) }
    }

    private static func mismatch(_ found: String, _ tree: String, _ configuration: ReplicaConfiguration) -> ReplicaConfiguration.Problem {
        ReplicaConfiguration.Problem("s3://\(configuration.bucket)/\(configuration.prefix) belongs to tree \(found), not to this database's tree \(tree): give each tree a prefix of its own")
    }

    private static func read(_ configuration: ReplicaConfiguration, _ objects: any ObjectStore) async throws -> Marker? {
        let bytes: [UInt8]
        do {
            bytes = try await objects.getObjectBytes(bucket: configuration.bucket, key: key(prefix: configuration.prefix),
                                                     range: nil, upTo: 64 * 1024)
        } catch let error as S3Error where error.kind == .notFound {
            return nil
        }
        guard let marker = try? JSONDecoder().decode(Marker.self, from: Data(bytes)) else {
            throw ReplicaConfiguration.Problem("s3://\(configuration.bucket)/\(key(prefix: configuration.prefix)) is not a docfs tree marker")
        }
        return marker
    }
}
