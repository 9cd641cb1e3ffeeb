import struct Foundation.URL
import struct Foundation.Data
import struct Foundation.Date
import func Foundation.NSTemporaryDirectory
#if canImport(Glibc)
    import Glibc
#endif

/// Space figures for `statfs` (`df`), in blocks of `blockSize` bytes and in inodes.
public struct StorageStatistics: Sendable {
    /// The size of one block, in bytes (`f_frsize`, `f_bsize`).
    public var blockSize: UInt64
    /// The size of the storage, in blocks.
    public var totalBlocks: UInt64
    /// Blocks not in use.
    public var freeBlocks: UInt64
    /// Free blocks a user other than root may use.
    public var availableBlocks: UInt64
    /// How many items the storage can hold (`df -i`).
    public var totalFiles: UInt64
    /// How many more items it can take.
    public var freeFiles: UInt64
    /// The longest name, in bytes (`f_namemax`).
    public var maxNameLength: UInt64
    public init(
        blockSize: UInt64, totalBlocks: UInt64, freeBlocks: UInt64, availableBlocks: UInt64,
        totalFiles: UInt64, freeFiles: UInt64, maxNameLength: UInt64 = 255
    ) {
        self.blockSize = blockSize; self.totalBlocks = totalBlocks; self.freeBlocks = freeBlocks
        self.availableBlocks = availableBlocks; self.totalFiles = totalFiles; self.freeFiles = freeFiles
        self.maxNameLength = maxNameLength
    }
}

/// A document provider: serves a tree of items and carries out user actions on it.
///
/// Modelled on NSFileProviderReplicatedExtension's action methods. Reading the tree
/// (`item`, `childItem`, `enumerateItems`, `openContents`) is synchronous because the bridge calls
/// it for every `ls` and `stat`: answer from memory, never block on the network. Actions are
/// async and run on a dedicated executor; return as soon as the change is durable and defer slow
/// follow-up work (upload, indexing) to the background.
///
/// Capability checks are the caller's job (the bridge checks `CapabilityCheck`, owners and mode
/// bits before calling), but a provider may refuse anything by throwing a `ProviderError`; its
/// code becomes the errno the program sees and its reason is logged with the path.
///
/// **The core: 19 requirements** — six to read the tree (`item`, `childItem`, `enumerateItems`,
/// `openContents`, `stagingDirectory`, `storageStatistics`), nine actions every writable tree
/// needs (`importDocument`, `createDirectory`, `createSymbolicLink`, `renameItem`,
/// `reparentItem`, `deleteItem`, `modifyContents`, `setAttributes`, `synchronize`) and four
/// hooks (`admitItem`, `supertypes`, `contentType`, `observeChanges`). Only `item`, `enumerateItems` and
/// `openContents` must be written: the rest have defaults in the extension below, the actions'
/// refusing cleanly (`EROFS` for changes to the tree, `EPERM` for owners), so a read-only
/// provider is those three members; give its items capabilities without `write` and `add` so
/// that `ls -l` shows it. A core requirement whose signature a provider mistypes is not picked
/// up — its default refuses, and the daemon's log line for the refusal names the action
/// ("refused setattr /path: this provider does not change attributes (EROFS)"): that line is
/// how a provider author learns it.
///
/// **One requirement per action.** Each action that makes an item takes the new item's owner,
/// group, mode and times (`NewItemAttributes`), and `modifyContents` the version the bytes were
/// based on: that is the form the bridge calls and the one a provider implements. The plain
/// forms of Apple's vocabulary — `importDocument(at:…)`, `createDirectory(withName:inParentItemIdentifier:)`,
/// `modifyContents(ofItemWithIdentifier:from:)`, … — are conveniences in a protocol extension
/// that call it (with `attributes: nil`, the provider's defaults); implementing them in a
/// provider has no effect on the mount.
///
/// **Opt-in protocols** for what only some providers have, each found by a cast
/// (`provider as? TrashProvider`) when the bridge starts and without defaults, so that a provider
/// that declares one and misspells or forgets a requirement does not compile. Without one the
/// bridge refuses as a filesystem without the feature does, with one log line:
/// - `TrashProvider` (trash, restore, where a trashed item came from; OptInTree.swift),
///   `AppleMetadataProvider` (tags, favourite rank), `ExtendedAttributeProvider` (`user.*`
///   attributes), `SpecialItemProvider` (FIFOs, sockets, device nodes), `HardLinkProvider` (one
///   item under several names);
/// - `ReplicaStatusProvider` (a replica's sync state, conflicts, status, retries) and
///   `OpenWritersProvider` (other replicas' changes held while a file is open for writing),
///   `OnDemandProvider` (contents downloaded when opened, pins, eviction),
///   `SmallFileImportProvider` (new small files handed over as bytes) and
///   `StoredSliceProvider` (small files read in place from a larger one) (OptInProviders.swift).
///
/// Apple's `lastUsedDate` is the item's access time: the bridge changes it, like the other
/// times, through `setAttributes` (`touch -a`, `utimensat`), and not when a file is opened (that
/// would make every open a durable write), so it has no requirement of its own.
///
/// The contract the mount relies on:
/// - A folder's `childItemCount` and `childFolderCount` are exact: `rmdir` refuses a folder
///   whose count is not 0 (ENOTEMPTY) and `find` trusts the link count made from the other.
/// - `modifyContents` failing with `.corruptFile` or `.typeNotAllowed` refuses the new version:
///   its bytes are discarded and the file reads as the stored version again. Any other error
///   keeps the written bytes staged, and the next close of the file tries again.
/// - A refused or failed action leaves the tree as it was (nothing half-done).
/// - Changes the provider makes on its own (a server's, a temporary identifier becoming
///   permanent) are told to the mount through `observeChanges`, so that the kernel drops what it
///   cached; inode numbers stay the same across identifier changes.
public protocol Provider: AnyObject, Sendable {
    // MARK: Reading the tree (answer from memory; the bridge asks on every lookup and stat)

