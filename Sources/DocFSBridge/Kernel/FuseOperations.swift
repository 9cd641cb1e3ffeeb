import CFuse
import Glibc

/// The `fuse_lowlevel_ops` table. Each entry is a closure that captures nothing (so it is a C
/// function pointer) and finds the Bridge through the session's userdata.
enum FuseOperations {
    @inline(__always)
    static func bridge(_ req: fuse_req_t?) -> Bridge {
        Unmanaged<Bridge>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    }

    /// Runs one request's handler; with `-o metrics`, counts it and its time (RequestStats).
    @inline(__always)
    static func timed(_ req: fuse_req_t?, _ op: FuseOp, _ body: () -> Void) {
        guard let stats = bridge(req).stats else { return body() }
        let start = RequestStats.now()
        body()
        stats.record(op, since: start)
    }

    /// F_SETPIPE_SZ (Linux; declared only under _GNU_SOURCE).
    static let setPipeSize: Int32 = 1031

    /// Whether this process may have a pipe of `bytes`.
    static func pipeHolds(_ bytes: Int) -> Bool {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return false }
        defer { close(fds[0]); close(fds[1]) }
        return fcntl(fds[0], setPipeSize, Int32(bytes)) >= Int32(bytes)
    }

    static func make(xattrs: Bool = true) -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            guard let conn, let userdata else { return }
            let bridge = Unmanaged<Bridge>.fromOpaque(userdata).takeUnretainedValue()
            let options = bridge.options
            // Large requests, the kernel's readdirplus, and room for more requests in flight
            // (readahead and writeback are asynchronous).
            conn.pointee.max_write = 1 << 20
            conn.pointee.max_readahead = 1 << 20
            conn.pointee.max_background = 64
            conn.pointee.congestion_threshold = 48
            conn.pointee.want |= UInt32(FUSE_CAP_READDIRPLUS) & conn.pointee.capable
            conn.pointee.want |= UInt32(FUSE_CAP_READDIRPLUS_AUTO) & conn.pointee.capable
            if options.writeback {
                conn.pointee.want |= UInt32(FUSE_CAP_WRITEBACK_CACHE) & conn.pointee.capable
            }
            // `-o splice`: libfuse splices each request from /dev/fuse into a pipe, and write_buf
            // splices a write's bytes on into the staged file, never through the daemon's memory
            // (capable only with the custom I/O's splice_receive, InitNegotiation). Every other
            // request then costs a splice and a read of the pipe instead of one read, so it is
            // off unless asked for (libfuse would turn it on for any write_buf). libfuse splices
            // only when the pipe holds a whole request (max_write plus 4 KiB); the pipe-max-size
            // of 1 MiB stops a daemon without CAP_SYS_RESOURCE short of that, so then requests
            // stay a page under 1 MiB.
            let splice = UInt32(FUSE_CAP_SPLICE_READ)
            if options.splice, conn.pointee.capable & splice != 0 {
                conn.pointee.want |= splice
                if !FuseOperations.pipeHolds(Int(conn.pointee.max_write) + 4096) { conn.pointee.max_write -= 4096 }
            } else {
                conn.pointee.want &= ~splice
            }
            bridge.log.debug("INIT: max_write \(conn.pointee.max_write), splice of requests \(conn.pointee.want & splice != 0 ? "on" : "off")")
        }
        ops.lookup = { req, parent, name in
            FuseOperations.timed(req, .lookup) {
                FuseOperations.bridge(req).lookup(Reply(req!), parent, name!)
            }
        }
        ops.forget = { req, ino, n in
            FuseOperations.timed(req, .forget) {
                FuseOperations.bridge(req).forget(ino, n)
                fuse_reply_none(req)
            }
        }
        ops.forget_multi = { req, count, forgets in
            FuseOperations.timed(req, .forget) {
                let b = FuseOperations.bridge(req)
                if let forgets {
                    for i in 0..<count { b.forget(forgets[i].ino, forgets[i].nlookup) }
                }
                fuse_reply_none(req)
            }
        }
        ops.getattr = { req, ino, _ in
            FuseOperations.timed(req, .getattr) {
                FuseOperations.bridge(req).getattr(Reply(req!), ino)
            }
        }
        ops.setattr = { req, ino, attr, toSet, fi in
            FuseOperations.timed(req, .setattr) {
                let b = FuseOperations.bridge(req)
                guard let attr else { Reply(req!).error(EINVAL); return }
                b.setattr(Reply(req!), ino, attr.pointee, toSet, Bridge.handle(fi))
            }
        }
        ops.readlink = { req, ino in
            FuseOperations.timed(req, .readlink) {
                FuseOperations.bridge(req).readlink(Reply(req!), ino)
            }
        }
        ops.mknod = { req, parent, name, mode, rdev in
            FuseOperations.timed(req, .mknod) {
                FuseOperations.bridge(req).mknod(Reply(req!), parent, name!, mode, rdev: UInt64(rdev))
            }
        }
        ops.mkdir = { req, parent, name, mode in
            FuseOperations.timed(req, .mkdir) {
                FuseOperations.bridge(req).mkdir(Reply(req!), parent, name!, mode)
            }
        }
        ops.unlink = { req, parent, name in
            FuseOperations.timed(req, .unlink) {
                FuseOperations.bridge(req).unlink(Reply(req!), parent, name!, folder: false)
            }
        }
        ops.rmdir = { req, parent, name in
            FuseOperations.timed(req, .rmdir) {
                FuseOperations.bridge(req).unlink(Reply(req!), parent, name!, folder: true)
            }
        }
        ops.symlink = { req, target, parent, name in
            FuseOperations.timed(req, .symlink) {
                FuseOperations.bridge(req).symlink(Reply(req!), target!, parent, name!)
            }
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            FuseOperations.timed(req, .rename) {
                FuseOperations.bridge(req).rename(Reply(req!), parent, name!, newParent, newName!, flags)
            }
        }
        ops.link = { req, ino, newParent, newName in
            FuseOperations.timed(req, .link) {
                FuseOperations.bridge(req).link(Reply(req!), ino, newParent, newName!)
            }
        }
        ops.open = { req, ino, fi in
            FuseOperations.timed(req, .open) {
                FuseOperations.bridge(req).open(Reply(req!), ino, fi!)
            }
        }
        ops.read = { req, _, size, off, fi in
            FuseOperations.timed(req, .read) {
                guard let file = Bridge.handle(fi) else { Reply(req!).error(EBADF); return }
                FuseOperations.bridge(req).read(Reply(req!), size, Int(off), file)
            }
        }
        // write_buf, not write: libfuse hands over its buffer as it is, memory or (spliced) a pipe.
        ops.write_buf = { req, _, bufv, off, fi in
            FuseOperations.timed(req, .write) {
                guard let file = Bridge.handle(fi), let bufv else { Reply(req!).error(EBADF); return }
                FuseOperations.bridge(req).write(Reply(req!), bufv, Int(off), file)
            }
        }
        ops.flush = { req, _, fi in
            FuseOperations.timed(req, .flush) {
                guard let file = Bridge.handle(fi) else { Reply(req!).ok(); return }
                FuseOperations.bridge(req).flush(Reply(req!), file)
            }
        }
        ops.release = { req, _, fi in
            FuseOperations.timed(req, .release) {
                FuseOperations.bridge(req).release(Reply(req!), fi!)
            }
        }
        ops.fsync = { req, _, _, fi in
            FuseOperations.timed(req, .fsync) {
                guard let file = Bridge.handle(fi) else { Reply(req!).ok(); return }
                FuseOperations.bridge(req).fsync(Reply(req!), file)
            }
        }
        ops.opendir = { req, ino, fi in
            FuseOperations.timed(req, .opendir) {
                FuseOperations.bridge(req).opendir(Reply(req!), ino, fi!)
            }
        }
        ops.readdir = { req, _, size, off, fi in
            FuseOperations.timed(req, .readdir) {
                guard let snap = Bridge.snapshot(fi) else { Reply(req!).error(EBADF); return }
                FuseOperations.bridge(req).readdir(Reply(req!), req!, size, Int(off), snap, plus: false)
            }
        }
        ops.readdirplus = { req, _, size, off, fi in
            FuseOperations.timed(req, .readdirplus) {
                guard let snap = Bridge.snapshot(fi) else { Reply(req!).error(EBADF); return }
                FuseOperations.bridge(req).readdir(Reply(req!), req!, size, Int(off), snap, plus: true)
            }
        }
        ops.releasedir = { req, _, fi in
            FuseOperations.timed(req, .releasedir) {
                FuseOperations.bridge(req).releasedir(Reply(req!), fi!)
            }
        }
        ops.fsyncdir = { req, ino, _, _ in
            FuseOperations.timed(req, .fsyncdir) {
                FuseOperations.bridge(req).fsyncdir(Reply(req!), ino)
            }
        }
        ops.statfs = { req, _ in
            FuseOperations.timed(req, .statfs) {
                FuseOperations.bridge(req).statfs(Reply(req!))
            }
        }
        ops.getxattr = { req, ino, name, size in
            FuseOperations.timed(req, .getxattr) {
                FuseOperations.bridge(req).getxattr(Reply(req!), ino, name!, size)
            }
        }
        ops.listxattr = { req, ino, size in
            FuseOperations.timed(req, .listxattr) {
                FuseOperations.bridge(req).listxattr(Reply(req!), ino, size)
            }
        }
        ops.setxattr = { req, ino, name, value, size, flags in
            FuseOperations.timed(req, .setxattr) {
                FuseOperations.bridge(req).setxattr(
                    Reply(req!), ino, name!, UnsafeRawBufferPointer(start: value, count: size), remove: false, flags: flags)
            }
        }
        ops.removexattr = { req, ino, name in
            FuseOperations.timed(req, .removexattr) {
                FuseOperations.bridge(req).setxattr(Reply(req!), ino, name!, UnsafeRawBufferPointer(start: nil, count: 0), remove: true, flags: 0)
            }
        }
        ops.access = { req, ino, mask in
            FuseOperations.timed(req, .access) {
                FuseOperations.bridge(req).access(Reply(req!), ino, mask)
            }
        }
        ops.create = { req, parent, name, mode, fi in
            FuseOperations.timed(req, .create) {
                FuseOperations.bridge(req).create(Reply(req!), parent, name!, mode, fi!)
            }
        }
        if !xattrs {
            // Unset: libfuse answers ENOSYS, after which the kernel no longer sends these at all.
            ops.getxattr = nil
            ops.listxattr = nil
            ops.setxattr = nil
            ops.removexattr = nil
        }
        return ops
    }
}
