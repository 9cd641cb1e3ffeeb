import Foundation
import DocFSRemote

/// One tree per prefix: `PREFIX/docfs-tree.json` names the tree (`docfs_meta.tree_id`) whose
/// objects live under `PREFIX/objects/`. Written by the set-up; checked by every init, mount and
/// gc, which refuse, in one line, a prefix that belongs to another tree or has lost its marker
/// while the database has a tree.
package enum TreeMarker {
    package static func key(prefix: String) -> String { ContentObjectKey.under(prefix: prefix, "docfs-tree.json") }

    struct Marker: Codable { var tree: String; var database: String? }

    /// Writes the marker if the prefix has none; refuses a prefix that names another tree, or
    /// that is inside or above another tree's (`checkNesting`).
    package static func claim(
        tree: String, database: String, configuration: ReplicaConfiguration,
        objects: S3Client
    ) async throws {
        if let found = try await read(configuration, objects) {
            guard found.tree == tree else { throw mismatch(found.tree, tree, configuration) }
            return
        }
        try await checkNesting(configuration, objects)
        let bytes = try JSONEncoder().encode(Marker(tree: tree, database: database))
        try await objects.putObject(
            bucket: configuration.bucket, key: key(prefix: configuration.prefix), bytes: Array(bytes),
            contentType: "application/json")
    }

    /// Checks that the prefix's marker names `tree`.
    package static func check(tree: String, configuration: ReplicaConfiguration, objects: any ObjectStore) async throws {
        guard let found = try await read(configuration, objects) else {
            throw ReplicaConfiguration.Problem(
                "s3://\(configuration.bucket)/\(key(prefix: configuration.prefix)) is missing while the database has tree \(tree): a wrong --objects prefix, or the marker was deleted (the server's owner runs `docfs remote setup` to write it again)"
            )
        }
        guard found.tree == tree else { throw mismatch(found.tree, tree, configuration) }
    }

    /// The prefix's marker is there and readable with these credentials.
    static func isThere(_ configuration: ReplicaConfiguration, _ objects: any ObjectStore) async throws -> Bool {
        try await read(configuration, objects) != nil
    }

    private static func mismatch(_ found: String, _ tree: String, _ configuration: ReplicaConfiguration) -> ReplicaConfiguration.Problem {
        ReplicaConfiguration.Problem(
            "s3://\(configuration.bucket)/\(configuration.prefix) belongs to tree \(found), not to this database's tree \(tree): give each tree a prefix of its own"
        )
    }

    private static func read(
        _ configuration: ReplicaConfiguration, _ objects: any ObjectStore,
        prefix: String? = nil
    ) async throws -> Marker? {
        let prefix = prefix ?? configuration.prefix
        let bytes: [UInt8]
        do {
            bytes = try await objects.getObjectBytes(
                bucket: configuration.bucket, key: key(prefix: prefix), versionID: nil,
                range: nil, upTo: 64 * 1024)
        } catch let error as S3Error where error.kind == .notFound {
            return nil
        }
        guard let marker = try? JSONDecoder().decode(Marker.self, from: Data(bytes)) else {
            throw ReplicaConfiguration.Problem("s3://\(configuration.bucket)/\(key(prefix: prefix)) is not a docfs tree marker")
        }
        return marker
    }

    /// Prefixes cannot nest: a tree's gc lists everything under its prefix, so a tree at the
    /// bucket's root would take the packs of a tree at `packs`. Refuses a new tree's prefix
    /// when a marker is above it (each shorter prefix is asked) or below it (its levels are
    /// walked, stopping at the first marker: another tree's objects are never listed).
    static func checkNesting(_ configuration: ReplicaConfiguration, _ s3: S3Client) async throws {
        let prefix = configuration.prefix
        let parts = prefix.split(separator: "/").map(String.init)
        for count in 0..<parts.count {
            let above = parts.prefix(count).joined(separator: "/")
            if let found = try await read(configuration, s3, prefix: above) {
                throw nested(inner: prefix, outer: above, tree: found.tree, configuration)
            }
        }
        let own = prefix.isEmpty ? "" : prefix + "/"
        var levels = [own]
        while let level = levels.popLast() {
            var token: String?
            repeat {
                let page = try await s3.listObjects(
                    bucket: configuration.bucket, prefix: level.isEmpty ? nil : level,
                    delimiter: "/", continuationToken: token)
                if level != own, page.objects.contains(where: { $0.key == level + "docfs-tree.json" }) {
                    let inner = String(level.dropLast())
                    let found = try await read(configuration, s3, prefix: inner)
                    throw nested(inner: inner, outer: prefix, tree: found?.tree ?? "?", configuration, innerIsOther: true)
                }
                levels += page.commonPrefixes
                token = page.continuationToken
            } while token != nil
        }
    }

    private static func nested(
        inner: String, outer: String, tree: String, _ configuration: ReplicaConfiguration,
        innerIsOther: Bool = false
    ) -> ReplicaConfiguration.Problem {
        func place(_ p: String) -> String { p.isEmpty ? "s3://\(configuration.bucket) (the bucket's root)" : "s3://\(configuration.bucket)/\(p)" }
        let why =
            innerIsOther
            ? "\(place(inner)) holds tree \(tree), inside this tree's prefix \(place(outer))"
            : "\(place(inner)) is inside \(place(outer)), the prefix of tree \(tree)"
        return ReplicaConfiguration.Problem(
            "\(why): prefixes cannot nest (a tree's gc would remove the other's objects); give each tree a prefix beside the others'")
    }
}
