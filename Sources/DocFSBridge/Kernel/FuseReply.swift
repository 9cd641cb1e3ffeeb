import CFuse
import Glibc
import Synchronization

/// The C reply calls, in one place. Every FUSE request gets exactly one of these.
enum FuseReplyCall {
    @inline(__always) static func error(_ req: fuse_req_t, _ err: Int32) { _ = fuse_reply_err(req, err) }
    @inline(__always) static func entry(_ req: fuse_req_t, _ e: inout fuse_entry_param) { _ = fuse_reply_entry(req, &e) }
    @inline(__always) static func attr(_ req: fuse_req_t, _ st: inout stat, _ timeout: Double) { _ = fuse_reply_attr(req, &st, timeout) }
    @inline(__always) static func create(_ req: fuse_req_t, _ e: inout fuse_entry_param, _ fi: UnsafePointer<fuse_file_info>) {
        _ = fuse_reply_create(req, &e, fi)
    }
}

/// A request's reply on the thread that received it. It is noncopyable and consumed by
/// answering, so a second reply does not compile; one dropped without an answer replies EIO
/// from its deinit (as fuser does), so the kernel never waits forever.
struct Reply: ~Copyable {
    let req: fuse_req_t
    init(_ req: fuse_req_t) { self.req = req }

    deinit { FuseReplyCall.error(req, EIO) }

    consuming func error(_ err: Int32) { FuseReplyCall.error(req, err); discard self }
    consuming func ok() { FuseReplyCall.error(req, 0); discard self }
    consuming func none() { fuse_reply_none(req); discard self }
    consuming func entry(_ e: inout fuse_entry_param) { FuseReplyCall.entry(req, &e); discard self }
    consuming func attr(_ st: inout stat, timeout: Double) { FuseReplyCall.attr(req, &st, timeout); discard self }
    consuming func create(_ e: inout fuse_entry_param, _ fi: UnsafePointer<fuse_file_info>) {
        FuseReplyCall.create(req, &e, fi); discard self
    }
    consuming func open(_ fi: UnsafePointer<fuse_file_info>) { _ = fuse_reply_open(req, fi); discard self }
    consuming func buffer(_ p: UnsafeRawPointer?, _ count: Int) {
        _ = fuse_reply_buf(req, p?.assumingMemoryBound(to: CChar.self), count); discard self
    }
    consuming func written(_ count: Int) { _ = fuse_reply_write(req, count); discard self }
    consuming func readlink(_ target: String) { _ = fuse_reply_readlink(req, target); discard self }
    consuming func statfs(_ st: inout statvfs) { _ = fuse_reply_statfs(req, &st); discard self }
    consuming func xattrSize(_ n: Int) { _ = fuse_reply_xattr(req, n); discard self }

    /// Hands the request to another thread (an async provider action).
    consuming func deferred() -> DeferredReply {
        let d = DeferredReply(req)
        discard self
        return d
    }
}

/// A reply sent later from another thread. Exactly-once is kept at run time: a second answer is
/// ignored, and an object dropped without an answer replies EIO.
final class DeferredReply: @unchecked Sendable {
    private var req: fuse_req_t?
    private let lock = Mutex<Void>(())

    init(_ req: fuse_req_t) { self.req = req }
    deinit { if let req { FuseReplyCall.error(req, EIO) } }

    private func take() -> fuse_req_t? {
        lock.withLock { _ in
            let r = req; req = nil; return r
        }
    }
    func error(_ err: Int32) { if let r = take() { FuseReplyCall.error(r, err) } }
    func ok() { error(0) }
    func entry(_ e: inout fuse_entry_param) { if let r = take() { FuseReplyCall.entry(r, &e) } }
    func attr(_ st: inout stat, timeout: Double) { if let r = take() { FuseReplyCall.attr(r, &st, timeout) } }
    func written(_ count: Int) { if let r = take() { _ = fuse_reply_write(r, count) } }
    func open(_ fi: inout fuse_file_info) { if let r = take() { _ = fuse_reply_open(r, &fi) } }
    func create(_ e: inout fuse_entry_param, _ fi: UnsafePointer<fuse_file_info>) {
        if let r = take() { FuseReplyCall.create(r, &e, fi) }
    }
}
