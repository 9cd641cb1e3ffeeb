import struct Foundation.Data

/// The attributes a new item starts with: who made it and what it asked for, as the bridge
/// knows them when a program creates a file, folder, link, FIFO or socket (the fields of the
/// item template that NSFileProviderReplicatedExtension's createItem receives).
///
/// The provider's actions that make items take it as an optional: nil means the caller gives
/// none (`docfs import --store`, the plain forms such as `createDirectory(withName:inParentItemIdentifier:)`),
/// and the provider uses its defaults — the user running it owns the item, a folder gets 0755, an
/// imported file keeps its own mode and times.
public struct NewItemAttributes: Hashable, Sendable {
    /// The owner (`st_uid`): the caller's uid.
    public var ownerID: UInt32
    /// The group (`st_gid`): the caller's gid, or the folder's under a set-group-ID folder.
    public var groupID: UInt32
    /// Permission bits with set-user-ID, set-group-ID and sticky (the caller's umask applied).
    public var posixPermissions: UInt16
    /// Set when the program gave times before the item reached the provider (a copy that
    /// preserves times); nil means now.
    public var modificationTime: FileTime?
    /// The access time the program set before the item reached the provider; nil means now.
    public var accessTime: FileTime?
    /// When the item's name appeared in its folder (the program's create, before its bytes
    /// were written): the folder's modification and change times move to it, as on a local
    /// filesystem, not to when the provider received the item. nil means now.
    public var entryTime: FileTime?
    /// The item's change time so far (a copied-in file's last write or attribute change, which
    /// equals its last write's modification time, as on ext4). nil means now.
    public var changeTime: FileTime?
    /// A device node's numbers (`mknod`'s `dev`); 0 for other items.
    public var deviceNumber: UInt64 = 0

    public init(
        ownerID: UInt32, groupID: UInt32, posixPermissions: UInt16,
        modificationTime: FileTime? = nil, accessTime: FileTime? = nil,
        entryTime: FileTime? = nil, changeTime: FileTime? = nil
    ) {
        self.ownerID = ownerID
        self.groupID = groupID
        self.posixPermissions = posixPermissions & 0o7777
        self.modificationTime = modificationTime
        self.accessTime = accessTime
        self.entryTime = entryTime
        self.changeTime = changeTime
    }
}

/// A change of attributes: nil fields stay as they are. The one shape of it: the bridge's chmod,
/// chown, chgrp and utimensat (checked against Linux's rules, `OwnershipRules`; the provider
/// stores it and moves the change time), and a replica's, as its outbox records it and its server
/// client sends it (`uid`, `mode` and nanoseconds are only their keys), which may also carry the
/// birth time, the tags and the favourite rank (`setTagData`, `setFavoriteRank`).
public struct AttributeChanges: Hashable, Sendable {
    /// New permission bits, set-ID and sticky included (chmod).
    public var posixPermissions: UInt16?
    /// New owner (chown).
    public var ownerID: UInt32?
    /// New group (chown, chgrp).
    public var groupID: UInt32?
    /// New modification time (utimensat, `touch -m`).
    public var modificationTime: FileTime?
    /// New access time (utimensat, `touch -a`).
    public var accessTime: FileTime?
    /// New birth time (a replica's; never the bridge's).
    public var creationTime: FileTime?
    /// New tags; `.some(nil)` removes them (a replica's; the bridge's go through `setTagData`).
    public var tagData: Data??
    /// New favourite rank; `.some(nil)` removes it (a replica's; the bridge's go through `setFavoriteRank`).
    public var favoriteRank: Int64??

    public init(
        posixPermissions: UInt16? = nil, ownerID: UInt32? = nil, groupID: UInt32? = nil,
        modificationTime: FileTime? = nil, accessTime: FileTime? = nil, creationTime: FileTime? = nil,
        tagData: Data?? = nil, favoriteRank: Int64?? = nil
    ) {
        self.posixPermissions = posixPermissions.map { $0 & 0o7777 }
        self.ownerID = ownerID
        self.groupID = groupID
        self.modificationTime = modificationTime
        self.accessTime = accessTime
        self.creationTime = creationTime
        self.tagData = tagData
        self.favoriteRank = favoriteRank
    }

    /// True when nothing changes.
    public var isEmpty: Bool {
        posixPermissions == nil && ownerID == nil && groupID == nil && modificationTime == nil && accessTime == nil
            && creationTime == nil && tagData == nil && favoriteRank == nil
    }

    /// Applies the change to an item value (what a provider stores).
    public func apply(to item: inout Item) {
        if let posixPermissions { item.posixPermissions = posixPermissions }
        if let ownerID { item.ownerID = ownerID }
        if let groupID { item.groupID = groupID }
        if let modificationTime { item.modificationTime = modificationTime }
        if let accessTime { item.accessTime = accessTime }
        if let creationTime { item.creationTime = creationTime }
        if let tagData { item.tagData = tagData }
        if let favoriteRank { item.favoriteRank = favoriteRank }
    }
}
