import DocFSProvider
import Synchronization

/// A FUSE inode: what the kernel holds a number for.
///
/// The number never changes while the kernel remembers it, even when the provider later swaps the
/// item's identifier (a temporary one for a permanent one) or the item is still being copied in
/// and has no identifier yet.
package final class InodeNode: @unchecked Sendable {
    let ino: UInt64
    // Guarded by the InodeTable's lock.
    fileprivate(set) var identifier: ItemIdentifier?
    fileprivate var lookups: UInt64 = 0
    fileprivate var opens: Int = 0
    /// Set while a new file is being copied in and not yet imported (guarded by the table's lock).
    fileprivate(set) var copyIn: CopyIn?
    /// The item as it was when it was deleted or replaced while the kernel still held this inode
    /// (an unlinked but open file): what getattr answers until the last handle closes.
    fileprivate(set) var orphaned: Item? {
        get { orphanedBox?.item }
        set { orphanedBox = newValue.map(OrphanedItem.init) }
    }
    /// Boxed: an `Item?` inline took ~250 of the node's ~350 bytes, for every inode the kernel
    /// holds (a million after a `find` over a big tree), to serve the rare unlinked open file.
    private var orphanedBox: OrphanedItem?

    /// Guards `session`; never held together with the table's lock. Taken in scopes (`withLock`),
    /// never across an await: a commit claims the session under it (`committed`, `beginCommit`)
    /// and lets go before the provider acts.
    let sessionLock = Mutex<Void>(())
    /// Staged contents while the file is open for writing (or new).
    var session: WriteSession?

    init(ino: UInt64, identifier: ItemIdentifier?) {
        self.ino = ino
        self.identifier = identifier
    }
}

private final class OrphanedItem: Sendable {
    let item: Item
    init(_ item: Item) { self.item = item }
}

