import Glibc
import DocFSProvider

/// What the mode-bit rules read of an item: its owner, group and permission bits, and whether
/// it is a folder. A stored `Item` and a file still being copied in (`CopyIn`, whose owner and
/// mode live in its write session until the import) both answer it; the rules are generic over
/// it, so the lookup and getattr paths check an `Item` without copying or boxing it.
protocol PermissionSubject {
    var ownerID: UInt32 { get }
    var groupID: UInt32 { get }
    /// Permission bits with set-user-ID, set-group-ID and sticky, and nothing above them.
    var permissionBits: UInt16 { get }
    var isFolder: Bool { get }
}

extension PermissionSubject {
    /// Search allowed for everyone: the kernel may cache names below such a folder, since no
    /// caller's walk through it can be refused.
    var searchableByAll: Bool { !isFolder || permissionBits & 0o111 == 0o111 }
}

extension Item: PermissionSubject {
    var permissionBits: UInt16 { posixPermissions & 0o7777 }
}

/// What the rules check for an inode: its stored item, or the file still being copied in.
enum NodeSubject: PermissionSubject {
    case stored(Item)
    case copyingIn(CopyIn)

    var item: Item? {
        if case .stored(let item) = self { return item }
        return nil
    }
    var ownerID: UInt32 {
        switch self {
        case .stored(let item): item.ownerID
        case .copyingIn(let copyIn): copyIn.ownerID
        }
    }
    var groupID: UInt32 {
        switch self {
        case .stored(let item): item.groupID
        case .copyingIn(let copyIn): copyIn.groupID
        }
    }
    var permissionBits: UInt16 {
        switch self {
        case .stored(let item): item.permissionBits
        case .copyingIn(let copyIn): copyIn.permissionBits
        }
    }
    var isFolder: Bool {
        switch self {
        case .stored(let item): item.isFolder
        case .copyingIn: false
        }
    }
}

/// ext4's answers to "may this caller read, write or search this item" (the kernel's
/// generic_permission) and to the sticky-folder rule. Pure functions, tested without a mount.
/// Capabilities are checked separately (CapabilityCheck) and bind root as well.
enum PermissionCheck {
    static let read: UInt16 = 4
    static let write: UInt16 = 2
    static let execute: UInt16 = 1

    /// Whether `caller` has every bit of `want` (read/write/execute as 4/2/1) on the item.
    /// Owner bits for the owner, group bits for a member of the item's group, other bits for the
    /// rest; root passes except for executing a file that no one may execute.
    static func allows(_ want: UInt16, on item: some PermissionSubject, for caller: Caller) -> Bool {
        if caller.isRoot {
            if want & execute != 0, !item.isFolder, item.permissionBits & 0o111 == 0 { return false }
            return true
        }
        let bits: UInt16
        if caller.uid == item.ownerID {
            bits = item.permissionBits >> 6
        } else if (item.permissionBits >> 3) & want & 7 == item.permissionBits & want & 7 {
            // Group and other bits agree on what is asked: membership does not matter, and the
            // supplementary groups (a read of /proc) are not needed.
            bits = item.permissionBits
        } else if caller.isMember(of: item.groupID) {
            bits = item.permissionBits >> 3
        } else {
            bits = item.permissionBits
        }
        return bits & want & 7 == want & 7
    }

    /// The same as an error: EACCES, with the rule for the log line.
    static func require(_ want: UInt16, on item: some PermissionSubject, for caller: Caller, _ what: @autoclosure () -> String) throws(ProviderError)
    {
        guard allows(want, on: item, for: caller) else {
            throw ProviderError(
                .accessDenied,
                "\(what()): permission denied by mode \(String(item.permissionBits, radix: 8)) (owner \(item.ownerID), group \(item.groupID)) for uid \(caller.uid)"
            )
        }
    }

    /// Adding to or removing from a folder needs write and search on it.
    static func requireChange(in folder: some PermissionSubject, for caller: Caller) throws(ProviderError) {
        try require(write | execute, on: folder, for: caller, "changing entries of the folder")
    }

    /// `user.*` extended attributes, as the kernel's xattr_permission: only regular files and
    /// folders have them (others: EPERM to set, ENODATA to read); a sticky folder's may be set
    /// only by its owner or root (EPERM); then read or write permission (EACCES).
    static func requireUserAttribute(write writing: Bool, on item: some PermissionSubject, kind: ItemKind, for caller: Caller) throws(ProviderError) {
        guard kind == .file || kind == .folder else {
            if writing { throw ProviderError(.notPermitted, "user.* attributes exist only on files and folders") }
            throw ProviderError(.noSuchAttribute, "user.* attributes exist only on files and folders")
        }
        if writing, kind == .folder, item.permissionBits & UInt16(S_ISVTX) != 0, !caller.isRoot, caller.uid != item.ownerID {
            throw ProviderError(.notPermitted, "the folder is sticky: only its owner may change its attributes")
        }
        try require(writing ? write : read, on: item, for: caller, writing ? "changing extended attributes" : "reading extended attributes")
    }

    /// In a sticky folder (mode +t), only the owner of the item or of the folder (or root) may
    /// remove or rename the item: EPERM.
    static func requireStickyOwner(item: some PermissionSubject, folder: some PermissionSubject, for caller: Caller) throws(ProviderError) {
        guard folder.permissionBits & UInt16(S_ISVTX) != 0, !caller.isRoot, caller.uid != item.ownerID, caller.uid != folder.ownerID else { return }
        throw ProviderError(
            .notPermitted,
            "the folder is sticky (mode \(String(folder.permissionBits, radix: 8))): only the owner of the item or of the folder may remove or rename it"
        )
    }
}
