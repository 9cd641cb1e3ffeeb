import CFuse
import Glibc
import DocFSProvider

extension Bridge {
    /// access(2), `test -w` and friends: the mode bits for this caller (root passes them as on
    /// ext4), then the capabilities, which bind root too: writable only where writing (files) or
    /// adding (folders) is allowed, readable only where reading or listing is. The same rules
    /// decide the operations themselves, so the answer agrees with what they then do.
    /// With `default_permissions` (the default where other users reach the mount) the kernel
    /// answers access(2) itself from the mode bits, which show the capabilities for every caller
    /// but root (docs/PERMISSIONS.md); a mount only root reaches answers root the same here.
    func access(_ reply: consuming Reply, _ ino: UInt64, _ mask: Int32) {
        do throws(RequestError) {
            let caller = Caller(reply.req)
            let owned = try permissionSubject(of: ino)
            let item = owned.item
            var want: UInt16 = 0
            if mask & R_OK != 0 { want |= PermissionCheck.read }
            if mask & W_OK != 0 { want |= PermissionCheck.write }
            if mask & X_OK != 0 { want |= PermissionCheck.execute }
            guard item?.kind != .symlink else { reply.ok(); return }
            guard PermissionCheck.allows(want, on: owned, for: caller) else { reply.error(EACCES); return }
            // A mount only root reaches asks here only because it goes without the kernel's
            // check (`ProviderMount`): root gets that check's answer, the mode bits'.
            if caller.isRoot, !options.otherUsers { reply.ok(); return }
            if let item {
                // The capabilities, which mode bits cannot override (what `ls -l` masks away).
                let caps = item.capabilities
                let folder = item.kind == .folder
                if mask & W_OK != 0, !caps.contains(folder ? .allowsAddingSubItems : .allowsWriting), !item.kind.isSpecial {
                    reply.error(EACCES); return
                }
                if mask & R_OK != 0, !caps.contains(folder ? .allowsContentEnumerating : .allowsReading), !item.kind.isSpecial {
                    reply.error(EACCES); return
                }
            }
            reply.ok()
        } catch {
            reply.error(report("access", error))
        }
    }
}
