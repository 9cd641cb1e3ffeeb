import struct Foundation.Date
import struct Foundation.Data

/// What kind of node an item is in the tree.
public enum ItemKind: UInt8, Sendable, Hashable {
    case file = 0
    case folder = 1
    case symlink = 2
}

/// Versions that change when an item's contents or metadata change (NSFileProviderItemVersion).
public struct ItemVersion: Hashable, Sendable {
    public var contentVersion: UInt64
    public var metadataVersion: UInt64
    public init(contentVersion: UInt64 = 1, metadataVersion: UInt64 = 1) {
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
    }
}

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
    public var creationDate: Date
    public var contentModificationDate: Date
    public var lastUsedDate: Date?
    public var tagData: Data?
    public var favoriteRank: Int64?
    public var capabilities: Capabilities
    public var itemVersion: ItemVersion
    public var symlinkTargetPath: String?
    /// POSIX permission bits the user asked for (chmod); capabilities mask them.
    public var posixPermissions: UInt16

    public init(
        identifier: ItemIdentifier, parentIdentifier: ItemIdentifier, filename: String,
        kind: ItemKind, contentType: ContentType, documentSize: Int64 = 0,
        childItemCount: Int? = nil, childFolderCount: Int = 0,
        creationDate: Date, contentModificationDate: Date, lastUsedDate: Date? = nil,
        tagData: Data? = nil, favoriteRank: Int64? = nil, capabilities: Capabilities,
        itemVersion: ItemVersion = ItemVersion(), symlinkTargetPath: String? = nil,
        posixPermissions: UInt16? = nil
    ) {
        self.identifier = identifier
        self.parentIdentifier = parentIdentifier
        self.filename = filename
        self.kind = kind
        self.contentType = contentType
        self.documentSize = documentSize
        self.childItemCount = childItemCount
        self.childFolderCount = childFolderCount
        self.creationDate = creationDate
        self.contentModificationDate = contentModificationDate
        self.lastUsedDate = lastUsedDate
        self.tagData = tagData
        self.favoriteRank = favoriteRank
        self.capabilities = capabilities
        self.itemVersion = itemVersion
        self.symlinkTargetPath = symlinkTargetPath
        self.posixPermissions = posixPermissions ?? (kind == .folder ? 0o755 : (kind == .symlink ? 0o777 : 0o644))
    }

    public var isFolder: Bool { kind == .folder }
}