    /// The item with this identifier, or `.noSuchItem` (ENOENT). `.rootContainer` is the root
    /// folder; `.trashContainer` the trash, for a provider that has one.
    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item
    /// The child of `parent` named `name` (compared byte for byte), or `.noSuchItem`. The default
    /// searches `enumerateItems`.
    func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item
    /// The children of a folder, in a stable order (`readdir`); `.notDirectory` for a file.
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item]
    /// A read-only descriptor on a file's current contents (`open` for reading). The caller
    /// closes it; a later content version does not change what it reads.
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32
    /// A directory on the same filesystem as the provider's storage, where the bridge stages
    /// files being copied in, so that the import can be a rename. The default is a private
    /// folder under the system's temporary directory.
    var stagingDirectory: URL { get }
    /// Space figures for `df` (`statfs`). The default reports the staging folder's filesystem.
    func storageStatistics() -> StorageStatistics

    // MARK: Making items (each takes the new item's attributes; plain forms in the extension)

    /// Moves the staged file, symbolic link or package directory `file` into storage as a new
    /// item named `file.name` in `parent`, and returns it (its identifier may be temporary).
    ///
    /// Called by the bridge when a file copied in through the mount is closed (flush, fsync or
    /// release), and by `docfs import --store`. `file` is readable only inside its access
    /// window (`SecurityScopedURL.withAccess`, or `withSealedPath` for a provider that renames it
    /// into its own storage); the caller removes what is left of it afterwards, so answer once
    /// the bytes are taken, not when they are uploaded.
    ///
    /// `attributes`: the owner, group, mode and the times the program set while copying (through
    /// the mount), which the new top item takes; nil when the caller gives none (`docfs import
    /// --store`, the plain `importDocument(at:…)`): the items then keep the mode and times of the
    /// files imported and belong to whoever runs the provider.
    ///
    /// Throws `.noSuchItem` or `.notDirectory` for `parent`, `.filenameCollision` when the name is
    /// taken, `.invalidName`/`.nameTooLong` for the name, `.typeNotAllowed` (EPERM) when the
    /// folder does not take the type, `.corruptFile` when the bytes are not a valid document of
    /// their type (the copying program's close() sees it). The default refuses (`.readOnly`).
    func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item
    /// Makes an empty folder named `name` in `parent` (`mkdir`), owned and moded as `attributes`
    /// say (nil: the provider's defaults — whoever runs it, mode 0755). Throws as
    /// `importDocument` does for the parent and the name. The default refuses (`.readOnly`).
    func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item
    /// Makes a symbolic link named `name` in `parent` whose target is `target`, stored as given
    /// and never followed by the provider (`symlink`, `ln -s`); a link's mode is always 0777.
    /// Throws `.invalidArgument` for an empty target and `.nameTooLong` for one of `PATH_MAX`
    /// bytes or more (`ItemNames.validateSymbolicLinkTarget`), otherwise as `createDirectory`. The default refuses
    /// (`.readOnly`).
    func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item

    // MARK: Moving and removing items (NSFileProvider vocabulary)

    /// Renames an item in its folder (`rename` within one folder). `.filenameCollision` when the
    /// name is taken; the default refuses (`.readOnly`).
    func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item
    /// Moves an item to another folder, optionally under a new name (`rename` across folders).
    /// With `replacing`, the item at the destination is deleted in the same atomic step (rename
    /// over an existing name): a reader sees the old or the new item, never neither. Throws
    /// `.filenameCollision` when the name is taken by another item than `replacing`,
    /// `.invalidArgument` for a folder moved below itself, `.isDirectory`/`.notDirectory`/
    /// `.directoryNotEmpty` for a replacement rename(2) refuses. The default refuses (`.readOnly`).
    func reparentItem(
        withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?
    ) async throws(ProviderError) -> Item
    /// Deletes a file, link or empty folder for good (`unlink`, `rmdir`, or `rm` inside the
    /// trash). `.directoryNotEmpty` for a folder with children. The default refuses (`.readOnly`).
    func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError)

    // MARK: Changing contents and attributes

    /// Replaces a file's contents with the staged file at `fileURL` (moved, not copied): a new
    /// content version, called by the bridge when a file opened for writing is closed or synced.
    /// Readers holding the old contents open keep seeing them. `.corruptFile` or
    /// `.typeNotAllowed` refuse the version (the written bytes are discarded); any other error
    /// keeps them staged for the next close. `baseVersion` (Apple's) is the item's version when
    /// the writer's staged copy began: a provider whose item has moved on since (another
    /// replica's version arrived) must not put these bytes over the newer ones (the store keeps
    /// them as a conflicted copy beside the file); a provider without versions ignores it. The
    /// plain `modifyContents(ofItemWithIdentifier:from:)` calls this with nil. The default
    /// refuses (`.readOnly`).
    func modifyContents(
        ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
        from fileURL: URL
    ) async throws(ProviderError) -> Item
    /// chmod, chown, chgrp, utimensat (nil fields of `changes` stay). The bridge has applied
    /// Linux's rules on who may (`OwnershipRules`); the provider stores the change and moves the
    /// item's change time. `.unsupported` for the mode of a symbolic link. The default refuses
    /// owner and group changes with `.notPermitted` (EPERM) and any other change with
    /// `.readOnly`; the plain `setAttributes(ofItemWithIdentifier:posixPermissions:contentModificationDate:)`
    /// is built on this.
    func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item
    /// Makes everything acknowledged so far survive a power cut (the bridge calls it for `fsync`
    /// and `fsyncdir`).
    /// The default has nothing to make durable.
    func synchronize() async throws(ProviderError)

    // MARK: Admission

    /// Asked before anything is written when an item is about to be added to `parent` under
    /// `name` (create, mkdir, symlink, or a move into the folder): throw `.typeNotAllowed` (EPERM)
    /// when the name already tells that the folder will not take it. Content that only the bytes
    /// can judge is checked by `importDocument`, whose error reaches the copying program's close().
    /// The default admits everything.
    func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError)

    // MARK: Content types

    /// Everything `type` conforms to, itself excluded, nearest first (for `user.docfs.conforms-to`
    /// and `docfs info`). Answer from memory: the bridge asks on getxattr. The default is the
    /// built-in conformance (`ContentTypeRegistry.standard`).
    func supertypes(of type: ContentType) -> [ContentType]

    /// The item's content type. A provider may leave a new file's type to be detected when
    /// something first asks (LocalStore: an import no folder rule checks); this detects it then.
    /// The default is `item.contentType`.
    func contentType(of item: Item) -> ContentType

    // MARK: Changes the provider makes on its own

    /// Registers the mount's handler for changes the provider makes on its own (not through an
    /// action the mount asked for). Call it with the changes from any thread, at any time after
    /// registration. The default keeps nothing: a provider whose tree only changes through the
    /// mount needs none.
    func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void)

}