/// Maps kernel inode numbers to provider identifiers, with the kernel's lookup counts.
///
/// Inode numbers are handed out once per mount and never reused, so the generation is constant.
/// A node lives while the kernel remembers it (lookups > 0) or a file handle holds it open.
package final class InodeTable: @unchecked Sendable {
    static let rootIno: UInt64 = 1
    static let generation: UInt64 = 1

    fileprivate let lock = Mutex<Void>(())
    private var byIno: [UInt64: InodeNode] = [:]
    private var byIdentifier: [ItemIdentifier: InodeNode] = [:]
    /// New files not yet imported, by parent inode and name, so lookups and listings see them.
    private var pendingByParent: [UInt64: [String: InodeNode]] = [:]
    private var nextIno: UInt64 = 2

    package init() {
        let root = InodeNode(ino: Self.rootIno, identifier: .rootContainer)
        root.lookups = 1
        byIno[Self.rootIno] = root
        byIdentifier[.rootContainer] = root
    }

    var count: Int { lock.withLock { _ in byIno.count } }

    @inline(__always) func node(_ ino: UInt64) -> InodeNode? {
        lock.withLock { _ in byIno[ino] }
    }

    /// The identifier behind an inode, or nil (unknown inode, or a file still being copied in).
    @inline(__always) package func identifier(_ ino: UInt64) -> ItemIdentifier? {
        lock.withLock { _ in byIno[ino]?.identifier }
    }

    /// The copy-in state of a node not yet imported, if it is one.
    func copyIn(of node: InodeNode) -> CopyIn? {
        lock.withLock { _ in node.copyIn }
    }

    /// The copy-in state of an inode not yet imported, if it is one.
    func copyIn(_ ino: UInt64) -> (InodeNode, CopyIn)? {
        lock.withLock { _ in
            guard let n = byIno[ino], let c = n.copyIn else { return nil }
            return (n, c)
        }
    }

    /// Changes a copy-in's attributes (chmod, chown, utimensat, setxattr before the import);
    /// nil when the node is not (or no longer) being copied in.
    func updateCopyIn<T>(_ node: InodeNode, _ body: (inout CopyIn) throws(ProviderError) -> T) throws(ProviderError) -> T? {
        let result: Result<T, ProviderError>? = lock.withLock { _ in
            guard node.copyIn != nil else { return nil }
            do throws(ProviderError) { return .success(try body(&node.copyIn!)) } catch { return .failure(error) }
        }
        return try result?.get()
    }

    /// The node for an item the kernel is being told about; counts one lookup.
    package func remember(_ identifier: ItemIdentifier) -> InodeNode {
        lock.withLock { _ in
            if let n = byIdentifier[identifier] {
                n.lookups += 1
                return n
            }
            let n = InodeNode(ino: nextIno, identifier: identifier)
            nextIno += 1
            n.lookups = 1
            byIno[n.ino] = n
            byIdentifier[identifier] = n
            return n
        }
    }

    /// The kernel dropped `count` references.
    /// `remember`, saying whether the node is new and how many nodes the table holds.
    func rememberCounting(_ identifier: ItemIdentifier) -> (node: InodeNode, created: Bool, count: Int) {
        lock.withLock { _ in
            if let n = byIdentifier[identifier] {
                n.lookups += 1
                return (n, false, byIno.count)
            }
            let n = InodeNode(ino: nextIno, identifier: identifier)
            nextIno += 1
            n.lookups = 1
            byIno[n.ino] = n
            byIdentifier[identifier] = n
            return (n, true, byIno.count)
        }
    }

    package func forget(_ ino: UInt64, _ count: UInt64) {
        guard ino != Self.rootIno else { return }
        lock.withLock { _ in
            guard let n = byIno[ino] else { return }
            n.lookups = n.lookups > count ? n.lookups - count : 0
            dropIfUnused(n)
        }
    }

    func retainOpen(_ node: InodeNode) { lock.withLock { _ in node.opens += 1 } }

    /// A handle closed; returns true when it was the last one.
    @discardableResult
    func releaseOpen(_ node: InodeNode) -> Bool {
        lock.withLock { _ in
            node.opens -= 1
            let last = node.opens == 0
            dropIfUnused(node)
            return last
        }
    }

    private func dropIfUnused(_ n: InodeNode) {
        guard n.lookups == 0, n.opens == 0 else { return }
        byIno[n.ino] = nil
        if let id = n.identifier, byIdentifier[id] === n { byIdentifier[id] = nil }
        if let p = n.copyIn?.placement { unindex(p) }
    }

    private func unindex(_ p: CopyIn.Placement) {
        pendingByParent[p.parent]?[p.name] = nil
        if pendingByParent[p.parent]?.isEmpty == true { pendingByParent[p.parent] = nil }
    }

    // MARK: New files being copied in

    /// A new file at its placement, visible at once; counts one lookup (for the create reply).
    func addCopyIn(_ copyIn: CopyIn) -> InodeNode {
        lock.withLock { _ in
            let n = InodeNode(ino: nextIno, identifier: nil)
            nextIno += 1
            n.lookups = 1
            n.copyIn = copyIn
            byIno[n.ino] = n
            if let p = copyIn.placement { pendingByParent[p.parent, default: [:]][p.name] = n }
            return n
        }
    }

    func pendingChild(parent: UInt64, name: String) -> InodeNode? {
        lock.withLock { _ in pendingByParent[parent]?[name] }
    }

    /// Looks up a pending child and counts one kernel lookup on it.
    func rememberPendingChild(parent: UInt64, name: String) -> InodeNode? {
        lock.withLock { _ in
            guard let n = pendingByParent[parent]?[name] else { return nil }
            n.lookups += 1
            return n
        }
    }

    func pendingChildren(of parent: UInt64) -> [(name: String, node: InodeNode)] {
        lock.withLock { _ in (pendingByParent[parent] ?? [:]).map { ($0.key, $0.value) } }
    }

    /// rename of a file still being copied in: it will land under the new name.
    func movePending(_ node: InodeNode, toParent parent: UInt64, name: String) {
        lock.withLock { _ in
            guard let p = node.copyIn?.placement else { return }
            unindex(p)
            node.copyIn!.placement = CopyIn.Placement(parent: parent, name: name)
            pendingByParent[parent, default: [:]][name] = node
        }
    }

    /// The import landed: the node now stands for `identifier`. Returns its copy-in state as it
    /// was at that moment (the attributes set until then are stored next).
    @discardableResult
    func bind(_ node: InodeNode, to identifier: ItemIdentifier) -> CopyIn? {
        lock.withLock { _ in
            let copyIn = node.copyIn
            if let p = copyIn?.placement { unindex(p) }
            node.copyIn = nil
            if let old = node.identifier, byIdentifier[old] === node { byIdentifier[old] = nil }
            node.identifier = identifier
            byIdentifier[identifier] = node
            return copyIn
        }
    }

    /// The import was refused or the new file was unlinked: it leaves the tree. Open handles
    /// keep its staged bytes and attributes; a later flush or release imports nothing.
    func dropPending(_ node: InodeNode) {
        lock.withLock { _ in
            guard let p = node.copyIn?.placement else { return }
            unindex(p)
            node.copyIn!.placement = nil
        }
    }

    /// The item was deleted or replaced: a later item with the same identifier gets a fresh node.
    func detach(_ identifier: ItemIdentifier) {
        lock.withLock { _ in byIdentifier[identifier] = nil }
    }

    /// The item was deleted or replaced: its inode, if the kernel holds one, lives on as an
    /// orphan (like an unlinked inode on a local filesystem) until it is forgotten.
    func orphan(_ item: Item) {
        lock.withLock { _ in
            byIdentifier[item.identifier]?.orphaned = item
            byIdentifier[item.identifier] = nil
        }
    }

    func orphanedItem(_ node: InodeNode) -> Item? { lock.withLock { _ in node.orphaned } }

    /// The provider swapped an identifier (temporary → permanent); the inode stays the same.
    func replaceIdentifier(_ old: ItemIdentifier, with new: ItemIdentifier) {
        lock.withLock { _ in
            guard let n = byIdentifier[old] else { return }
            byIdentifier[old] = nil
            n.identifier = new
            byIdentifier[new] = n
        }
    }
}

extension InodeTable {
    func openCount(_ node: InodeNode) -> Int { lock.withLock { _ in node.opens } }
}

extension InodeTable {
    func retainLookup(_ node: InodeNode) { lock.withLock { _ in node.lookups += 1 } }

    /// The inode number the kernel knows an item by, or a stable stand-in for a plain readdir
    /// (which counts no lookup); never 0, which some tools take for a deleted entry.
    func knownIno(_ identifier: ItemIdentifier) -> UInt64 {
        lock.withLock { _ in byIdentifier[identifier]?.ino } ?? (UInt64(truncatingIfNeeded: identifier.hashValue) | (1 << 63))
    }
}

extension InodeTable {
    /// The node of an item the kernel knows, without counting a lookup.
    func knownNode(_ identifier: ItemIdentifier) -> InodeNode? { lock.withLock { _ in byIdentifier[identifier] } }
}

extension InodeTable {
    /// The node and its identifier in one look (getattr's path).
    @inline(__always)
    func nodeAndIdentifier(_ ino: UInt64) -> (InodeNode, ItemIdentifier?)? {
        lock.withLock { _ in byIno[ino].map { ($0, $0.identifier) } }
    }
}
