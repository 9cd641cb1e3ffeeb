import Foundation
import Glibc
import DocFS

// The calls the mount makes beyond creating, reading and moving: attribute changes, truncation,
// statfs, removal, and the opt-ins for special items and Apple's metadata. Each compares what
// the mount answers with what the provider then holds.
extension ConformanceRun {
    /// chmod, chown and utimensat through the mount reach the provider's item, and stat shows
    /// them. A provider that keeps no attribute changes (the default `setAttributes`: EROFS, and
    /// EPERM for owners) is skipped; one that accepts a change must keep it.
    func attributeChanges(in folder: (path: String, item: Item)) throws {
        let path = folder.path + "/" + tag + "-attributes.txt"
        try expect(writeFile(path, Array("attributes".utf8)) == 0, "write \(path)")
        guard let id = childIdentifier(tag + "-attributes.txt", in: folder.item.identifier) else {
            throw CheckStop.failed("no \(path) at the provider")
        }
        let before = try provider.item(for: id)
        if chmod(m(path), 0o640) != 0 {
            let refused = errno
            guard refused == EROFS || refused == EPERM else { throw CheckStop.failed("chmod 640: \(Self.errnoName(refused))") }
            try expect(try provider.item(for: id).posixPermissions == before.posixPermissions, "a refused chmod changed the provider's mode")
            throw CheckStop.skipped("the provider keeps no attribute changes (chmod: \(Self.errnoName(refused)))")
        }
        let moded = try provider.item(for: id)
        try expect(moded.posixPermissions & 0o7777 == 0o640, "chmod 640: the provider's mode is \(String(moded.posixPermissions, radix: 8))")
        try expect(
            lstatus(path).map { $0.st_mode & 0o7777 & ~0o640 == 0 } == true,
            "chmod 640: stat shows \(String(lstatus(path)?.st_mode ?? 0, radix: 8)), more than the mode")

        // utimensat with nanoseconds: the provider keeps them whole, and stat shows them.
        var times = [timespec(tv_sec: 1_234_567_890, tv_nsec: 123_456_789), timespec(tv_sec: 1_600_000_000, tv_nsec: 987_654_321)]
        try expect(utimensat(AT_FDCWD, m(path), &times, AT_SYMLINK_NOFOLLOW) == 0, "utimensat: \(Self.errnoName(errno))")
        let timed = try provider.item(for: id)
        try expect(
            timed.modificationTime == FileTime(seconds: 1_600_000_000, nanoseconds: 987_654_321),
            "utimensat: the provider's modification time is \(timed.modificationTime)")
        if let st = lstatus(path) {
            try expect(
                st.st_mtim.tv_sec == 1_600_000_000 && st.st_mtim.tv_nsec == 987_654_321,
                "utimensat: stat shows mtime \(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)")
        }

        // chown as root: kept whole, or refused (EPERM) with nothing changed.
        guard geteuid() == 0 else { return }
        if chown(m(path), 4242, 4343) == 0 {
            let owned = try provider.item(for: id)
            try expect(owned.ownerID == 4242 && owned.groupID == 4343, "chown 4242:4343: the provider has \(owned.ownerID):\(owned.groupID)")
            try expect(lstatus(path).map { $0.st_uid == 4242 && $0.st_gid == 4343 } == true, "chown 4242:4343: stat shows otherwise")
        } else {
            let refused = errno
            try expect(refused == EPERM, "chown by root: \(Self.errnoName(refused)), not 0 or EPERM")
            let kept = try provider.item(for: id)
            try expect(kept.ownerID == before.ownerID && kept.groupID == before.groupID, "a refused chown changed the provider's owner")
        }
    }

    /// truncate through the mount shortens and lengthens the provider's contents (zeros after
    /// the old end), as stat and read show.
    func truncation(in folder: (path: String, item: Item)) throws {
        let name = tag + "-truncated.bin"
        let path = folder.path + "/" + name
        let bytes = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        try expect(writeFile(path, bytes) == 0, "write \(path)")
        guard let id = childIdentifier(name, in: folder.item.identifier) else { throw CheckStop.failed("no \(path) at the provider") }
        guard try provider.item(for: id).capabilities.contains(.allowsWriting) else {
            throw CheckStop.skipped("a new file in \(folder.path.isEmpty ? "/" : folder.path) does not allow writing")
        }
        for (size, expected) in [(1000, Array(bytes.prefix(1000))), (5000, Array(bytes.prefix(1000)) + Array(repeating: 0, count: 4000)), (0, [])] {
            try expect(truncate(m(path), off_t(size)) == 0, "truncate to \(size): \(Self.errnoName(errno))")
            try expect(lstatus(path).map { Int($0.st_size) } == size, "truncate to \(size): stat shows \(lstatus(path)?.st_size ?? -1)")
            let item = try provider.item(for: id)
            try expect(item.documentSize == Int64(size), "truncate to \(size): the provider's documentSize is \(item.documentSize)")
            let fd = try provider.openContents(of: id)
            defer { close(fd) }
            try expect(try Self.readAll(fd: fd, what: path) == expected, "truncate to \(size): the provider's contents are not the file's")
            try expect(try readAll(path) == expected, "truncate to \(size): read through the mount gives other bytes")
        }
    }