// MARK: - Defaults: what a provider does not implement is refused as a filesystem refuses it

extension Provider {
    /// Looks the name up in `enumerateItems`, comparing bytes as a Linux filesystem does. Fine for
    /// small folders; a provider with an index answers directly.
    public func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item {
        for item in try enumerateItems(in: parent) where item.filename.utf8.elementsEqual(name.utf8) { return item }
        throw ProviderError(.noSuchItem)
    }

    /// A private folder under the system's temporary directory (staging is only used by copies
    /// into the mount, which a read-only provider refuses anyway).
    public var stagingDirectory: URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory(), isDirectory: true)
            .appendingPathComponent("docfs-staging-\(getpid())", isDirectory: true)
        mkdir(url.path, 0o700)
        return url
    }

    /// The figures of the filesystem holding the staging folder.
    public func storageStatistics() -> StorageStatistics {
        var st = statvfs()
        guard statvfs(stagingDirectory.path, &st) == 0 else {
            return StorageStatistics(blockSize: 4096, totalBlocks: 0, freeBlocks: 0, availableBlocks: 0, totalFiles: 0, freeFiles: 0)
        }
        return StorageStatistics(
            blockSize: UInt64(st.f_frsize), totalBlocks: UInt64(st.f_blocks), freeBlocks: UInt64(st.f_bfree),
            availableBlocks: UInt64(st.f_bavail), totalFiles: UInt64(st.f_files), freeFiles: UInt64(st.f_ffree))
    }

    /// Refuses: this provider does not add documents (EROFS).
    public func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        throw Self.readOnly("add documents")
    }
    /// Refuses: this provider does not make folders (EROFS).
    public func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        throw Self.readOnly("make folders")
    }
    /// Refuses: this provider does not make symbolic links (EROFS).
    public func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        throw Self.readOnly("make symbolic links")
    }
    /// Refuses: this provider does not rename items (EROFS).
    public func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        throw Self.readOnly("rename items")
    }
    /// Refuses: this provider does not move items (EROFS).
    public func reparentItem(
        withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?
    ) async throws(ProviderError) -> Item {
        throw Self.readOnly("move items")
    }
    /// Refuses: this provider does not delete items (EROFS).
    public func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        throw Self.readOnly("delete items")
    }
    /// Refuses: this provider does not change contents (EROFS).
    public func modifyContents(
        ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
        from fileURL: URL
    ) async throws(ProviderError) -> Item {
        throw Self.readOnly("change contents")
    }
    /// Refuses owner and group changes (EPERM) and any other change (EROFS); an empty change
    /// answers the item as it is.
    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        if changes.ownerID != nil || changes.groupID != nil {
            throw ProviderError(.notPermitted, "this provider does not change owners")
        }
        if !changes.isEmpty { throw Self.readOnly("change attributes") }
        return try item(for: identifier)
    }
    /// Nothing to make durable.
    public func synchronize() async throws(ProviderError) {}

    /// Admits everything; providers with per-folder content rules override this.
    public func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError) {}

    /// The built-in conformance; providers with types of their own override this.
    public func supertypes(of type: ContentType) -> [ContentType] {
        ContentTypeRegistry.standard.supertypes(of: type)
    }

    /// Types are known from the start.
    public func contentType(of item: Item) -> ContentType { item.contentType }

    /// No changes of its own to report.
    public func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {}

    private static func readOnly(_ what: String) -> ProviderError {
        ProviderError(.readOnly, "this provider does not \(what)")
    }
}

