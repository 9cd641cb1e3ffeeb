import Foundation
import DocFSProvider
import GRDB
import Logging

/// The replica side of a store, a part `LocalStore` owns when the store has a server
/// (`docfs init --remote`): the replica's state and its outbox (`ReplicaState`, `StoreOutbox`),
/// and, as the other parts, the tree, the writer and the contents it works on. It is what the
/// sync engine sees of the store (DocFSReplica's `ReplicaStore`): the outbox read and completed,
/// the server's items and other replicas' changes written (`ReplicaTreeEdit`), contents on
/// demand's mechanics, the writers' watch, the replica's keys in `meta`.
///
/// Its methods are spread over files by role: `+Outbox` the outbox and temporary rows,
/// `+Incoming` other replicas' changes and conflicted copies, `+Download` the server's items of
/// a new replica, `+OnDemand` contents on demand, `+Writers` files open for writing and items set
/// aside, `+RemoteNames` hard links as the server keeps them, `+Anchor` the replica's keys in `meta`.
package final class StoreReplica: @unchecked Sendable {
    /// The store's folder (the replica's name; `recovered/` is below it).
    package let url: URL
    let layout: Layout
    package let logger: Logger
    let tree: StoreTree
    let writer: StoreWriter
    let contents: StoreContents
    /// What the sync reports and hands over (errors, conflicts, the engine's hooks, contents on
    /// demand, the writers' watch), and the outbox.
    let state: ReplicaState
    var outbox: StoreOutbox { state.outbox }
    /// The store, for the actions this part shares with it (the write path, new records, content
    /// types, the provider's own actions a lost item is made again by). Weak: the store owns this
    /// part. Inside `write` it is there (`write` holds it).
    private(set) weak var store: LocalStore?

    init(state: ReplicaState, url: URL, layout: Layout, logger: Logger, tree: StoreTree, writer: StoreWriter, contents: StoreContents) {
        self.state = state
        self.url = url
        self.layout = layout
        self.logger = logger
        self.tree = tree
        self.writer = writer
        self.contents = contents
    }

    /// Called once by the store's `init`.
    func belongs(to store: LocalStore) { self.store = store }

    /// Where downloads are written before the store takes them.
    package var stagingDirectory: URL { contents.stagingDirectory }

    // MARK: - The store's write path (LocalStore+Lifecycle)

    /// Runs an action under the store's writer lock (`LocalStore.write`).
    func write<T>(_ body: (DatabaseQueue) throws(ProviderError) -> T) throws(ProviderError) -> T {
        guard let store else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        return try store.write(body)
    }

    /// The store, inside `write` (which holds it).
    private var owner: LocalStore { store! }

    func flushJournal(_ database: DatabaseQueue) throws(ProviderError) { try owner.flushJournal(database) }

    func commit(
        _ database: DatabaseQueue, saving records: [Record], deleting deletions: [Int64] = [],
        replicated: Bool = true, _ what: @autoclosure () -> String
    ) throws(ProviderError) {
        try owner.commit(database, saving: records, deleting: deletions, replicated: replicated, what())
    }

    func newRecord(
        row: Int64, parent: Record, name: String, kind: ItemKind, size: Int64 = 0, now: FileTime, modified: FileTime? = nil,
        attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil
    ) -> Record {
        owner.newRecord(
            row: row, parent: parent, name: name, kind: kind, size: size, now: now, modified: modified,
            attributes: attributes, mode: mode, target: target)
    }

    func retyped(_ record: Record, as item: Item, name: String, policy: Capabilities?) -> Item {
        owner.retyped(record, as: item, name: name, policy: policy)
    }

    func nameRows(of row: Int64, _ database: DatabaseQueue) throws(ProviderError) -> [Int64] { try owner.nameRows(of: row, database) }

    /// Makes everything stored so far durable (`LocalStore.synchronizeSync`).
    package func synchronizeSync() throws(ProviderError) {
        guard let store else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        try store.synchronizeSync()
    }

    // MARK: - Rows, paths and items

    func read<T>(_ body: (borrowing TreeState) throws(ProviderError) -> T) throws(ProviderError) -> T { try tree.read(body) }

    static func identifier(forRow row: Int64) -> ItemIdentifier { StoreTree.identifier(forRow: row) }
    static let rootRow = LocalStore.rootRow
    static let trashRow = LocalStore.trashRow
    static let temporaryRowBase = LocalStore.temporaryRowBase

    /// The item's path in the tree, for log lines.
    package func path(ofRow row: Int64) -> String {
        guard let current = tree.row(for: Self.identifier(forRow: row)) else { return "?" }
        return tree.path(of: current)
    }

    /// The item's attributes, nil when it is gone.
    package func item(ofRow row: Int64) -> Item? { try? store?.item(for: Self.identifier(forRow: row)) }

    /// The item's content file, nil when its contents are not here.
    package func contentURL(ofRow row: Int64) -> URL? { store?.contentURL(of: Self.identifier(forRow: row)) }

    /// The store's content files made a writer's live file (`LiveDetaches`).
    package var liveDetaches: LiveDetaches? { store?.liveDetaches }

    /// The item's content type and what it conforms to, nearest first; nil when it is gone.
    package func typeChain(ofRow row: Int64) -> [String]? {
        guard let store, let item = item(ofRow: row) else { return nil }
        let type = store.contentType(of: item)
        return [type.identifier] + store.supertypes(of: type).map(\.identifier)
    }

    /// The store as a provider: a lost item is made again through its own actions (DocFSReplica's
    /// `putBack`), checked and sent like an item a program made.
    package var provider: LocalStore? { store }
}

/// A replica's fixed rows, and where temporary ones start (the store's rows, as the sync engine
/// names them).
package enum ReplicaRows {
    package static let root = LocalStore.rootRow
    package static let trash = LocalStore.trashRow
    package static let temporaryBase = LocalStore.temporaryRowBase
    /// An identifier the server gave (not the root, the trash or a temporary row).
    package static func isPermanent(_ row: Int64) -> Bool { row > trash && row < temporaryBase }
}
