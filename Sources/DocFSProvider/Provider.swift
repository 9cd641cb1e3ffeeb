import struct Foundation.URL
import struct Foundation.Data
import struct Foundation.Date
import func Foundation.NSTemporaryDirectory
#if canImport(Glibc)
import Glibc
#endif

/// Space figures for `statfs`.
public struct StorageStatistics: Sendable {
    public var blockSize: UInt64
    public var totalBlocks: UInt64
    public var freeBlocks: UInt64
    public var availableBlocks: UInt64
    public var totalFiles: UInt64
    public var freeFiles: UInt64
    public var maxNameLength: UInt64
    public init(blockSize: UInt64, totalBlocks: UInt64, freeBlocks: UInt64, availableBlocks: UInt64,
                totalFiles: UInt64, freeFiles: UInt64, maxNameLength: UInt64 = 255) {
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
/// **Only the four reading members are required.** Every action has a default in the extension
/// below that refuses cleanly — `EROFS` for changes to the tree, `EOPNOTSUPP` for tags and
/// extended attributes — so a read-only provider is `item`, `childItem` (or not even that: the
/// default searches `enumerateItems`), `enumerateItems` and `openContents`; give its items
/// capabilities without `write` and `add` so that `ls -l` shows it.
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
    // MARK: Reading the tree

    /// The item with this identifier, or `.noSuchItem`.
    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item
    /// The child of `parent` named `name`, or `.noSuchItem`.
    func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item
    /// The children of a folder, in a stable order.
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item]
    /// A read-only descriptor on a file's current contents. The caller closes it.
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32
    /// A directory on the same filesystem as the provider's storage, where callers stage
    /// files to import so the import can be a rename.
    var stagingDirectory: URL { get }
    /// Space figures for `df`.
    func storageStatistics() -> StorageStatistics

    // MARK: Actions (NSFileProvider vocabulary)

    /// Moves the staged file (or package directory) at `fileURL` into storage under `parent`.
    /// The item's name is the file's name. The URL is security-scoped: readable only inside
    /// the call. Returns the new item (its identifier may be temporary).
    func importDocument(at fileURL: URL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item
    func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item
    func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item
    func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item
    /// Moves an item to another folder, optionally under a new name. With `replacing`, the item
    /// at the destination is deleted in the same atomic step (rename over an existing name).
    func reparentItem(withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
                      newName: String?, replacing: ItemIdentifier?) async throws(ProviderError) -> Item
    func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError)
    func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
    func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier?) async throws(ProviderError) -> Item
    func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
    func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
    func setLastUsedDate(_ date: Date?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item

    // MARK: Changing contents and attributes

    /// Replaces a file's contents with the staged file at `fileURL` (moved, not copied): a new
    /// content version. Readers holding the old contents open keep seeing them.
    func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, from fileURL: URL) async throws(ProviderError) -> Item
    /// Changes permission bits and/or the content-modification date.
    func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, posixPermissions: UInt16?,
                       contentModificationDate: Date?) async throws(ProviderError) -> Item
    /// Makes everything acknowledged so far survive a power cut (fsync).
    func synchronize() async throws(ProviderError)

    // MARK: Admission

    /// Asked before anything is written when an item is about to be added to `parent` under
    /// `name` (create, mkdir, symlink, or a move into the folder): throw `.typeNotAllowed` (EPERM)
    /// when the name already tells that the folder will not take it. Content that only the bytes
    /// can judge is checked by `importDocument`, whose error reaches the copying program's close().
    func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError)

    // MARK: Content types

    /// Everything `type` conforms to, itself excluded, nearest first (for `user.docfs.conforms-to`
    /// and `docfs info`). Answer from memory: the bridge asks on getxattr.
    func supertypes(of type: ContentType) -> [ContentType]

    // MARK: Owners, modes and times (each has a default below)

    /// Imports a staged file as a new item with these owner, group, mode and times. The bridge
    /// calls this; the default imports and then sets the attributes.
    func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
                        attributes: NewItemAttributes) async throws(ProviderError) -> Item
    func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier,
                         attributes: NewItemAttributes) async throws(ProviderError) -> Item
    func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
                            attributes: NewItemAttributes) async throws(ProviderError) -> Item
    /// A FIFO or a socket's name (`kind` is `.fifo` or `.socket`): an item with no contents. The
    /// default refuses (EPERM).
    func createSpecialItem(withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
                           attributes: NewItemAttributes) async throws(ProviderError) -> Item
    /// chmod, chown, chgrp, utimensat. The bridge has applied Linux's rules on who may; the
    /// provider stores the change and moves the item's change time. The default handles mode and
    /// times through the older calls and refuses owner changes (EPERM).
    func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item

    // MARK: Security-scoped import, trash details, stored extended attributes
    // (each has a default below, so a provider needs to implement only what it supports)

    /// Registers the mount's handler for changes the provider makes on its own (not through an
    /// action the mount asked for). Call it with the changes from any thread, at any time after
    /// registration. The default keeps nothing: a provider whose tree only changes through the
    /// mount needs none.
    func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void)

    /// Imports a staged file that is readable only inside its access window (see
    /// `SecurityScopedURL`). The bridge calls this; the default opens the window around
    /// `importDocument(at:toParentItemIdentifier:)`. The caller removes the staged file afterwards.
    func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item
    /// Restores a trashed item into `parent` under `newName` (a `mv` out of the trash names its
    /// target). The default is `untrashItem` followed by a rename when the names differ.
    func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
                     newName: String) async throws(ProviderError) -> Item
    /// Where a trashed item came from, when the provider remembers it.
    func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin?
    /// Names of the item's stored extended attributes (`user.*`, not docfs's own), in a stable order.
    func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String]
    /// One stored extended attribute; `.noSuchAttribute` (ENODATA) when it is not set.
    func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data
    /// Stores (or, with a nil value, removes) an extended attribute. Limits: `ExtendedAttributes`.
    func setExtendedAttribute(named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
                              forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError)
}

