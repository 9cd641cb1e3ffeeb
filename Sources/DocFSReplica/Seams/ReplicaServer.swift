import Foundation
import DocFSRemote
import DocFSWire

/// What the sync engine asks of the server's metadata (PostgreSQL in a mount, `RemoteDatabase`),
/// so that ordering, retries, conflicts and incoming changes can be tested against an in-memory
/// server (Tests/DocFSReplicaTests). Every operation is idempotent by its operation id; a chunk of
/// them is one call (`OperationApplier.apply`), and `createItem` and the like are one of them.
package protocol ReplicaServer: OperationApplier {
    /// The schema version on the server (0: none). Replicas never migrate it (`docfs remote setup`).
    func schemaVersion() async throws -> Int
    /// The tree's identity (`docfs_meta.tree_id`; nil on a server set up before schema 6).
    func treeID() async throws -> String?
    func rootID() async throws -> Int64
    func item(_ id: Int64) async throws -> ServerItem?
    func items(_ ids: [Int64]) async throws -> [ServerItem]
    func children(of parentID: Int64) async throws -> [ServerItem]
    func allItemIDs() async throws -> [Int64]
    func changes(since anchor: Int64, limit: Int) async throws -> [RemoteChange]
    /// The change at `position`, nil when the log has none there.
    func change(at position: Int64) async throws -> RemoteChange?
    func latestPosition() async throws -> Int64
    func logStart() async throws -> Int64
    func layout() async throws -> String?

    /// The SHA-256 (hex) the uploading replica recorded for the object `key` (nil: none).
    func expectedSHA256(key: String) async throws -> String?

    /// Blocks (schema 8): which of these the bucket holds; record a pack uploaded under this
    /// replica's intent and its blocks; record the manifests naming them and drop the packs'
    /// intents (answers blocks gone or damaged meanwhile, and then records no manifest); a
    /// version's blocks in order (nil: `key` is a whole object).
    func knownBlocks(_ hashes: [String]) async throws -> Set<String>
    func recordPack(_ key: String, size: Int64, blocks: [StoredBlock], version: String?) async throws
    func recordManifests(_ manifests: [BlockManifest], donePacks: [String]) async throws -> Set<String>
    func manifest(key: String) async throws -> (size: Int64, blocks: [StoredBlock])?
    /// Every place of these blocks, soundest first (schema 16: a block may have several).
    func places(of hashes: [String]) async throws -> [String: [StoredBlock]]
    /// Damaged blocks (schema 9): a reader marks one it found damaged or gone where it read it
    /// (false: no block there now); the live items whose current contents name damaged blocks.
    @discardableResult
    func markBlockDamaged(hash: String, pack: String) async throws -> Bool
    func damagedContents() async throws -> [DamagedContent]

    /// Objects about to be named by versions (gc spares them), and dropped once those are in
    /// (`apply` drops those of the contents it names).
    func recordUploadIntents(_ keys: [String]) async throws
    func dropUploadIntents(_ keys: [String]) async throws
    /// This replica is here (`docfs remote replicas` shows when each was last seen).
    func hello() async throws
    /// The server refuses this replica's login (removed, a password changed): why; nil when not.
    func loginRefusal() async -> RemoteError?

    /// Calls `listening` once notifications are on, then `notified` with the change log position
    /// of each change any replica commits, until the connection breaks (throws) or the task is
    /// cancelled.
    func followChanges(listening: @Sendable () -> Void, notified: @escaping @Sendable (Int64) -> Void) async throws

    func shutdown() async

    /// Returns once reads see at least what the server had committed when it was called: a hot
    /// standby's replay has reached the primary's change log end (`StandbyReads`). Called at the
    /// start of each catch-up, refresh and restore check.
    func awaitCurrentReads() async throws
}

extension ReplicaServer {
    /// Reads that go to the server itself are current.
    package func awaitCurrentReads() async throws {}
}

extension RemoteDatabase: ReplicaServer {
    package func followChanges(listening: @Sendable () -> Void, notified: @escaping @Sendable (Int64) -> Void) async throws {
        try await withChangeNotifications { notifications in
            listening()
            for try await position in notifications { notified(position) }
        }
    }
}
