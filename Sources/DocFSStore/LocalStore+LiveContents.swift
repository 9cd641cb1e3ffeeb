#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider

// A stored file the kernel's passthrough readers hold becomes the live file a writer changes in
// place (the kernel takes the writer onto the readers' backing file, the same inode): the
// version it holds is kept by a clone or copy of its bytes put in its place, `contents/<row>`,
// and the file itself moves to `staging/`, where the bridge's write session owns it.
extension LocalStore: LiveContentsProvider {
    package func detachLiveContents(of identifier: ItemIdentifier, device: UInt64, inode: UInt64) throws(ProviderError) -> LiveContents? {
        try write { (database) throws(ProviderError) -> LiveContents? in
            guard let row = self.row(for: identifier), let record = tree.record(row), record.item.kind == .file,
                record.item.isDownloaded, contents.segments.location(of: row) == nil
            else { return nil }
            // A version a replica has not sent yet: its upload reads `contents/<row>` by path and
            // may have it open already; a writer's bytes must not land in that version.
            if let replica, try replica.pendingRows(database).contains(row) { return nil }
            let path = contents.path(row)
            var st = stat()
            // Still the file the readers opened, and no other item's (a conflicted copy's link).
            guard stat(path, &st) == 0, UInt64(st.st_dev) == device, UInt64(st.st_ino) == inode, st.st_nlink == 1
            else { return nil }
            let version = record.item.itemVersion.contentVersion
            let kept = contents.stagingPath + "/.kept-\(row)-\(version)"
            let live = contents.stagingPath + "/.live-\(row)-\(version)-\(UInt32.random(in: 0...UInt32.max))"
            _ = sysUnlink(kept)
            try Self.cloneOrCopy(path, to: kept, times: st)
            // The live file's name in staging first, then the kept bytes over `contents/<row>`: a
            // crash in between leaves the stored file as it was and a link the next open removes.
            guard sysLink(path, live) else {
                let e = errno
                _ = sysUnlink(kept)
                throw .posix(e, "link \(path) into staging")
            }
            do throws(ProviderError) {
                try sysRename(kept, path, "keep version \(version) of \(record.item.filename)")
            } catch {
                _ = sysUnlink(live)
                _ = sysUnlink(kept)
                throw error
            }
            // The kept file is new: the next synchronize() makes it durable.
            tree.update { $0.dirty.insert(row) }
            logger.debug("\(record.item.filename): version \(version) kept; its stored file is live")
            return LiveContents(path: live, item: record.item)
        }
    }

    /// `source`'s bytes as a new file `target`, with `source`'s modification time: a clone
    /// (FICLONE, btrfs and xfs: no bytes copied) where the filesystem offers one, else a copy
    /// (copy_file_range).
    private static func cloneOrCopy(_ source: String, to target: String, times st: stat) throws(ProviderError) {
        let input = sysOpen(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .posix(errno, "open \(source) to keep it") }
        defer { sysClose(input) }
        let output = sysOpen(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw .posix(errno, "create \(target)") }
        defer { sysClose(output) }
        // FICLONE: _IOW(0x94, 9, int).
        if ioctl(output, 0x4004_9409, input) != 0 {
            do throws(ProviderError) {
                _ = try FileDescriptors.copyAll(from: input, to: output, what: "keep \(source)")
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
