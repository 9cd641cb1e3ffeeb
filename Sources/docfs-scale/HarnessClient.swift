import Foundation
import Logging
import DocFSProvider
import DocFSReplica
import DocFSStore

/// One replica of `docfs-scale replicas`: a real store (`LocalStore` in a folder of its own) and
/// the sync engine a mount runs over it (`SyncEngine`: its change follower, incoming sync and
/// sending loop, its own pool and listening connection), without FUSE: files are made through the
/// store's own API, as the bridge makes them on close().
final class HarnessClient: @unchecked Sendable {
    let index: Int
    let store: LocalStore
    let replica: StoreReplica
    let engine: SyncEngine

    init(index: Int, folder: URL, configuration: ReplicaConfiguration, logger: Logger) throws {
        self.index = index
        store = try LocalStore.open(at: folder, logger: logger)
        guard let replica = store.replica else {
            store.close()
            throw HarnessError("\(folder.path) is not a replica's store")
        }
        self.replica = replica
        engine = SyncEngine(store: replica, configuration: configuration, logger: logger)
    }

    func start() { engine.start() }

    func stop() async {
        await engine.stop()
        store.close()
    }

    /// A new file `name` in the root holding `bytes`; its row (temporary until the engine sent it).
    func write(_ name: String, _ bytes: [UInt8]) async throws -> Int64 {
        let item = try await store.importDocument(
            contents: bytes, named: name, toParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o644))
        guard let row = LocalStore.row(for: item.identifier) else { throw HarnessError("no row for \(item.identifier)") }
        return row
    }

    /// The server's identifier of a row made here, once the engine has sent it (nil before).
    func serverRow(_ row: Int64) -> Int64? {
        let now = replica.currentRow(row)
        return ReplicaRows.isPermanent(now) ? now : nil
    }

    /// The item the server numbered `row` is in this store.
    func has(_ row: Int64) -> Bool { replica.item(ofRow: row) != nil }

    /// The change-log position this store has applied up to (-1: unreadable).
    func anchor() -> Int64 { (try? replica.syncAnchor().position) ?? -1 }

    /// Changes made here and not yet on the server.
    var pending: Int { replica.outboxCounts.pending }

    /// The engine's last answer from the server: false when it could not reach it (no connection).
    var online: Bool { engine.status().online }
    var lastError: String? { engine.status().lastError }
    /// The engine has been idle once, or has met an error (its first pass is over).
    var settled: Bool {
        let status = engine.status()
        return status.lastSyncAt != nil || status.lastError != nil
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
