import Glibc
import DocFSProvider

/// Linux's rules for who may change owner, group, mode and times, what a new item's owner and
/// group are, and when set-user-ID and set-group-ID go. Pure functions over a `PermissionSubject`.
enum OwnershipRules {
    static let setUID = UInt16(S_ISUID)
    static let setGID = UInt16(S_ISGID)
    static let groupExecute = UInt16(S_IXGRP)

    /// A new item made by `caller` in `parent` with the requested mode (umask applied by the
    /// kernel): the caller owns it; its group is the caller's, or the parent's under a
    /// set-group-ID folder, whose new subfolders inherit the bit. A file asking for
    /// set-group-ID with group execute in a group its maker is not in loses it.
    static func newItem(mode requested: UInt16, kind: ItemKind, in parent: some PermissionSubject, by caller: Caller) -> NewItemAttributes {
        var mode = requested & 0o7777
        var group = caller.gid
        if parent.permissionBits & setGID != 0 {
            group = parent.groupID
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
    static func chmod(_ item: some PermissionSubject, to requested: UInt16, by caller: Caller) throws(ProviderError) -> UInt16 {
        guard caller.isRoot || caller.uid == item.ownerID else {
            throw ProviderError(.notPermitted, "only the owner (uid \(item.ownerID)) or root may change the mode")
        }
        var mode = requested & 0o7777
        if mode & setGID != 0, !caller.isRoot, !caller.isMember(of: item.groupID) { mode &= ~setGID }
        return mode
    }

    /// chown / chgrp: only root gives an item to someone else; the owner may set the group to
    /// one of its own groups (EPERM otherwise). A chowned file (not a folder) loses set-user-ID,
    /// even by root, and set-group-ID as `setIDAfterChown` says. `chown(path, -1, -1)` is both
    /// nils: nothing but those bits and the change time move, and a non-owner may not cause
    /// that clearing (EPERM, a change of mode). The kernel sends it as an empty setattr, exactly
    /// as it sends the clearing before a non-owner's write, which must not be refused:
    /// `beforeWrite` says which the caller thinks it is.
    static func chown(
        _ item: some PermissionSubject, owner: UInt32?, group: UInt32?, by caller: Caller,
        beforeWrite: Bool = false
    ) throws(ProviderError) -> AttributeChanges {
        if !caller.isRoot {
            if let owner, owner != item.ownerID || caller.uid != item.ownerID {
                throw ProviderError(.notPermitted, "only root may change the owner (uid \(item.ownerID) to \(owner))")
            }
            if let group {
                guard caller.uid == item.ownerID else {
                    throw ProviderError(.notPermitted, "only the owner (uid \(item.ownerID)) or root may change the group")
                }
                guard group == item.groupID || caller.isMember(of: group) else {
                    throw ProviderError(.notPermitted, "uid \(caller.uid) is not a member of group \(group)")
                }
            }
        }
        var changes = AttributeChanges(ownerID: owner, groupID: group)
        if let cleared = setIDAfterChown(item, by: caller) {
            if owner == nil, group == nil, !beforeWrite, !caller.isRoot, caller.uid != item.ownerID {
                throw ProviderError(
                    .notPermitted, "clearing set-user/group-ID is a change of mode, which only the owner (uid \(item.ownerID)) or root may make")
            }
            changes.posixPermissions = cleared
        }
        return changes
    }

    /// What a chown leaves of a file's mode (the kernel's chown_common and notify_change):
    /// set-user-ID always goes; set-group-ID goes with group execute, or when the caller is
    /// neither in the file's group nor root. Folders keep both. Nil when nothing changes.
    static func setIDAfterChown(_ item: some PermissionSubject, by caller: Caller) -> UInt16? {
        guard !item.isFolder else { return nil }
        var kill = item.permissionBits & setUID
        if dropsSetGroupID(item, for: caller) { kill |= setGID }
        return kill == 0 ? nil : item.permissionBits & ~kill
    }

    /// The kernel's setattr_should_drop_sgid.
    private static func dropsSetGroupID(_ item: some PermissionSubject, for caller: Caller) -> Bool {
        guard item.permissionBits & setGID != 0 else { return false }
        if item.permissionBits & groupExecute != 0 { return true }
        return !caller.isRoot && !caller.isMember(of: item.groupID)
    }

    /// utimensat: times given explicitly need the owner or root (EPERM); "now" for both needs
    /// the owner, root or write permission (EACCES); "now" for one with the other omitted needs
    /// nothing, as in the kernel.
    static func setTimes(_ item: some PermissionSubject, explicit: Bool, bothNow: Bool, by caller: Caller) throws(ProviderError) {
        if caller.isRoot || caller.uid == item.ownerID { return }
        if explicit {
            throw ProviderError(.notPermitted, "only the owner (uid \(item.ownerID)) or root may set times")
        }
        if bothNow {
            try PermissionCheck.require(PermissionCheck.write, on: item, for: caller, "setting times to now")
        }
    }

    /// The mode after contents change (write, truncate, O_TRUNC): set-user-ID goes, and
    /// set-group-ID where group execute is set or the writer is not in the file's group (the
    /// kernel's setattr_should_drop_suidgid). A writer holding CAP_FSETID (root here) keeps them.
    /// Nil when nothing changes.
    static func clearingSetID(_ item: some PermissionSubject, forWriter writer: Caller) -> UInt16? {
        if writer.isRoot || item.isFolder { return nil }
        var kill = item.permissionBits & setUID
        if dropsSetGroupID(item, for: writer) { kill |= setGID }
        return kill == 0 ? nil : item.permissionBits & ~kill
    }
}
