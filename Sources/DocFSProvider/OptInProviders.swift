/// A replica of a server that reports on it (opt in by conforming; the bridge finds it with a
/// cast): `user.docfs.sync`, `user.docfs.conflict`, `user.docfs.status`, `docfs sync --retry`.
/// Answer the reads from memory: the bridge asks on getxattr and listxattr. Without it those
/// attributes are absent and a retry is refused (EOPNOTSUPP).
public protocol ReplicaStatusProvider: Provider {
    /// The item's sync state for `user.docfs.sync` and `docfs info` ("uploaded", "pending",
    /// "error: REASON"); nil for an item the server need not know.
    func syncState(of identifier: ItemIdentifier) -> String?
    /// What a replica's conflict did to the item, for `user.docfs.conflict` (a conflicted copy,
    /// a rename undone because another replica's came first, …); nil: none.
    func conflict(of identifier: ItemIdentifier) -> String?
    /// The replica's status as one JSON object for `user.docfs.status` on the root (`docfs
    /// status`); nil when there is none.
    func syncStatus() -> String?
    /// Tries again the changes of an item the server refused and that wait set aside (`docfs
    /// sync --retry`, `user.docfs.sync` set to "retry").
    func retrySync(of identifier: ItemIdentifier) async throws(ProviderError)
}

/// A provider whose items other writers change too (another replica's versions and deletes), and
/// that holds those changes back while a file is open for writing through the mount (opt in by
/// conforming; the bridge finds it with a cast).
public protocol OpenWritersProvider: Provider {
    /// A file's contents are open for writing through the mount (a staged copy began), and the
    /// last such writer let go of them. Between the two the provider keeps other replicas'
    /// versions and deletes of the file aside, so that the writer's close decides (its
    /// `modifyContents` carries the version it began from). Calls pair up, once per inode
    /// however many handles.
    func contentsOpenedForWriting(of identifier: ItemIdentifier)
    func contentsClosedForWriting(of identifier: ItemIdentifier)
}

/// A provider whose files' contents may not be here yet and are fetched when opened (opt in by
/// conforming; the bridge finds it with a cast). Without it the bridge opens files with
/// `openContents`, and `docfs pin` and `docfs evict` are refused (EOPNOTSUPP).
public protocol OnDemandProvider: Provider {
    /// Like `openContents`, for a handle that reads as bytes arrive: a file not downloaded yet
    /// answers at once, with the download's progress for the reads to wait on.
    func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents
    /// A handle `openContentsForReading` gave was closed (an open file is never evicted).
    func contentsClosed(of identifier: ItemIdentifier)
    /// Keeps a file, or everything below a folder, downloaded (`docfs pin`), downloading what is
    /// not; `false` lets it be evicted again.
    func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError)
    /// Whether the item or a folder above it is pinned.
    func isPinned(_ identifier: ItemIdentifier) -> Bool
    /// Drops the downloaded contents of a file, or of the files below a folder, that the server
    /// has (`docfs evict`); returns how many files were evicted. A file whose contents are not
    /// on the server yet is kept (`.busy` for a single file).
    func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int
}

/// A provider that takes a small new file's bytes from memory instead of a staged file (opt in
/// by conforming; the bridge finds it with a cast). While `smallFileLimit` is above 0, the bridge
/// keeps a new file copied in in the daemon's memory as long as it has at most that many bytes
/// (and its memory for all such files allows), and imports it with this call at close; a file
/// that grows past it is staged and imported with `importDocument(from:…)` as usual.
public protocol SmallFileImportProvider: Provider {
    /// Files with at most this many bytes may be handed over as bytes; 0: none.
    var smallFileLimit: Int { get }
    /// Imports a new file named `name` holding `contents` into `parent`, like
    /// `importDocument(from:toParentItemIdentifier:attributes:)`: the same checks and errors,
    /// with the times and mode in `attributes` (the bridge gives what the program wrote and set).
    func importDocument(
        contents: [UInt8], named name: String, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes
    ) async throws(ProviderError) -> Item
}

