#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider

// The passthrough readers' file is no longer the item's stored version: another replica's
// version was renamed over `contents/<row>` while they had it open. The kernel still takes a
// writer onto the readers' file, so that file becomes the live one: the version it held is kept
// where an item still names it (a conflicted copy, `StoreReplica.forkConflictedCopy`, whose name
// takes a copy of it), then the item's current version is copied into it in place (the readers
// of this item see that version, as if the sync had written it in place) and the session takes
// it by descriptor: it has no name, so a crash leaves nothing of it (every close() commits a
// copy of it).
extension LocalStore {
    package func adoptStaleContents(
        of identifier: ItemIdentifier, readersFile: Int32, current: Int32, version: ItemVersion
    ) throws(ProviderError) -> LiveContents? {
        var held = stat()
        guard fstat(readersFile, &held) == 0 else { throw .posix(errno, "stat the readers' file of \(identifier)") }
        let (device, inode) = (UInt64(held.st_dev), UInt64(held.st_ino))
        guard let row = self.row(for: identifier), let record = tree.record(row), record.item.kind == .file,
            record.item.itemVersion.contentVersion == version.contentVersion
        else { return nil }
        var now = stat()
        guard fstat(current, &now) == 0, UInt64(now.st_dev) != device || UInt64(now.st_ino) != inode else { return nil }
        // The readers' descriptor is read-only: the same file opened again for writing (it may
        // have no name; /proc opens the file itself).
        let live = sysOpen("/proc/self/fd/\(readersFile)", O_RDWR | O_CLOEXEC)
        guard live >= 0 else { throw .posix(errno, "open the readers' file of \(record.item.filename) for writing") }
        var reopened = stat()
        guard fstat(live, &reopened) == 0, UInt64(reopened.st_dev) == device, UInt64(reopened.st_ino) == inode else {
            sysClose(live)
            return nil
        }
        let tag = "\(row)-\(version.contentVersion)-\(UInt32.random(in: 0...UInt32.max))"
        // Other items' names of the readers' file take a copy of it, made before the transaction.
        var kept: String?
        defer { if let kept { _ = sysUnlink(kept) } }
        let named: Bool
        do throws(ProviderError) {
            if held.st_nlink > 0 {
                let path = contents.stagingPath + "/.kept-" + tag
                try Self.cloneOrCopy(readersFile, to: path, what: "the readers' file of \(record.item.filename)")
                kept = path
            }
            named = try nameKept(
                identifier, row: row, version: version.contentVersion, readersFile: readersFile, kept: kept, tag: tag)
        } catch {
            sysClose(live)
            throw error
        }
        guard named else {
            sysClose(live)
            return nil
        }
        // Nobody's version now: the current one goes into it, in place.
        do throws(ProviderError) {
            let size = try FileDescriptors.copyAll(from: current, to: live, what: "bring the current version into the readers' file")
            guard ftruncate(live, off_t(size)) == 0 else { throw .posix(errno, "truncate the readers' file") }
            // UTIME_OMIT ((1 << 30) - 2): the access time stays.
            var stamps = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), now.st_mtim]
            _ = futimens(live, &stamps)
        } catch {
            sysClose(live)
            throw error
        }
        logger.debug("\(record.item.filename): the readers' file, replaced by version \(version), is live with its bytes")
        return LiveContents(path: "", item: record.item, descriptor: live)
    }

    /// The transaction: checks that the item still has `version`, then gives
    /// the other items that name the readers' file `kept` (a copy of it). False when anything
    /// changed or a name is not an item's.
    private func nameKept(
        _ identifier: ItemIdentifier, row: Int64, version: UInt64, readersFile: Int32, kept: String?, tag: String
    ) throws(ProviderError) -> Bool {
        try write { (database) throws(ProviderError) -> Bool in
            var again = stat()
            guard self.row(for: identifier) == row, let still = tree.record(row), still.item.itemVersion.contentVersion == version,
                fstat(readersFile, &again) == 0
            else { return false }
            let (device, inode) = (UInt64(again.st_dev), UInt64(again.st_ino))
            var others: [Int64] = []
            if again.st_nlink > 0 {
                guard let kept else { return false }
                others = try rowsSharing(
                    "the readers' file of \(still.item.filename)", row: row, size: Int64(again.st_size), device: device, inode: inode,
                    database)
                // A replaced version's backup waiting for the reaper (`StoreContents.replace`,
                // finished: no undo reaches it any more) is a name too. The reaper may remove
                // one meanwhile (nothing adds a name of this file): counted between two equal
                // link counts.
                guard accounted(others.count, readersFile: readersFile, row: row, device: device, inode: inode) else { return false }
                try give(kept, to: others, tag: tag)
            }
            // Before the file changes: an upload reading it by one of those names reads again.
            liveDetaches.record(device: device, inode: inode)
            return true
        }
    }

    /// Whether `others` items' names and this row's backups are all the file's names.
    private func accounted(_ others: Int, readersFile: Int32, row: Int64, device: UInt64, inode: UInt64) -> Bool {
        for _ in 0..<5 {
            var before = stat()
            var after = stat()
            guard fstat(readersFile, &before) == 0 else { return false }
            let backups = backupNames(of: row, device: device, inode: inode)
            guard fstat(readersFile, &after) == 0 else { return false }
            if before.st_nlink == after.st_nlink { return others + backups == Int(after.st_nlink) }
        }
        return false
    }

    /// Names of `device`/`inode` among this row's replaced versions' backups in staging.
    private func backupNames(of row: Int64, device: UInt64, inode: UInt64) -> Int {
        let prefix = ".previous-\(row)-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: contents.stagingPath) else { return 0 }
        return names.filter { name in
            var st = stat()
            return name.hasPrefix(prefix) && stat(contents.stagingPath + "/" + name, &st) == 0 && UInt64(st.st_dev) == device
                && UInt64(st.st_ino) == inode
        }.count
    }
}
