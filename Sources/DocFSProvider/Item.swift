import struct Foundation.Date
import struct Foundation.Data
#if canImport(Glibc)
    import Glibc
#endif

/// One item of the provider tree (NSFileProviderItem), as a value.
public struct Item: Hashable, Sendable {
    public var identifier: ItemIdentifier
    public var parentIdentifier: ItemIdentifier
    public var filename: String
    public var kind: ItemKind
    public var contentType: ContentType
    /// Bytes of a file's contents; a package sums its files. Folders report 0.
    public var documentSize: Int64
    /// Number of children of a folder (nil for files).
    public var childItemCount: Int?
    /// Number of child folders, for `st_nlink` (fts relies on it).
    public var childFolderCount: Int
    /// Birth time (`statx` btime); set once.
    public var creationTime: FileTime
    /// Contents changed (`st_mtime`); a folder's when an entry was added, removed or renamed.
    public var modificationTime: FileTime
    /// Last used (`st_atime`); nil reads as the modification time.
    public var accessTime: FileTime?
    /// Contents or metadata changed (`st_ctime`): every change the provider makes moves it.
    public var changeTime: FileTime
    public var tagData: Data?
    public var favoriteRank: Int64?
    public var capabilities: Capabilities
    public var itemVersion: ItemVersion
    public var symlinkTargetPath: String?
    /// POSIX permission bits the user asked for (chmod), set-user-ID, set-group-ID and sticky
    /// included; capabilities mask what `stat` shows.
    public var posixPermissions: UInt16
    /// Owner and group (`st_uid`, `st_gid`).
    public var ownerID: UInt32
    public var groupID: UInt32
    /// A file's contents are on this machine (NSFileProviderItem's `isDownloaded`). False for a
    /// replica's file known only by its metadata: `stat` shows its size and no blocks, and opening
    /// it downloads it.
    public var isDownloaded = true
    /// Names the item has (`st_nlink` of a non-folder): more than 1 only for a provider that
    /// keeps hard links (`HardLinkProvider`). An item seen through one of its names carries that
    /// name as `filename` and `parentIdentifier`, and the same `identifier` under every name.
    public var linkCount = 1
    /// A device node's numbers (`st_rdev`, as `makedev` packs them); 0 for other items.
    public var deviceNumber: UInt64 = 0

    /// The Apple vocabulary's dates, as views of the exact times.
    public var creationDate: Date {
        get { creationTime.date }
        set { creationTime = FileTime(newValue) }
    }
    public var contentModificationDate: Date {
        get { modificationTime.date }
        set { modificationTime = FileTime(newValue) }
    }
    public var lastUsedDate: Date? {
        get { accessTime?.date }
        set { accessTime = newValue.map(FileTime.init) }
    }

    public init(
        identifier: ItemIdentifier, parentIdentifier: ItemIdentifier, filename: String,
        kind: ItemKind, contentType: ContentType, documentSize: Int64 = 0,
        childItemCount: Int? = nil, childFolderCount: Int = 0,
        creationDate: Date, contentModificationDate: Date, lastUsedDate: Date? = nil,
        tagData: Data? = nil, favoriteRank: Int64? = nil, capabilities: Capabilities,
        itemVersion: ItemVersion = ItemVersion(), symlinkTargetPath: String? = nil,
        posixPermissions: UInt16? = nil, ownerID: UInt32? = nil, groupID: UInt32? = nil
    ) {
        self.identifier = identifier
        self.parentIdentifier = parentIdentifier
        self.filename = filename
        self.kind = kind
        self.contentType = contentType
        self.documentSize = documentSize
        self.childItemCount = childItemCount
        self.childFolderCount = childFolderCount
        self.creationTime = FileTime(creationDate)
        self.modificationTime = FileTime(contentModificationDate)
        self.accessTime = lastUsedDate.map(FileTime.init)
        self.changeTime = FileTime(contentModificationDate)
        self.tagData = tagData
        self.favoriteRank = favoriteRank
        self.capabilities = capabilities
        self.itemVersion = itemVersion
        self.symlinkTargetPath = symlinkTargetPath
        self.posixPermissions = posixPermissions ?? (kind == .folder ? 0o755 : (kind == .symlink ? 0o777 : 0o644))
        // Unless the provider says otherwise, items belong to whoever runs it.
        self.ownerID = ownerID ?? getuid()
        self.groupID = groupID ?? getgid()
    }

    /// Records a change of metadata (ctime moves, a new metadata version).
    public mutating func noteMetadataChange(at now: FileTime) {
        itemVersion.metadataVersion += 1
        changeTime = now
    }

    public var isFolder: Bool { kind == .folder }
}
