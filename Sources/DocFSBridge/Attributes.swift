import Foundation
import Glibc
import DocFSProvider

/// Turns items into `struct stat`. Permission bits tell the truth about capabilities:
/// no `w` where writing (files) or adding (folders) is refused, no `r` where reading or listing is.
struct Attributes {
    let uid: uid_t
    let gid: gid_t

    static func permissions(of item: Item) -> mode_t {
        var perm = mode_t(item.posixPermissions) & 0o7777
        switch item.kind {
        case .file:
            if !item.capabilities.contains(.allowsReading) { perm &= ~0o444 }
            if !item.capabilities.contains(.allowsWriting) { perm &= ~0o222 }
        case .folder:
            if !item.capabilities.contains(.allowsContentEnumerating) { perm &= ~0o444 }
            if !item.capabilities.contains(.allowsAddingSubItems) { perm &= ~0o222 }
        case .symlink:
            perm = 0o777
        }
        return perm
    }

    func stat(of item: Item, ino: UInt64) -> stat {
        var st = Glibc.stat()
        st.st_ino = UInt(ino)
        st.st_uid = uid
        st.st_gid = gid
        st.st_blksize = 4096
        switch item.kind {
        case .file:
            st.st_mode = S_IFREG | Self.permissions(of: item)
            st.st_nlink = 1
            st.st_size = Int(item.documentSize)
        case .folder:
            st.st_mode = S_IFDIR | Self.permissions(of: item)
            // 2 + subfolders, as ext4 does: fts relies on it to know when a folder has none left.
            st.st_nlink = UInt(2 + item.childFolderCount)
            st.st_size = 4096
        case .symlink:
            st.st_mode = S_IFLNK | 0o777
            st.st_nlink = 1
            st.st_size = item.symlinkTargetPath?.utf8.count ?? 0
        }
        st.st_blocks = (st.st_size + 511) / 512
        let mtime = Self.timespec(item.contentModificationDate)
        st.st_mtim = mtime
        st.st_ctim = mtime
        st.st_atim = item.lastUsedDate.map(Self.timespec) ?? mtime
        return st
    }

    /// Attributes of a file still being copied in: what the staging file says.
    func stat(ofStaged fd: Int32, ino: UInt64, permissions: mode_t) -> stat {
        var st = Glibc.stat()
        _ = fstat(fd, &st)
        st.st_ino = UInt(ino)
        st.st_uid = uid
        st.st_gid = gid
        st.st_mode = S_IFREG | permissions
        st.st_nlink = 1
        return st
    }

    @inline(__always) static func timespec(_ date: Date) -> Glibc.timespec {
        let t = date.timeIntervalSince1970
        let sec = t.rounded(.down)
        return Glibc.timespec(tv_sec: Int(sec), tv_nsec: Int((t - sec) * 1e9))
    }

    static func date(_ ts: Glibc.timespec) -> Date {
        Date(timeIntervalSince1970: Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
    }
}
