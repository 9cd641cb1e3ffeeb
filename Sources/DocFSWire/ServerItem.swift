import Foundation
import DocFSProvider

/// An item as the server has it, the one shape for it on the replica's side: read from the
/// server's table (`RemoteDatabase.items`; `uid`, `mode`, `*_ns` are its column names), checked
/// (`ServerRowChecks`), applied to a replica's tree (`IncomingApply`) and taken by a new replica
/// (`ReplicaStore.addServerItem`). Fields are named as the provider's `Item`'s. A replica keeps
/// the server's identifiers as its rows; the items it applies have the root's children in row 1.
package struct ServerItem: Sendable, Equatable {
    package var id: Int64
    /// The folder it is in (nil: the root); for a trashed item, the folder it was trashed from.
    package var parentID: Int64?
    package var name: String
    /// A file, folder or symbolic link: the server keeps no other kind (its column holds
    /// `ItemKind.storedName`).
    package var kind: ItemKind
    package var size: Int64
    package var creationTime: FileTime
    package var modificationTime: FileTime
    package var changeTime: FileTime
    package var accessTime: FileTime
    package var ownerID: UInt32
    package var groupID: UInt32
    /// Permission bits, set-ID and sticky included (07777); the kind is separate.
    package var posixPermissions: UInt16
    /// The tags as the provider keeps them (the server's words, `ServerTags`).
    package var tagData: Data?
    package var favoriteRank: Int64?
    package var symlinkTargetPath: String?
    /// The content object or manifest; nil for a file without contents (empty).
    package var contentKey: String?
    package var contentVersion: Int64
    package var metadataVersion: Int64
    /// When it went into the trash; nil: not in the trash.
    package var trashTime: FileTime?
    package var deleted: Bool
    /// A name row's item (a further name of that file, `RemoteSchema+Links`); nil for an item.
    package var linkOf: Int64?

    package init(
        id: Int64, parentID: Int64?, name: String, kind: ItemKind, size: Int64 = 0,
        creationTime: FileTime = FileTime(seconds: 0), modificationTime: FileTime = FileTime(seconds: 0),
        changeTime: FileTime = FileTime(seconds: 0), accessTime: FileTime = FileTime(seconds: 0),
        ownerID: UInt32 = 0, groupID: UInt32 = 0, posixPermissions: UInt16 = 0o644, tagData: Data? = nil,
        favoriteRank: Int64? = nil, symlinkTargetPath: String? = nil, contentKey: String? = nil,
        contentVersion: Int64 = 1, metadataVersion: Int64 = 1, trashTime: FileTime? = nil, deleted: Bool = false,
        linkOf: Int64? = nil
    ) {
        self.id = id
        self.parentID = parentID
        self.name = name
        self.kind = kind
        self.size = size
        self.creationTime = creationTime
        self.modificationTime = modificationTime
        self.changeTime = changeTime
        self.accessTime = accessTime
        self.ownerID = ownerID
        self.groupID = groupID
        self.posixPermissions = posixPermissions
        self.tagData = tagData
        self.favoriteRank = favoriteRank
        self.symlinkTargetPath = symlinkTargetPath
        self.contentKey = contentKey
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
        self.trashTime = trashTime
        self.deleted = deleted
        self.linkOf = linkOf
    }

    /// In the trash (the server keeps the folder it came from as its parent).
    package var trashed: Bool { trashTime != nil }
}
