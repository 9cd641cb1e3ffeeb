import DocFSProvider

/// Contents on demand as the store hands it its actions (DocFSReplica's `ContentsOnDemand`
/// decides: what to download, what to evict and when, what is pinned). Handed to the store once
/// when the replica is opened (`StoreReplica.setOnDemandHandler`), before any FUSE op; the store
/// forwards the provider's on-demand actions and tells it what it saw.
package protocol OnDemandHandler: AnyObject, Sendable {
    func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents
    func contentsClosed(of identifier: ItemIdentifier)
    func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int
    func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError)
    /// The row or a folder above it is pinned.
    func isPinnedRow(_ row: Int64) -> Bool
    /// The whole contents of a file not here (a program opening it for writing copies all of
    /// it): waits for its download; the path to open.
    func downloadedPath(ofRow row: Int64) throws(ProviderError) -> String
    /// A file's contents were opened (the least-recently-used order).
    func contentsOpened(row: Int64)
    /// Files' contents reached the server: they can be evicted now.
    func contentsUploaded()
    /// Temporary rows became the server's identifiers (under the writer lock).
    func rowsRenumbered(_ renumbers: [(old: Int64, new: Int64)])
}

/// A file as contents on demand sees it (`StoreReplica.onDemandFile(row:)`).
package struct OnDemandFile: Sendable, Equatable {
    package var row: Int64
    package var parent: Int64?
    package var kind: ItemKind
    package var isFile: Bool { kind == .file }
    package var isFolder: Bool { kind == .folder }
    package var isDownloaded: Bool
    package var size: Int64
    package var contentVersion: UInt64
    /// The server's object for these contents (nil: not on the server yet).
    package var remoteKey: String?
    /// Its capabilities allow evicting (`allowsEvicting`).
    package var allowsEvicting: Bool
    /// Changes to it wait in the outbox (known in an eviction pass only).
    package var waiting = false

    package init(
        row: Int64, parent: Int64?, kind: ItemKind, isDownloaded: Bool, size: Int64, contentVersion: UInt64,
        remoteKey: String?, allowsEvicting: Bool, waiting: Bool = false
    ) {
        self.row = row
        self.parent = parent
        self.kind = kind
        self.isDownloaded = isDownloaded
        self.size = size
        self.contentVersion = contentVersion
        self.remoteKey = remoteKey
        self.allowsEvicting = allowsEvicting
        self.waiting = waiting
    }
}