/// A provider that keeps some files' bytes inside a larger file and lets them be read in place
/// (opt in by conforming; the bridge finds it with a cast): the bridge asks on open, and reads
/// such a file with `pread` on the larger one instead of opening its contents.
public protocol StoredSliceProvider: Provider {
    /// Where a stored file's bytes are: a descriptor the caller closes, on a file that holds
    /// them at `offset` for `length` bytes; nil for a file with contents of its own (open those
    /// with `openContents`). Answer from memory: the bridge asks on every open.
    func openStoredSlice(of identifier: ItemIdentifier) throws(ProviderError) -> StoredSlice?
}

/// A provider that moves a staged file straight into its own storage, taking it by its path in
/// the provider's `stagingDirectory` (opt in by conforming; the bridge finds it with a cast).
/// Package-internal: the embedded store's hand-over, with no `SecurityScopedURL` and no slot
/// folder in between; a third-party provider takes `importDocument(from:…)`'s scoped file.
/// The contract is `importDocument(from:toParentItemIdentifier:attributes:)`'s, the file given by
/// its path and the item's name apart: on success the provider has taken the file (moved it into
/// storage, or removed it once copied); on a refusal the file is where it was, and the caller
/// removes it.
package protocol StagedFileImportProvider: Provider {
    func importStagedFile(
        at path: String, named name: String, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item
}

/// A file's bytes inside a larger file (`StoredSliceProvider.openStoredSlice`).
public struct StoredSlice: Sendable {
    public var fd: Int32
    public var offset: Int64
    public var length: Int
    public init(fd: Int32, offset: Int64, length: Int) {
        self.fd = fd
        self.offset = offset
        self.length = length
    }
}

/// A provider whose stored file may become the live file a writer changes in place, beside the
/// readers the kernel serves from it (`Passthrough`): opt in by conforming, the bridge finds it
/// with a cast. Only such a provider's files are read through the kernel: the kernel takes every
/// later open of a file its readers hold onto the same backing file, a writer's too.
package protocol LiveContentsProvider: Provider {
    /// Makes the item's stored file, which is open as `device`/`inode` (what `openContents`
    /// gave), its live file: the version it holds is first kept, byte-exact, in a file of its own
    /// (a clone where the filesystem offers one, else a copy) where the provider keeps that
    /// version, and the file moves to the staging directory. Answers its path there and the item
    /// (whose version it was); the caller changes it in place and hands copies of it over
    /// (`modifyContents`), and removes it at the end. Other items' names of the file take the
    /// kept file too, and a reader of the file by path that must see one version whole (a
    /// replica's upload) is told to read again. Nil when it cannot: the file is no longer the
    /// item's current version, has a name no item accounts for, or sits in a larger file.
    func detachLiveContents(of identifier: ItemIdentifier, device: UInt64, inode: UInt64) throws(ProviderError) -> LiveContents?
    /// The same where the readers' file (`readersFile`, a descriptor the caller keeps) is no
    /// longer the item's stored version (another replica's version replaced it while they had it
    /// open): other items' names of it (a conflicted copy's) take a copy of it, then the item's
    /// current version (`current`, what `openContents` gave for `version`, the caller's to
    /// close) is copied into it in place (its readers see that version, as if it had been
    /// written in place) and it becomes the live file, a file without a name: the answer's
    /// `descriptor` (the caller's to close), its path empty. Nil when it cannot: the file is
    /// `current`, has a name no item accounts for, or the item's version is no longer `version`.
    func adoptStaleContents(
        of identifier: ItemIdentifier, readersFile: Int32, current: Int32, version: ItemVersion
    ) throws(ProviderError) -> LiveContents?
}

/// A stored file made live (`LiveContentsProvider.detachLiveContents`).
package struct LiveContents: Sendable {
    package var path: String
    package var item: Item
    /// The live file open for reading and writing, when it has no name (`adoptStaleContents`).
    package var descriptor: Int32?
    package init(path: String, item: Item, descriptor: Int32? = nil) {
        self.path = path
        self.item = item
        self.descriptor = descriptor
    }
}
