#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Logging

/// Removes content files that no item owns any more (deleted or replaced items, old versions),
/// after the action has answered.
///
/// Freeing a file's blocks is the slow part of a delete (ext4 with `discard` issues a discard per
/// extent), and nothing waits on it: the row is already gone, so the file is an orphan that the
/// next open removes if the daemon dies first. `drain()` finishes the work on a clean close.
final class ContentReaper: @unchecked Sendable {
    private let queue = DispatchQueue(label: "docfs.store.reaper", qos: .utility)
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func remove(_ path: String, _ what: @escaping @Sendable () -> String) {
        queue.async { [logger] in
            let err = sysUnlink(path)
            if err != 0 && err != ENOENT {
                logger.warning("store: could not remove \(what()): \(String(cString: strerror(err)))")
            }
        }
    }

    /// Waits until every removal asked for so far is done.
    func drain() { queue.sync {} }
}
