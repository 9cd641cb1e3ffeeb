import Synchronization
/// Keeps the number of inodes the kernel holds (and so the inode table's size) near a limit.
///
/// The kernel keeps every name and inode it looked up until memory pressure makes it let go, and
/// the bridge keeps a node for each (`InodeTable`): a `find` or `ls -lR` over a million items left
/// a million nodes in the daemon on a machine with memory to spare. Here the names whose lookup
/// made a new node are remembered in order; when the table passes `limit`, the oldest of them are
/// invalidated in the kernel (`KernelNotifier.invalidateEntry`, from its queue, after the reply),
/// which then forgets the inodes nobody uses, and the nodes go with the FORGET. An invalidated
/// name costs one lookup more the next time it is used; an inode still in use (an open file, a
/// process's working folder) keeps its number.
final class KernelEntryLimit: @unchecked Sendable {
    let limit: Int
    private let lock = Mutex<Void>(())
    private var parents: [UInt64] = []
    private var names: [String] = []
    private var head = 0

    init(limit: Int) { self.limit = max(limit, 1024) }

    /// A lookup made a new node for `name` in `parent`; the table now holds `count` nodes.
    /// Returns the names to invalidate (the oldest, down to 90% of the limit).
    func noteNew(parent: UInt64, name: String, count: Int) -> [(parent: UInt64, name: String)] {
        lock.withLock { _ in
            parents.append(parent)
            names.append(name)
            var out: [(parent: UInt64, name: String)] = []
            if count > limit {
                let wanted = count - limit + limit / 10
                while out.count < wanted, head < parents.count {
                    out.append((parents[head], names[head]))
                    head += 1
                }
            }
            // Names already forgotten by the kernel pile up here too: keep at most twice the limit.
            let live = parents.count - head
            if live > 2 * limit { head += live - 2 * limit }
            if head > 4096, head * 2 > parents.count {
                parents.removeFirst(head)
                names.removeFirst(head)
                head = 0
            }
            return out
        }
    }
}
