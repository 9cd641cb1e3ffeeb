#if canImport(Glibc)
    import Glibc
#endif
import Dispatch
import Logging
import Synchronization

/// Removes content files that no item owns any more (deleted or replaced items, old versions),
/// after the action has answered.
///
/// Freeing a file's blocks is the slow part of a delete (ext4 with `discard` issues a discard per
/// extent), and nothing waits on it: the row is already gone, so the file is an orphan that the
/// next open removes if the daemon dies first. The worker takes everything asked for while it
/// was busy in one go, so a burst of deletes wakes it once rather than once per file. It starts
/// at once: a full disk gets its space back right after `rm`, as on a local filesystem.
/// `drain()` finishes the work on a clean close.
final class ContentReaper: @unchecked Sendable {
    private struct Pending {
        var paths: [(path: String, what: @Sendable () -> String)] = []
        var scheduled = false
    }

    private let queue = DispatchQueue(label: "docfs.store.reaper", qos: .utility)
    private let pending = Mutex(Pending())
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func remove(_ path: String, _ what: @escaping @Sendable () -> String) {
        let schedule = pending.withLock { p -> Bool in
            p.paths.append((path, what))
            defer { p.scheduled = true }
            return !p.scheduled
        }
        if schedule { queue.async { [self] in removeGathered() } }
    }

    private func removeGathered() {
        let batch = pending.withLock { p -> [(path: String, what: @Sendable () -> String)] in
            defer { p.paths.removeAll(); p.scheduled = false }
            return p.paths
        }
        for (path, what) in batch {
            let err = sysUnlink(path)
            if err != 0 && err != ENOENT {
                logger.warning("store: could not remove \(what()): \(String(cString: strerror(err)))")
            }
        }
    }

    /// Runs `work` on the reaper's queue, after the removals asked for so far (`drain` waits for it).
    func perform(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Does every removal asked for so far, now.
    func drain() {
        queue.sync { removeGathered() }
    }
}
