import CFuse
import Glibc
import DocFSProvider

// Mode bits and owners, checked in the bridge for every request it gets, after the kernel's own
// check (`default_permissions`, BridgeOptions.kernelChecksPermissions): the kernel refuses most
// callers the mode bits refuse before asking, and alone sees FIFO opens and socket connects.
extension Bridge {
    /// What the mode-bit rules see of a node: its item when it is stored (`.item`), or its copy-in.
    func permissionSubject(of ino: UInt64) throws(RequestError) -> NodeSubject {
        if inodes.identifier(ino) != nil { return .stored(try self.item(ino)) }
        guard let node = inodes.node(ino), let copyIn = inodes.copyIn(of: node) else {
            throw RequestError(ProviderError(.noSuchItem), .ino(ino))
        }
        return .copyingIn(copyIn)
    }

    /// Search (execute) permission on a folder, for a lookup in it: EACCES.
    @inline(__always)
    func requireSearch(_ folder: Item, _ caller: Caller) throws(RequestError) {
        if caller.isRoot { return }
        try attempt(.item(folder.identifier)) { () throws(ProviderError) in
            try PermissionCheck.require(PermissionCheck.execute, on: folder, for: caller, "searching the folder")
        }
    }

    /// A folder that some caller may no longer search: the kernel drops the names it cached
    /// below it, so the next walk through it asks (and is checked) again. Only without
    /// `default_permissions` (see `cachesNames(below:)`): with it the kernel checks each walk.
    /// Call only after the request that changed the folder was answered (see KernelNotifier).
    /// Over io_uring they go out from the notifier's queue instead: `inval_entry` waits for the
    /// folder's lock, which a lookup or create in it may hold while it waits, unserved, behind a
    /// queue's thread (a chmod loop beside creates hung so when this thread was that queue's).
    func forgetNamesBelow(_ folder: Item, ino: UInt64) {
        guard let children = try? provider.enumerateItems(in: folder.identifier) else { return }
        if ring != nil {
            for child in children { notifier.invalidateEntry(parent: ino, name: child.filename) }
            return
        }
        for child in children { notifier.invalidateEntryNow(parent: ino, name: child.filename) }
    }
}
