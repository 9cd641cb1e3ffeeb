import CFuse
import Dispatch
import Synchronization

/// Tells the kernel to drop what it cached, for changes it did not see happen through a request
/// of its own (a refused new version, names gathered into a trashed folder).
///
/// Notifications go out from a queue of their own, after the reply: sent from inside a request,
/// one on the directory the kernel holds locked for that request would deadlock.
final class KernelNotifier: @unchecked Sendable {
    private let queue = DispatchQueue(label: "docfs.kernel-notify", qos: .utility)
    private let lock = Mutex<Void>(())
    private var session: OpaquePointer?

    /// Set once the session exists, before requests are served.
    func attach(_ session: OpaquePointer) { lock.withLock { _ in self.session = session } }

    /// Stops sending and waits for the notification in flight (before the session is destroyed).
    func detach() {
        lock.withLock { _ in session = nil }
        queue.sync {}
    }

    /// The session for the notification queue, read under the lock but used outside it: an
    /// entry invalidation may wait for a folder's lock, and a request thread must not then wait
    /// for this lock to drop attributes (over io_uring that request may be what the folder's
    /// holder waits behind). `detach` waits for the queue, so the session outlives the call.
    private var queuedSession: OpaquePointer? { lock.withLock { _ in session } }

    /// The kernel forgets `name` under `parent` (its dentry, positive or negative).
    func invalidateEntry(parent: UInt64, name: String) {
        queue.async { [self] in
            guard let session = queuedSession else { return }
            _ = fuse_lowlevel_notify_inval_entry(session, parent, name, name.utf8.count)
        }
    }

    /// Runs `body` on the notification queue, after every notification queued before it has been
    /// sent (a reply that must reach the program only once the kernel forgot a name).
    func afterQueued(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }

    /// The same at once, on the calling thread: only after the request that changed the folder
    /// has been answered (until then the kernel holds the folder locked, and this would wait
    /// for it forever).
    func invalidateEntryNow(parent: UInt64, name: String) {
        lock.withLock { _ in
            guard let session else { return }
            _ = fuse_lowlevel_notify_inval_entry(session, parent, name, name.utf8.count)
        }
    }

    /// The kernel drops the cached attributes of `ino`, now: safe inside a request, because
    /// dropping attributes alone takes no lock the request may hold.
    func invalidateAttributesNow(ino: UInt64) {
        lock.withLock { _ in
            guard let session else { return }
            _ = fuse_lowlevel_notify_inval_inode(session, ino, -1, 0)
        }
    }

    /// The kernel drops the cached pages and attributes of `ino`.
    func invalidateContents(ino: UInt64) {
        queue.async { [self] in
            guard let session = queuedSession else { return }
            _ = fuse_lowlevel_notify_inval_inode(session, ino, 0, 0)
        }
    }
}