extension Provider {
    // MARK: Defaults for reading

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
        return StorageStatistics(blockSize: UInt64(st.f_frsize), totalBlocks: UInt64(st.f_blocks), freeBlocks: UInt64(st.f_bfree),
                                 availableBlocks: UInt64(st.f_bavail), totalFiles: UInt64(st.f_files), freeFiles: UInt64(st.f_ffree))
    }

    // MARK: Defaults for actions: refused as a read-only filesystem refuses them

    public func importDocument(at fileURL: URL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        throw Self.readOnly("add documents")
    }
    public func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        throw Self.readOnly("make folders")
    }
    public func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        throw Self.readOnly("make symbolic links")
    }
    public func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        throw Self.readOnly("rename items")
    }
    public func reparentItem(withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
                             newName: String?, replacing: ItemIdentifier?) async throws(ProviderError) -> Item {
        throw Self.readOnly("move items")
    }
    public func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        throw Self.readOnly("delete items")
    }
    public func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        throw Self.readOnly("trash items")
    }
    public func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier?) async throws(ProviderError) -> Item {
        throw Self.readOnly("restore items")
    }
    public func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        throw ProviderError(.unsupported, "this provider does not keep tags")
    }
    public func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        throw ProviderError(.unsupported, "this provider does not keep favourite ranks")
    }
    public func setLastUsedDate(_ date: Date?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        throw Self.readOnly("change times")
    }
    public func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, from fileURL: URL) async throws(ProviderError) -> Item {
        throw Self.readOnly("change contents")
    }
    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, posixPermissions: UInt16?,
                              contentModificationDate: Date?) async throws(ProviderError) -> Item {
        throw Self.readOnly("change attributes")
    }
    /// Nothing to make durable.
    public func synchronize() async throws(ProviderError) {}

    /// No changes of its own to report.
    public func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {}

    private static func readOnly(_ what: String) -> ProviderError {
        ProviderError(.readOnly, "this provider does not \(what)")
    }

    /// Admits everything; providers with per-folder content rules override this.
    public func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError) {}

    /// The built-in conformance; providers with types of their own override this.
    public func supertypes(of type: ContentType) -> [ContentType] {
        ContentTypeRegistry.standard.supertypes(of: type)
    }

    /// Opens the access window for exactly the duration of the plain import.
    public func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier) async throws(ProviderError) -> Item {
        try await file.withAccess { (url) async throws(ProviderError) -> Item in
            try await importDocument(at: url, toParentItemIdentifier: parent)
        }
    }

    public func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
                            newName: String) async throws(ProviderError) -> Item {
        let restored = try await untrashItem(withIdentifier: identifier, toParentItemIdentifier: parent)
        if restored.filename.utf8.elementsEqual(newName.utf8) { return restored }
        return try await renameItem(withIdentifier: restored.identifier, toName: newName)
    }

    public func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? { nil }

    public func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
                               attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        let item = try await importDocument(from: file, toParentItemIdentifier: parent)
        return try await applyNewItemAttributes(attributes, to: item)
    }

    public func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier,
                                attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        let item = try await createDirectory(withName: name, inParentItemIdentifier: parent)
        return try await applyNewItemAttributes(attributes, to: item)
    }

    public func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
                                   attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        let item = try await createSymbolicLink(withName: name, target: target, inParentItemIdentifier: parent)
        return try await applyNewItemAttributes(attributes, to: item)
    }

    public func createSpecialItem(withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
                                  attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        throw ProviderError(.notPermitted, "this provider does not keep FIFOs or sockets")
    }

    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        if changes.ownerID != nil || changes.groupID != nil {
            throw ProviderError(.notPermitted, "this provider does not change owners")
        }
        var item = try item(for: identifier)
        if changes.posixPermissions != nil || changes.modificationTime != nil {
            item = try await setAttributes(ofItemWithIdentifier: identifier, posixPermissions: changes.posixPermissions,
                                           contentModificationDate: changes.modificationTime?.date)
        }
        if let accessTime = changes.accessTime {
            item = try await setLastUsedDate(accessTime.date, forItemIdentifier: identifier)
        }
        return item
    }

    /// What the defaults above apply after creating an item the older way.
    private func applyNewItemAttributes(_ attributes: NewItemAttributes, to item: Item) async throws(ProviderError) -> Item {
        var changes = AttributeChanges(modificationTime: attributes.modificationTime, accessTime: attributes.accessTime)
        if attributes.posixPermissions != item.posixPermissions { changes.posixPermissions = attributes.posixPermissions }
        if attributes.ownerID != item.ownerID { changes.ownerID = attributes.ownerID }
        if attributes.groupID != item.groupID { changes.groupID = attributes.groupID }
        if changes.isEmpty { return item }
        return (try? await setAttributes(ofItemWithIdentifier: item.identifier, changes: changes)) ?? item
    }

    /// No stored attributes.
    public func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] { [] }

    public func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        throw ProviderError(.noSuchAttribute, "\(name) is not set")
    }

    /// Refuses: this provider does not store extended attributes (EOPNOTSUPP).
    public func setExtendedAttribute(named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
                                     forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        throw ProviderError(.unsupported, "this provider does not store extended attributes")
    }
}
