import Foundation
import DocFSProvider
import DocFSWire
import DocFSStore

/// What the sync engine, the incoming sync, the change follower, the bootstrap, the heal and the
/// status ask of the replica's local store (`StoreReplica` in a mount, `StoreReplica+ReplicaStore`),
/// so that the engine can be tested against a store in memory (Tests/DocFSReplicaTests), as it
/// is against `ReplicaServer` and `ObjectStore`. Rows are the store's: the server's identifiers
/// for items it has, temporary ones (`ReplicaRows.temporaryBase` and above) for items not sent yet.
package protocol ReplicaStore: OnDemandStore {
    // MARK: The replica

    /// The replica's folder (its name tells versions apart; `recovered/` is below it).
    var url: URL { get }
    /// Where downloads are written before the store takes them.
    var stagingDirectory: URL { get }
    /// Hands the store the engine's hooks while it runs (nil: the engine stopped).
    func attach(_ hooks: ReplicaStoreHooks?)
    /// Makes what was stored so far durable (the bootstrap's end).
    func synchronizeSync() throws(ProviderError)

    // MARK: Items, read

    /// The row an entry's row is now (a create completed since gives its permanent identifier).
    func currentRow(_ row: Int64) -> Int64
    /// The item's content file, nil when its contents are not here.
    func contentURL(ofRow row: Int64) -> URL?
    /// The content files made a writer's live file (`LiveDetaches`), which the upload checks
    /// what it read against; nil where no file is ever written in place.
    var liveDetaches: LiveDetaches? { get }
    /// The item's attributes, nil when it is gone.
    func item(ofRow row: Int64) -> Item?
    /// The item's content type and what it conforms to, nearest first; nil when it is gone.
    func typeChain(ofRow row: Int64) -> [String]?

    // MARK: The outbox

    /// The oldest entries, in order.
    func outboxEntries(limit: Int, skipping: Set<Int64>) throws(ProviderError) -> [OutboxEntry]
    /// Entries done with (sent, or never sendable) leave the outbox in one transaction; creates'
    /// temporary rows become the permanent identifiers; `refetch` is noted to be fetched again.
    func completeOutbox(_ completions: [OutboxCompletion], refetch: [Int64]) throws(ProviderError)
    /// Entries of items the server lost (a restored server): dropped, their contents kept aside.
    func forgetOutboxEntries(rows: [Int64]) throws(ProviderError)
    /// Per row: entries waiting and the latest one's seq.
    func outboxWaiting(rows: Set<Int64>) -> [Int64: (count: Int, latest: Int64)]
    /// Which of these operation ids are still waiting here.
    func outboxEntryIDs(among ids: [UUID]) -> Set<UUID>
    var outboxCounts: (pending: Int, pendingBytes: Int64) { get }
    /// How long ago an action last added to the outbox (nil: none since the mount).
    var outboxQuietFor: Duration? { get }
    /// The engine is about to wait: the next entry wakes it.
    func outboxIdle()

    // MARK: Sync state shown to the user

    func syncError(of row: Int64) -> String?
    /// Marks (nil: clears) an item's sync error (`user.docfs.sync`).
    func setSyncError(_ message: String?, row: Int64)
    /// A conflict on the item, and its one line for `docfs status`.
    func noteConflict(_ message: String, row: Int64, summary: String)
    var conflictSummary: (count: Int, recent: [String]) { get }
    var serverSchemaVersion: Int { get }
    func noteServerSchema(_ version: Int)

    // MARK: Incoming changes

    /// The values of these replica keys in the store's `meta` that are set (`SyncAnchor`).
    func replicaMeta(_ keys: [String]) throws(ProviderError) -> [String: String]
    /// Sets and removes replica keys in `meta` together, in one transaction after the journal.
    func setReplicaMeta(_ values: [String: String], removing: [String]) throws(ProviderError)
    /// The row, or a folder above it, is pinned (its files' contents stay here).
    func isPinnedRow(_ row: Int64) -> Bool
    /// The content version of the item here; nil when it is not here.
    func contentVersion(ofRow row: Int64) -> UInt64?
    /// Runs the incoming apply's reads and writes (`IncomingApply`) as one action under the
    /// store's writer lock; the kernel is told what changed once it ends. Nil: not a replica.
    func editIncoming<T>(_ body: (any IncomingTreeEdit) throws(ProviderError) -> T) throws(ProviderError) -> T?
    /// One item of a new replica's first copy of the tree (the bootstrap); `contentFile`: its
    /// contents downloaded already (nil: fetched when first opened).
    func addServerItem(_ server: ServerItem, contentFile: String?) throws(ProviderError)
    /// Items this replica had from the server, with what tells a restored server's rows apart.
    func permanentIdentities() throws(ProviderError) -> [Int64: (kind: ItemKind, creationTime: FileTime)]
    /// Makes an item a restored server lost again, as a new item of this replica's (sent like any
    /// other): named `name` in the folder at `folder` (names from the root). `RestoredItems` asks.
    func putBack(_ item: LostItem, in folder: [String], as name: String) async throws(ProviderError) -> PutBackResult

    // MARK: What the server decided otherwise

    // (A conflicted copy is forked through `editIncoming`: `ConflictedCopy`.)
    /// A further name the server refused is removed here; its path.
    func dropRefusedName(row: Int64) throws(ProviderError) -> String?

    // MARK: Open writers

    /// Items whose other replicas' changes wait for a writer to let go (from the last mount).
    func heldBackRows() -> [Int64]
    /// These rows leave that list (`HeldWriters.clearFetched` decides which may).
    func clearHeldBack(_ rows: [Int64])
    /// The watch of files open for writing: `make`'s the first time, the same one after (nil:
    /// the store holds nothing back). `HeldWriters.watching` asks.
    func watchOpenWriters(_ make: () -> any OpenWriterWatch) -> (any OpenWriterWatch)?
    /// The folders above `row`, nearest first, up to the root or the trash (not included).
    func folderRows(above row: Int64) -> [Int64]
}

