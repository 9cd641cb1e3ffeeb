import Glibc
import DocFSProvider

/// What the mode-bit rules need to know about an item: a stored item, or a file still being
/// copied in (whose owner and mode live in its write session until the import).
struct Ownership: Equatable {
    var owner: UInt32
    var group: UInt32
    /// Permission bits with set-user-ID, set-group-ID and sticky.
    var mode: UInt16
    var isDirectory: Bool

    init(owner: UInt32, group: UInt32, mode: UInt16, isDirectory: Bool) {
        self.owner = owner
        self.group = group
        self.mode = mode & 0o7777
        self.isDirectory = isDirectory
    }

    init(_ item: Item) {
        self.init(owner: item.ownerID, group: item.groupID, mode: item.posixPermissions, isDirectory: item.isFolder)
    }

    /// Search allowed for everyone: the kernel may cache names below such a folder, since no
    /// caller's walk through it can be refused.
    var searchableByAll: Bool { !isDirectory || mode & 0o111 == 0o111 }
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
    static func allows(_ want: UInt16, on item: Ownership, for caller: Caller) -> Bool {
        if caller.isRoot {
            if want & execute != 0, !item.isDirectory, item.mode & 0o111 == 0 { return false }
            return true
        }
        let bits: UInt16
        if caller.uid == item.owner {
            bits = item.mode >> 6
        } else if (item.mode >> 3) & want & 7 == item.mode & want & 7 {
            // Group and other bits agree on what is asked: membership does not matter, and the
            // supplementary groups (a read of /proc) are not needed.
            bits = item.mode
        } else if caller.isMember(of: item.group) {
            bits = item.mode >> 3
        } else {
            bits = item.mode
        }
        return bits & want & 7 == want & 7
    }

    /// The same as an error: EACCES, with the rule for the log line.
    static func require(_ want: UInt16, on item: Ownership, for caller: Caller, _ what: @autoclosure () -> String) throws(ProviderError) {
        guard allows(want, on: item, for: caller) else {
            throw ProviderError(.accessDenied, "\(what()): permission denied by mode \(String(item.mode, radix: 8)) (owner \(item.owner), group \(item.group)) for uid \(caller.uid)")
        }
    }

    /// Adding to or removing from a folder needs write and search on it.
    static func requireChange(in folder: Ownership, for caller: Caller) throws(ProviderError) {
        try require(write | execute, on: folder, for: caller, "changing entries of the folder")
    }

    /// `user.*` extended attributes, as the kernel's xattr_permission: only regular files and
    /// folders have them (others: EPERM to set, ENODATA to read); a sticky folder's may be set
    /// only by its owner or root (EPERM); then read or write permission (EACCES).
    static func requireUserAttribute(write writing: Bool, on item: Ownership, kind: ItemKind, for caller: Caller) throws(ProviderError) {
        guard kind == .file || kind == .folder else {
            if writing { throw ProviderError(.notPermitted, "user.* attributes exist only on files and folders") }
            throw ProviderError(.noSuchAttribute, "user.* attributes exist only on files and folders")
        }
        if writing, kind == .folder, item.mode & UInt16(S_ISVTX) != 0, !caller.isRoot, caller.uid != item.owner {
            throw ProviderError(.notPermitted, "the folder is sticky: only its owner may change its attributes")
        }
        try require(writing ? write : read, on: item, for: caller, writing ? "changing extended attributes" : "reading extended attributes")
    }

    /// In a sticky folder (mode +t), only the owner of the item or of the folder (or root) may
    /// remove or rename the item: EPERM.
    static func requireStickyOwner(item: Ownership, folder: Ownership, for caller: Caller) throws(ProviderError) {
        guard folder.mode & UInt16(S_ISVTX) != 0, !caller.isRoot, caller.uid != item.owner, caller.uid != folder.owner else { return }
        throw ProviderError(.notPermitted, "the folder is sticky (mode \(String(folder.mode, radix: 8))): only the owner of the item or of the folder may remove or rename it")
    }
}
