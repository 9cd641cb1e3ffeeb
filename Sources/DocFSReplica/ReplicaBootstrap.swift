import Foundation
import Logging
import SystemPackage
import DocFSProvider
import DocFSRemote
import DocFSStore

/// `docfs init STORE --remote …`: checks the server (PostgreSQL schema, migrated here; the
/// bucket and the credentials), makes the store as a replica of it, and, when the server
/// already has a tree, takes its metadata: files are downloaded when first opened (or pinned).
/// The caller removes the store if this throws.
public enum ReplicaBootstrap {
    public struct Summary: Sendable {
        public var schemaVersion: Int
        public var folders = 0
        public var files = 0
        public var links = 0
        public var bytes: Int64 = 0
    }

    public static func initialize(store url: URL, link: RemoteLink, configuration: ReplicaConfiguration,
                                  layout: Layout?, logger: Logger) async throws -> Summary {
        var quiet = logger
        quiet.logLevel = .warning
        return try await configuration.withClients(logger: quiet) { database, s3 in
            try await initialize(url, link, configuration, layout, database, s3, logger)
        }
    }

    private static func initialize(_ url: URL, _ link: RemoteLink, _ configuration: ReplicaConfiguration, _ layout: Layout?,
                                   _ database: RemoteDatabase, _ s3: S3Client, _ logger: Logger) async throws -> Summary {
        try await RemoteDatabase.probe(configuration.postgres)
        let version = try await database.migrate()
        do {
            // No prefix in the query: some S3-compatible servers check signatures of `/` in query values wrongly.
            _ = try await s3.listObjects(bucket: configuration.bucket, maxKeys: 1)
        } catch let error as S3Error {
            throw ReplicaConfiguration.Problem(SyncFailure(error, bucket: configuration.bucket).message)
        }
        // The layout: the server's if it has one; else the one given here, which it then keeps.
        var chosen = layout
        if let json = try await database.layout() {
            let serverLayout = try JSONDecoder().decode(Layout.self, from: Data(json.utf8))
            if let layout, layout != serverLayout {
                throw ReplicaConfiguration.Problem("the server has a layout of its own already; leave out --layout to use it")
            }
            chosen = serverLayout
        } else if let layout {
            let json = String(decoding: try JSONEncoder().encode(layout), as: UTF8.self)
            _ = try await database.setLayout(operationID: UUID(), json: json)
        }
        try LocalStore.create(at: url, layout: chosen)
        try LocalStore.linkRemote(at: url, link)
        var summary = Summary(schemaVersion: version)
        // The anchor: changes after this position are applied by the mount (those the listing
        // already shows are applied again, which changes nothing).
        let anchor = try await database.latestPosition()
        let rootID = try await database.rootID()
        guard try await !database.children(of: rootID).isEmpty else { return summary }

        // The server's tree, folder by folder, under its own identifiers.
        let store = try LocalStore.open(at: url, logger: logger)
        defer { store.close() }
        var folders: [(serverID: Int64, row: Int64)] = [(rootID, 1)]
        while let (serverID, row) = folders.popLast() {
            for item in try await database.children(of: serverID) {
                let kind: LocalStore.ServerItem.Kind = item.kind == .file ? .file : item.kind == .directory ? .folder : .symlink
                if item.kind == .file { summary.bytes += item.size }
                try store.addServerItem(LocalStore.ServerItem(
                    row: item.id, parentRow: row, name: item.name, kind: kind, createdNs: item.createdNs,
                    modifiedNs: item.modifiedNs, uid: item.uid, gid: item.gid, mode: UInt16(item.mode & 0o7777),
                    symlinkTarget: item.symlinkTarget, contentKey: item.contentKey, size: item.size,
                    contentVersion: item.contentVersion))
                switch item.kind {
                case .directory:
                    summary.folders += 1
                    folders.append((item.id, item.id))
                case .file: summary.files += 1
                case .symlink: summary.links += 1
                }
            }
        }
        try store.setSyncAnchor(anchor)
        try store.synchronizeSync()
        return summary
    }
}
