#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// A stored file the kernel's passthrough readers hold becomes the live file a writer changes in
// place (the kernel takes the writer onto the readers' backing file, the same inode): the
// version it holds is kept by a clone or copy of its bytes put in its place, `contents/<row>`,
// and the file itself moves to `staging/`, where the bridge's write session owns it.
//
// The copy is made before the store's write transaction, which then only checks that the item
// and its file are still what was copied and swaps names: a large file holds no other writer.
// A stored file is never written in place (a new version is a new file renamed over it, and a
// file made live has left `contents/` for good), so a file still at `contents/<row>` after the
// copy holds the bytes copied. Other items' names of the file (a conflicted copy's, which
// `StoreReplica.forkConflictedCopy` links) take the kept file too, so that no item but this
// one reaches the live file. A replica's upload reading the file by path is told through
// `liveDetaches` and reads the kept file again.
extension LocalStore: LiveContentsProvider {
    package func detachLiveContents(of identifier: ItemIdentifier, device: UInt64, inode: UInt64) throws(ProviderError) -> LiveContents? {
        // The item or its file may change while the copy is made: a few tries, then the caller
        // treats it as refused.
        for _ in 0..<3 {
            switch try detachOnce(identifier, device: device, inode: inode) {
            case .made(let live): return live
            case .refused: return nil
            case .changed: continue
            }
        }
        return nil
    }

    private enum Detach {
        case made(LiveContents)
        case refused
        /// The item or its file changed while the copy was made.
        case changed
    }

    private func detachOnce(_ identifier: ItemIdentifier, device: UInt64, inode: UInt64) throws(ProviderError) -> Detach {
        guard let row = self.row(for: identifier), let record = tree.record(row), record.item.kind == .file,
            record.item.isDownloaded, contents.segments.location(of: row) == nil
        else { return .refused }
        let path = contents.path(row)
        var st = stat()
        // Still the file the readers opened (another replica's version may have replaced it).
        guard stat(path, &st) == 0, UInt64(st.st_dev) == device, UInt64(st.st_ino) == inode else { return .refused }
        let version = record.item.itemVersion.contentVersion
        let tag = "\(row)-\(version)-\(UInt32.random(in: 0...UInt32.max))"
        let kept = contents.stagingPath + "/.kept-" + tag
        guard try Self.cloneOrCopy(path, to: kept, device: device, inode: inode) else { return .changed }
        let outcome: Detach
        do throws(ProviderError) {
            outcome = try swapLive(identifier, row: row, version: version, device: device, inode: inode, kept: kept, tag: tag)
        } catch {
            _ = sysUnlink(kept)
            throw error
        }
        if case .made = outcome { return outcome }
        _ = sysUnlink(kept)
        return outcome
    }

    /// The short transaction: checks that nothing changed since `kept` was copied, then swaps.
    private func swapLive(
        _ identifier: ItemIdentifier, row: Int64, version: UInt64, device: UInt64, inode: UInt64, kept: String, tag: String
    ) throws(ProviderError) -> Detach {
        let path = contents.path(row)
        return try write { (database) throws(ProviderError) -> Detach in
            // Nothing changed meanwhile: the same row, version and file.
            var now = stat()
            guard self.row(for: identifier) == row, let current = tree.record(row), current.item.isDownloaded,
                current.item.itemVersion.contentVersion == version, contents.segments.location(of: row) == nil,
                stat(path, &now) == 0, UInt64(now.st_dev) == device, UInt64(now.st_ino) == inode
            else { return .changed }
            var others: [Int64] = []
            if now.st_nlink > 1 {
                others = try rowsSharing(path, row: row, size: Int64(now.st_size), device: device, inode: inode, database)
                // A name the store cannot account for: the file stays as it is.
                guard others.count + 1 == Int(now.st_nlink) else { return .refused }
            }
            // Before any writer may change the file: an upload reading it reads again.
            liveDetaches.record(device: device, inode: inode)
            // The other items' names take the kept file (same bytes) first.
            try give(kept, to: others, tag: tag)
            let live = contents.stagingPath + "/.live-" + tag
            // The live file's name in staging first, then the kept bytes over `contents/<row>`: a
            // crash in between leaves the stored file as it was and a link the next open removes.
            guard sysLink(path, live) else { throw .posix(errno, "link \(path) into staging") }
            do throws(ProviderError) {
                try sysRename(kept, path, "keep version \(version) of \(current.item.filename)")
            } catch {
                _ = sysUnlink(live)
                throw error
            }
            // The kept file is new: the next synchronize() makes it durable.
            tree.update { $0.dirty.insert(row) }
            logger.debug("\(current.item.filename): version \(version) kept; its stored file is live")
            return .made(LiveContents(path: live, item: current.item))
        }
    }