extension ReplicaStore {
    /// The rows of the items this replica had from the server, in order.
    func permanentRows() throws(ProviderError) -> [Int64] { try permanentIdentities().keys.sorted() }
}

/// An item of this replica's that a restored server no longer has (its identifier unknown there):
/// what it takes to make it again at its path (`ReplicaStore.putBack`).
package struct LostItem: Sendable {
    package var row: Int64
    /// Names from the root to the item, its own last.
    package var path: [String]
    package var kind: ItemKind
    package var attributes: NewItemAttributes
    /// A file's bytes: the copy kept in `recovered/`.
    package var contents: String?
    package var symlinkTarget: String?

    package init(
        row: Int64, path: [String], kind: ItemKind, attributes: NewItemAttributes, contents: String?,
        symlinkTarget: String?
    ) {
        self.row = row
        self.path = path
        self.kind = kind
        self.attributes = attributes
        self.contents = contents
        self.symlinkTarget = symlinkTarget
    }
}

/// What became of one `putBack`.
package enum PutBackResult: Equatable, Sendable {
    /// A new item (its row, temporary until the server numbers it).
    case made(row: Int64)
    /// The name is taken there: by a folder (a folder put back goes into it) or by another item.
    case nameTaken(byFolder: Bool)
    /// The folder is not here (or is not a folder).
    case noFolder
}

/// What the engine hands the store while it runs.
package struct ReplicaStoreHooks: Sendable {
    /// An action added to the outbox.
    package var wake: @Sendable () -> Void
    /// The status JSON (`user.docfs.status`).
    package var status: @Sendable () -> String
    /// `docfs sync --retry` of an item set aside.
    package var retry: @Sendable (Int64) -> Void
    /// Names a writer's conflicted copy (`ConflictNames.copyNamer`); the store keeps it after
    /// the engine stops.
    package var conflictCopyNames: @Sendable (String) -> String = ConflictNames.copyNamer
}