// MARK: - Apple's plain forms, built on the requirements above

extension Provider {
    /// Imports the file, symbolic link or package directory at `fileURL` as a new item named by
    /// its last path component: `importDocument(from:toParentItemIdentifier:attributes:)` with
    /// the file as its own access window and no attributes (the items keep the mode and times of
    /// the files imported). On success the file is gone from `fileURL` (moved into storage, or
    /// removed once the provider copied it); on failure it stays where it is. Throws what the
    /// attributed form throws.
    public func importDocument(at fileURL: URL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        let file = SecurityScopedURL(inPlace: fileURL)
        do {
            let item = try await importDocument(from: file, toParentItemIdentifier: parent, attributes: nil)
            file.finish()
            return item
        } catch {
            file.release()
            throw error
        }
    }

    /// Imports a staged file with no attributes: `importDocument(from:toParentItemIdentifier:attributes:)`
    /// with nil (what `docfs import --store` calls). The caller finishes `file` afterwards.
    public func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try await importDocument(from: file, toParentItemIdentifier: parent, attributes: nil)
    }

    /// Makes a folder with the provider's default owner and mode:
    /// `createDirectory(withName:inParentItemIdentifier:attributes:)` with nil.
    public func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try await createDirectory(withName: name, inParentItemIdentifier: parent, attributes: nil)
    }

    /// Makes a symbolic link owned by the provider's default owner:
    /// `createSymbolicLink(withName:target:inParentItemIdentifier:attributes:)` with nil.
    public func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier
    ) async throws(ProviderError) -> Item {
        try await createSymbolicLink(withName: name, target: target, inParentItemIdentifier: parent, attributes: nil)
    }

    /// Replaces a file's contents without a base version:
    /// `modifyContents(ofItemWithIdentifier:baseVersion:from:)` with nil.
    public func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, from fileURL: URL) async throws(ProviderError) -> Item {
        try await modifyContents(ofItemWithIdentifier: identifier, baseVersion: nil, from: fileURL)
    }

    /// Changes permission bits and/or the content-modification date:
    /// `setAttributes(ofItemWithIdentifier:changes:)` with those two fields.
    public func setAttributes(
        ofItemWithIdentifier identifier: ItemIdentifier, posixPermissions: UInt16?,
        contentModificationDate: Date?
    ) async throws(ProviderError) -> Item {
        try await setAttributes(
            ofItemWithIdentifier: identifier,
            changes: AttributeChanges(
                posixPermissions: posixPermissions,
                modificationTime: contentModificationDate.map(FileTime.init)))
    }
}
