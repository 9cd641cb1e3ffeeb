import Glibc
import DocFSProvider

/// Linux's rules for who may change owner, group, mode and times, what a new item's owner and
/// group are, and when set-user-ID and set-group-ID go. Pure functions over `Ownership`.
enum OwnershipRules {
    static let setUID = UInt16(S_ISUID)
    static let setGID = UInt16(S_ISGID)
    static let groupExecute = UInt16(S_IXGRP)

    /// A new item made by `caller` in `parent` with the requested mode (umask applied by the
    /// kernel): the caller owns it; its group is the caller's, or the parent's under a
    /// set-group-ID folder, whose new subfolders inherit the bit. A file asking for
    /// set-group-ID with group execute in a group its maker is not in loses it.
    static func newItem(mode requested: UInt16, kind: ItemKind, in parent: Ownership, by caller: Caller) -> NewItemAttributes {
        var mode = requested & 0o7777
        var group = caller.gid
        if parent.mode & setGID != 0 {
            group = parent.group
            if kind == .folder {
                mode |= setGID
            } else if mode & (setGID | groupExecute) == setGID | groupExecute, !caller.isRoot, !caller.isMember(of: group) {
                mode &= ~setGID
            }
        }
        if kind == .symlink { mode = 0o777 }
        return NewItemAttributes(ownerID: caller.uid, groupID: group, posixPermissions: mode)
    }

    /// chmod: the owner or root (EPERM otherwise). Set-group-ID on an item whose group the
    /// caller is not in goes silently, as the kernel does.
    static func chmod(_ item: Ownership, to requested: UInt16, by caller: Caller) throws(ProviderError) -> UInt16 {
        guard caller.isRoot || caller.uid == item.owner else {
            throw ProviderError(.notPermitted, "only the owner (uid \(item.owner)) or root may change the mode")
        }
        var mode = requested & 0o7777
        if mode & setGID != 0, !caller.isRoot, !caller.isMember(of: item.group) { mode &= ~setGID }
        return mode
    }

    /// chown / chgrp: only root gives an item to someone else; the owner may set the group to
    /// one of its own groups (EPERM otherwise). A changed regular file loses set-user-ID, and
    /// set-group-ID when group execute is set (even for root, as Linux does).
    static func chown(_ item: Ownership, owner: UInt32?, group: UInt32?, by caller: Caller) throws(ProviderError) -> AttributeChanges {
        if !caller.isRoot {
            if let owner, owner != item.owner || caller.uid != item.owner {
                throw ProviderError(.notPermitted, "only root may change the owner (uid \(item.owner) to \(owner))")
            }
            if let group {
                guard caller.uid == item.owner else {
                    throw ProviderError(.notPermitted, "only the owner (uid \(item.owner)) or root may change the group")
                }
                guard group == item.group || caller.isMember(of: group) else {
                    throw ProviderError(.notPermitted, "uid \(caller.uid) is not a member of group \(group)")
                }
            }
        }
        var changes = AttributeChanges(ownerID: owner, groupID: group)
        if !item.isDirectory, let cleared = clearingSetID(item.mode, forWriter: nil) { changes.posixPermissions = cleared }
        return changes
    }

    /// utimensat: times given explicitly need the owner or root (EPERM); "now" for both needs
    /// the owner, root or write permission (EACCES); "now" for one with the other omitted needs
    /// nothing, as in the kernel.
    static func setTimes(_ item: Ownership, explicit: Bool, bothNow: Bool, by caller: Caller) throws(ProviderError) {
        if caller.isRoot || caller.uid == item.owner { return }
        if explicit {
            throw ProviderError(.notPermitted, "only the owner (uid \(item.owner)) or root may set times")
        }
        if bothNow {
            try PermissionCheck.require(PermissionCheck.write, on: item, for: caller, "setting times to now")
        }
    }

    /// The mode after contents change (write, truncate) or a chown: set-user-ID goes, and
    /// set-group-ID where group execute is set. A writer holding CAP_FSETID keeps them on a
    /// write (root here; nil `forWriter` is a chown, which clears them for everyone). Nil when
    /// nothing changes.
    static func clearingSetID(_ mode: UInt16, forWriter writer: Caller?) -> UInt16? {
        if let writer, writer.isRoot { return nil }
        var kill = mode & setUID
        if mode & (setGID | groupExecute) == setGID | groupExecute { kill |= setGID }
        return kill == 0 ? nil : mode & ~kill
    }
}