    /// Gives each of `others` (rows naming the file being made live) the kept file `kept` (the
    /// same bytes) under its own name, before any writer may change the live one.
    func give(_ kept: String, to others: [Int64], tag: String) throws(ProviderError) {
        for other in others {
            let share = contents.stagingPath + "/.share-\(other)-" + tag
            guard sysLink(kept, share) else { throw .posix(errno, "link the kept version of item \(other)") }
            do throws(ProviderError) {
                try sysRename(share, contents.path(other), "give item \(other) the kept version")
            } catch {
                _ = sysUnlink(share)
                throw error
            }
            tree.update { $0.dirty.insert(other) }
        }
    }

    /// The other rows whose content file is `path`'s (`device`/`inode`, `size` bytes): a
    /// conflicted copy's, linked when it was made. Rows whose item has that size, checked by
    /// their file (rare: only a file with more than one name comes here).
    func rowsSharing(
        _ path: String, row: Int64, size: Int64, device: UInt64, inode: UInt64, _ database: DatabaseQueue
    ) throws(ProviderError) -> [Int64] {
        try flushJournal(database)
        let candidates: [Int64]
        do {
            candidates = try database.inDatabase { db in
                try Int64.fetchAll(db, sql: "SELECT id FROM item WHERE size = ? AND id != ?", arguments: [size, row])
            }
        } catch {
            throw ProviderError(.ioError, "find the other names of \(path): \(error)")
        }
        return candidates.filter { other in
            var st = stat()
            return stat(contents.path(other), &st) == 0 && UInt64(st.st_dev) == device && UInt64(st.st_ino) == inode
        }
    }

    /// `source`'s bytes as a new file `target`, with `source`'s modification time: a clone
    /// (FICLONE, btrfs and xfs: no bytes copied) where the filesystem offers one, else a copy
    /// (copy_file_range). False (nothing made) when `source` is no longer `device`/`inode`.
    private static func cloneOrCopy(_ source: String, to target: String, device: UInt64, inode: UInt64) throws(ProviderError) -> Bool {
        let input = sysOpen(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            if errno == ENOENT { return false }
            throw .posix(errno, "open \(source) to keep it")
        }
        defer { sysClose(input) }
        var st = stat()
        guard fstat(input, &st) == 0, UInt64(st.st_dev) == device, UInt64(st.st_ino) == inode else { return false }
        try cloneOrCopy(input, to: target, what: source)
        return true
    }

    /// `input`'s bytes (from its start) as a new file `target`, with its modification time.
    static func cloneOrCopy(_ input: Int32, to target: String, what: String) throws(ProviderError) {
        var st = stat()
        guard fstat(input, &st) == 0 else { throw .posix(errno, "stat \(what) to keep it") }
        let output = sysOpen(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .posix(errno, "create \(target)") }
        defer { sysClose(output) }
        // FICLONE: _IOW(0x94, 9, int).
        if ioctl(output, 0x4004_9409, input) != 0 {
            do throws(ProviderError) {
                _ = try FileDescriptors.copyAll(from: input, to: output, what: "keep \(what)")
            } catch {
                _ = sysUnlink(target)
                throw error
            }
        }
        // UTIME_OMIT ((1 << 30) - 2): the access time stays.
        var stamps = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), st.st_mtim]
        _ = futimens(output, &stamps)
    }
}
