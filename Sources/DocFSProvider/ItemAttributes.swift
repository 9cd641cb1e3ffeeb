/// The attributes a new item starts with: who made it and what it asked for, as the bridge
/// knows them when a program creates a file, folder, link, FIFO or socket (the fields of the
/// item template that NSFileProviderReplicatedExtension's createItem receives).
public struct NewItemAttributes: Hashable, Sendable {
    public var ownerID: UInt32
    public var groupID: UInt32
    /// Permission bits with set-user-ID, set-group-ID and sticky (the caller's umask applied).
    public var posixPermissions: UInt16
    /// Set when the program gave times before the item reached the provider (a copy that
    /// preserves times); nil means now.
    public var modificationTime: FileTime?
    public var accessTime: FileTime?

    public init(ownerID: UInt32, groupID: UInt32, posixPermissions: UInt16,
                modificationTime: FileTime? = nil, accessTime: FileTime? = nil) {
        self.ownerID = ownerID
        self.groupID = groupID
        self.posixPermissions = posixPermissions & 0o7777
        self.modificationTime = modificationTime
        self.accessTime = accessTime
    }
}

/// A change of attributes (chmod, chown, chgrp, utimensat): nil fields stay as they are. The
/// bridge has checked who may make it (Linux's rules, `OwnershipRules`); the provider stores it
/// and moves the change time.
public struct AttributeChanges: Hashable, Sendable {
    public var posixPermissions: UInt16?
    public var ownerID: UInt32?
    public var groupID: UInt32?
    public var modificationTime: FileTime?
    public var accessTime: FileTime?

    public init(posixPermissions: UInt16? = nil, ownerID: UInt32? = nil, groupID: UInt32? = nil,
                modificationTime: FileTime? = nil, accessTime: FileTime? = nil) {
        self.posixPermissions = posixPermissions.map { $0 & 0o7777 }
        self.ownerID = ownerID
        self.groupID = groupID
        self.modificationTime = modificationTime
        self.accessTime = accessTime
    }

    public var isEmpty: Bool {
        posixPermissions == nil && ownerID == nil && groupID == nil && modificationTime == nil && accessTime == nil
    }

    /// Applies the change to an item value (what a provider stores).
    public func apply(to item: inout Item) {
        if let posixPermissions { item.posixPermissions = posixPermissions }
        if let ownerID { item.ownerID = ownerID }
        if let groupID { item.groupID = groupID }
        if let modificationTime { item.modificationTime = modificationTime }
        if let accessTime { item.accessTime = accessTime }
    }
}
