import CFuse
import Glibc
import DocFSProvider

extension Bridge {
    /// access(2), `test -w` and friends. Without default_permissions the kernel asks us, and even
    /// root gets the provider's answer: writable only where writing (files) or adding (folders) is
    /// allowed, readable only where reading or listing is.
    func access(_ reply: consuming Reply, _ ino: UInt64, _ mask: Int32) {
        guard inodes.identifier(ino) != nil else {
            reply.error(inodes.node(ino) == nil ? ENOENT : 0)  // a file being copied in: its writer's
            return
        }
        do throws(Failure) {
            let item = try self.item(ino)
            let perm = Attributes.permissions(of: item)
            if mask & W_OK != 0, perm & 0o222 == 0, item.kind != .symlink { reply.error(EACCES); return }
            if mask & R_OK != 0, perm & 0o444 == 0, item.kind != .symlink { reply.error(EACCES); return }
            if mask & X_OK != 0, perm & 0o111 == 0, item.kind == .file { reply.error(EACCES); return }
            reply.ok()
        } catch {
            reply.error(report("access", error))
        }
    }
}
