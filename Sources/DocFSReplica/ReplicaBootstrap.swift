import Foundation
import Logging
import SystemPackage
import DocFSProvider
import DocFSWire
import DocFSRemote
import DocFSStore

/// `docfs init STORE --remote …`: checks the server (PostgreSQL schema, migrated here; the
/// bucket and the credentials), makes the store as a replica of it, and, when the server
/// already has a tree, takes its metadata: files are downloaded when first opened (or pinned).
/// The caller removes the store if this throws.
package enum ReplicaBootstrap {
    package struct Summary: Sendable {
        package var schemaVersion: Int
        package var folders = 0
        package var files = 0
        package var links = 0
        package var bytes: Int64 = 0
    }

    /// `progress` is told the counts so far after each item taken from the server's tree.
    package static func initialize(
        store url: URL, link: RemoteLink, configuration: ReplicaConfiguration,
        layout: Layout?, logger: Logger,
        progress: (@Sendable (Summary) -> Void)? = nil
    ) async throws -> Summary {
        var quiet = logger
        quiet.logLevel = .warning
        return try await configuration.withClients(logger: quiet) { database, s3 in
            try await initialize(url, link, configuration, layout, database, s3, logger, progress)
        }
    }

    private static func initialize(
        _ url: URL, _ link: RemoteLink, _ configuration: ReplicaConfiguration, _ layout: Layout?,
        _ database: RemoteDatabase, _ s3: S3Client, _ logger: Logger,
        _ progress: (@Sendable (Summary) -> Void)?
    ) async throws -> Summary {
        try await RemoteDatabase.probe(configuration.postgres)
        // A server never set up (or older) is set up here when this role owns it, so that the
        // first replica is one command; a replica role is told to ask the owner.
        var version = try await database.schemaVersion()
        var setUpHere = false
        if version > RemoteSchema.latest { throw RemoteError.schemaTooNew(found: version, supported: RemoteSchema.latest) }
        if version < RemoteSchema.latest {
            do {
                version = try await database.setUp(replicaRole: nil, password: nil).schemaVersion
                setUpHere = true
            } catch RemoteError.notPermitted {
                // One version older: served without hard links (refused until the owner upgrades it).
                guard version >= RemoteSchema.oldestServed else {
                    throw ReplicaConfiguration.Problem(RemoteError.schemaTooOld(found: version, needed: RemoteSchema.latest).description)
                }
                logger.warning(
                    "the server's docfs schema is version \(version): hard links are refused until its owner runs `docfs remote setup` (version \(RemoteSchema.latest))"
                )
            }
        }
        try await RemoteSetup.checkBucket(configuration, s3) {
            // One tree per prefix: a server with no change yet (or set up just now) claims it.
            guard let tree = try await database.treeID() else { return }
            let fresh = try await database.latestPosition() == 0
            if setUpHere || fresh {
                try await TreeMarker.claim(tree: tree, database: configuration.postgres.database, configuration: configuration, objects: s3)
                if setUpHere {
                    try await database.setPacksFolder(ContentObjectKey.packFolder(prefix: configuration.prefix))
                    try await BucketVersioning.turnOn(configuration, s3, database, logger: logger)
                }
            } else {
                try await TreeMarker.check(tree: tree, configuration: configuration, objects: s3)
            }
        }
        let chosen = try await RemoteSetup.settleLayout(layout, database).layout
        // The layout's folders come from the server, under its identifiers (made there first by
        // the first replica), so that every replica names them alike.
        try LocalStore.create(at: url, layout: chosen, folders: false)
        try LocalStore.linkRemote(at: url, link, serverSchema: version)
        var summary = Summary(schemaVersion: version)
        let rootID = try await database.rootID()
        if let chosen, try await database.children(of: rootID).isEmpty {
            try await makeLayoutFolders(chosen, rootID: rootID, database: database)
        }
        // The anchor: changes after this position are applied by the mount (those the listing
        // already shows are applied again, which changes nothing).
        let anchor = try await database.latestPosition()
        let witness = anchor > 0 ? try await database.change(at: anchor)?.operationID : nil
        guard try await !database.children(of: rootID).isEmpty else { return summary }

        let store = try LocalStore.open(at: url, logger: logger)
        defer { store.close() }
        guard let replica = store.replica else { throw ProviderError(.invalidArgument, "store \(url.path) has no server") }
        try await copyTree(
            into: replica, from: database, rootID: rootID, anchor: anchor, witness: witness,
            summary: &summary, progress: progress)
        return summary
    }

    /// The server's tree, folder by folder, under its own identifiers, into a new replica's store,
    /// and the anchor its changes are followed from.
    static func copyTree(
        into store: any ReplicaStore, from database: any ReplicaServer, rootID: Int64, anchor: Int64,
        witness: UUID?, summary: inout Summary, progress: (@Sendable (Summary) -> Void)?
    ) async throws {
        var folders: [(serverID: Int64, row: Int64)] = [(rootID, ReplicaRows.root)]
        // Further names of files (hard links) once every item is here.
        var names: [ServerItem] = []
        while let (serverID, row) = folders.popLast() {
            for var item in try await database.children(of: serverID) {
                // Under its row here, and `docfs init` is no mount: set-ID bits from the server
                // are never kept (`SetIDBits`).
                item.parentID = row
                item.posixPermissions = SetIDBits.applied(item.posixPermissions & 0o7777, kind: item.kind, keep: false)
                if item.linkOf != nil {
                    names.append(item)
                    continue
                }
                if item.kind == .file { summary.bytes += item.size }
                try store.addServerItem(item, contentFile: nil)
                switch item.kind {
                case .folder:
                    summary.folders += 1
                    folders.append((item.id, item.id))
                case .file: summary.files += 1
                case .symlink: summary.links += 1
                case .fifo, .socket, .characterDevice, .blockDevice: break // never on a server (`ServerItem.kind`)
                }
                progress?(summary)
            }
        }
        if !names.isEmpty { _ = try store.applyIncoming(names, contents: [:]) }
        try store.setSyncAnchor(anchor, witness: witness)
        try store.synchronizeSync()
    }

    /// The layout's folders (and the folders on their paths), made on a server without a tree.
    private static func makeLayoutFolders(_ layout: Layout, rootID: Int64, database: RemoteDatabase) async throws {
        var made: [String: Int64] = ["": rootID]
        let now = FileTime(totalNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9))
        for folder in layout.folders.sorted(by: { $0.components.count < $1.components.count }) {
            var path = ""
            for component in folder.components {
                let parent = made[path]!
                path = path.isEmpty ? component : path + "/" + component
                if made[path] != nil { continue }
                let applied = try await database.createItem(
                    operationID: UUID(), parentID: parent, name: component, kind: .folder,
                    attributes: ReplicatedAttributes(
                        ownerID: getuid(), groupID: getgid(), posixPermissions: 0o755, creationTime: now,
                        modificationTime: now,
                        types: [ContentType.folder.identifier] + ContentTypeRegistry.standard.supertypes(of: .folder).map(\.identifier)))
                made[path] = applied.itemID
            }
        }
    }
}
