import Dispatch
import Glibc
import DocFSProvider
import Synchronization

/// Reads ahead the contents of a folder's small files when one of them is opened for reading.
///
/// Why: a program that reads one file of a folder usually goes on to its neighbours (diff -r,
/// grep -r, a build, a backup), and with a cold page cache each of those reads waits for the disk.
/// `posix_fadvise(WILLNEED)` starts those reads in the background, so the READs that follow find
/// the contents in memory. The opening request only looks up one table entry; the work runs on a
/// queue of its own, at most once per folder in `window` seconds, and stops at `maxFiles` files
/// or `maxBytes` bytes (files larger than `maxFileBytes` are left to the kernel's own readahead).
final class SiblingPrefetch: @unchecked Sendable {
    private let children: @Sendable (ItemIdentifier) -> [Item]
    private let openContents: @Sendable (ItemIdentifier) -> Int32?
    /// A small file kept inside a larger one (`StoredSliceProvider`): its range there is read ahead.
    private let openSlice: (@Sendable (ItemIdentifier) -> StoredSlice?)?
    private let queue = DispatchQueue(label: "docfs.prefetch", qos: .utility)
    private let lock = Mutex<Void>(())
    /// Folders prefetched lately, with when (CLOCK_MONOTONIC_COARSE, seconds).
    private var recent: [ItemIdentifier: Int] = [:]
    private let window = 30
    private let maxFiles = 256
    private let maxBytes: Int64 = 16 << 20
    private let maxFileBytes: Int64 = 1 << 20

    /// `storedSlices`: the provider's opt-in, as the bridge cast it once.
    convenience init(provider: any Provider, storedSlices: (any StoredSliceProvider)?) {
        var openSlice: (@Sendable (ItemIdentifier) -> StoredSlice?)?
        if let slices = storedSlices {
            openSlice = { id in
                do { return try slices.openStoredSlice(of: id) } catch { return nil }
            }
        }
        self.init(
            children: { (try? provider.enumerateItems(in: $0)) ?? [] },
            openContents: { try? provider.openContents(of: $0) },
            openSlice: openSlice)
    }

    init(
        children: @escaping @Sendable (ItemIdentifier) -> [Item], openContents: @escaping @Sendable (ItemIdentifier) -> Int32?,
        openSlice: (@Sendable (ItemIdentifier) -> StoredSlice?)? = nil
    ) {
        self.children = children
        self.openContents = openContents
        self.openSlice = openSlice
    }

    /// `item` (a file) was opened for reading. True when its folder's read-ahead was started.
    @discardableResult @inline(__always)
    func opened(_ item: Item, now: Int? = nil) -> Bool {
        let folder = item.parentIdentifier
        let now = now ?? Self.seconds()
        let due: Bool = lock.withLock { _ in
            if let last = recent[folder], now - last < window { return false }
            if recent.count >= 4096 { recent.removeAll(keepingCapacity: true) }
            recent[folder] = now
            return true
        }
        guard due else { return false }
        queue.async { [self] in
            for child in plan(children(folder), skipping: item.identifier) {
                if let slice = openSlice?(child.identifier) {
                    _ = posix_fadvise(slice.fd, off_t(slice.offset), off_t(slice.length), POSIX_FADV_WILLNEED)
                    close(slice.fd)
                    continue
                }
                guard let fd = openContents(child.identifier) else { continue }
                _ = posix_fadvise(fd, 0, off_t(child.documentSize), POSIX_FADV_WILLNEED)
                close(fd)
            }
        }
        return true
    }

    /// The siblings to read ahead, in the folder's order, within the limits.
    func plan(_ children: [Item], skipping opened: ItemIdentifier) -> [Item] {
        var chosen: [Item] = []
        var bytes: Int64 = 0
        // Files not downloaded are left alone: reading ahead must not start downloads.
        for child in children
        where child.kind == .file && child.isDownloaded && child.identifier != opened
            && child.documentSize > 0 && child.documentSize <= maxFileBytes
        {
            guard chosen.count < maxFiles, bytes + child.documentSize <= maxBytes else { break }
            chosen.append(child)
            bytes += child.documentSize
        }
        return chosen
    }

    /// Waits for read-ahead already started (tests).
    func settle() { queue.sync {} }

    private static func seconds() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        return now.tv_sec
    }
}