    /// statvfs of the mount gives the provider's storage statistics, and they hold together.
    func statisticsAgree() throws {
        var st = statvfs()
        try expect(statvfs(mnt, &st) == 0, "statvfs: \(Self.errnoName(errno))")
        let stats = provider.storageStatistics()
        try expect(
            UInt64(st.f_bsize) == stats.blockSize && UInt64(st.f_frsize) == stats.blockSize,
            "statvfs block size \(st.f_bsize)/\(st.f_frsize), the provider's \(stats.blockSize)")
        try expect(UInt64(st.f_namemax) == stats.maxNameLength, "statvfs f_namemax \(st.f_namemax), the provider's \(stats.maxNameLength)")
        try expect(
            stats.maxNameLength >= 1 && stats.maxNameLength <= 255, "the longest name is \(stats.maxNameLength) bytes (1 to 255: FUSE's limit)")
        try expect(
            st.f_bavail <= st.f_bfree && st.f_bfree <= st.f_blocks,
            "statvfs blocks: \(st.f_bavail) available, \(st.f_bfree) free, \(st.f_blocks) in all")
        try expect(st.f_ffree <= st.f_files, "statvfs files: \(st.f_ffree) free of \(st.f_files)")
    }

    /// unlink and rmdir through the mount take the name from the provider's folder (the item
    /// gone, or in the trash when the mount serves one), and stat then says ENOENT.
    func removal(in folder: (path: String, item: Item)) throws {
        let base = folder.path + "/" + tag + "-removed"
        try expect(mkdir(m(base), 0o755) == 0, "mkdir \(base): \(Self.errnoName(errno))")
        try expect(writeFile(base + "/f.txt", Array("removed".utf8)) == 0, "write \(base)/f.txt")
        guard let dirID = childIdentifier(tag + "-removed", in: folder.item.identifier), let fileID = childIdentifier("f.txt", in: dirID) else {
            throw CheckStop.failed("the provider lacks what mkdir and write made")
        }
        let trash = options.servesTrash(of: provider)
        func gone(_ id: ItemIdentifier, _ name: String, from parent: ItemIdentifier, _ path: String) throws {
            try expect(childIdentifier(name, in: parent) == nil, "\(path): the provider's folder still has the name")
            try expect(lstatus(path) == nil && errno == ENOENT, "\(path): stat after the removal is not ENOENT")
            if let item = try? provider.item(for: id) {
                try expect(
                    trash && item.parentIdentifier == .trashContainer,
                    "\(path): the provider still has the item, in \(item.parentIdentifier)")
            }
        }
        try expect(unlink(m(base + "/f.txt")) == 0, "unlink \(base)/f.txt: \(Self.errnoName(errno))")
        try gone(fileID, "f.txt", from: dirID, base + "/f.txt")
        try expect(try provider.enumerateItems(in: dirID).isEmpty, "\(base): the folder is not empty after the unlink")
        try expect(rmdir(m(base)) == 0, "rmdir \(base): \(Self.errnoName(errno))")
        try gone(dirID, tag + "-removed", from: folder.item.identifier, base)
    }

    /// A `SpecialItemProvider`: mkfifo and a socket's mknod make items of those kinds, stat shows
    /// them, and they go with unlink.
    func specialItems(in folder: (path: String, item: Item)) throws {
        guard provider is any SpecialItemProvider else { throw CheckStop.skipped("not a SpecialItemProvider: mkfifo and mknod are refused") }
        for (suffix, type, kind) in [("fifo", S_IFIFO, ItemKind.fifo), ("socket", S_IFSOCK, ItemKind.socket)] {
            let name = tag + "-" + suffix, path = folder.path + "/" + name
            try expect(mknod(m(path), type | 0o644, 0) == 0, "mknod \(suffix): \(Self.errnoName(errno))")
            let item = try provider.childItem(named: name, in: folder.item.identifier)
            try expect(item.kind == kind, "mknod \(suffix): the provider has a \(item.kind)")
            try expect(lstatus(path).map { $0.st_mode & S_IFMT == type } == true, "mknod \(suffix): stat shows another type")
            try expect(unlink(m(path)) == 0 && childIdentifier(name, in: folder.item.identifier) == nil, "unlink \(suffix): \(Self.errnoName(errno))")
        }
    }

    /// An `AppleMetadataProvider`: `user.docfs.tags` and `user.docfs.favorite-rank` set through
    /// the mount are the item's tag data and favourite rank, read back, and removed.
    func appleMetadata(in folder: (path: String, item: Item)) throws {
        guard provider is any AppleMetadataProvider else { throw CheckStop.skipped("not an AppleMetadataProvider: no tags or favourite rank") }
        let name = tag + "-tagged.txt", path = folder.path + "/" + name
        try expect(writeFile(path, Array("tagged".utf8)) == 0, "write \(path)")
        guard let id = childIdentifier(name, in: folder.item.identifier) else { throw CheckStop.failed("no \(path) at the provider") }
        typealias X = ExtendedAttributeCalls
        try expect(X.set(m(path), "user.docfs.tags", Array("red,blue".utf8)) == 0, "set user.docfs.tags: \(Self.errnoName(errno))")
        try expect(try provider.item(for: id).tagData.map { Array($0) } == Array("red,blue".utf8), "the provider's tag data is not what was set")
        try expect(X.get(m(path), "user.docfs.tags") == Array("red,blue".utf8), "user.docfs.tags reads back otherwise")
        try expect(X.set(m(path), "user.docfs.favorite-rank", Array("7".utf8)) == 0, "set user.docfs.favorite-rank: \(Self.errnoName(errno))")
        try expect(try provider.item(for: id).favoriteRank == 7, "the provider's favourite rank is not 7")
        try expect(
            X.remove(m(path), "user.docfs.tags") == 0 && X.remove(m(path), "user.docfs.favorite-rank") == 0,
            "remove the tags and the rank: \(Self.errnoName(errno))")
        let cleared = try provider.item(for: id)
        try expect(cleared.tagData == nil && cleared.favoriteRank == nil, "the removed tags or rank stay at the provider")
    }
}
