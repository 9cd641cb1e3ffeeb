import Foundation
import Logging
import SystemPackage
import DocFSRemote

/// `docfs versions`: a file's versions on its replica's server, and one of them fetched to be
/// written back through the mount (so that restoring is an ordinary edit: checked by the
/// folder's rules, sent as a new version, followed by the other replicas).
package enum VersionHistory {
    package struct Listing: Sendable {
        package var current: Int64?
        package var versions: [RemoteVersion]
    }

    package static func list(itemID: Int64, configuration: ReplicaConfiguration, logger: Logger) async throws -> Listing {
        try await configuration.withClients(logger: logger) { database, _ in
            let item = try await database.item(itemID)
            guard let item, !item.deleted else { throw ReplicaConfiguration.Problem("the server has no item \(itemID) (deleted, or never sent)") }
            guard item.kind == .file else { throw ReplicaConfiguration.Problem("only files have versions") }
            // Versions sent together name one object (a truncate and the writes after it, one
            // upload): listed once, under the last of them.
            var versions: [RemoteVersion] = []
            for version in try await database.versions(of: itemID) {
                if let last = versions.last, last.key != nil, last.key == version.key { versions.removeLast() }
                versions.append(version)
            }
            return Listing(current: item.contentVersion, versions: versions)
        }
    }

    /// Downloads version `number` of the item into the file at `path` (created or truncated).
    package static func fetch(
        itemID: Int64, number: Int64, to path: String, configuration: ReplicaConfiguration,
        logger: Logger
    ) async throws -> RemoteVersion {
        try await configuration.withClients(logger: logger) { database, s3 in
            guard let version = try await database.versions(of: itemID).first(where: { $0.number == number }) else {
                throw ReplicaConfiguration.Problem("the server has no version \(number) of this file (`docfs versions PATH` lists them)")
            }
            guard !version.collected else {
                throw ReplicaConfiguration.Problem("version \(number) was removed by `docfs remote gc` (older than --keep-versions)")
            }
            if let key = version.key {
                try await ContentFetcher(server: database, objects: s3, bucket: configuration.bucket, prefix: configuration.prefix, logger: logger)
                    .download(key: key, to: path)
            } else {
                FileManager.default.createFile(atPath: path, contents: Data())
            }
            return version
        }
    }
}
