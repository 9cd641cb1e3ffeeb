import Foundation
import Glibc
import DocFSProvider

/// Turns items into `struct stat`: owner, group and mode as stored, times to the nanosecond.
/// Permission bits tell the truth about capabilities: no `w` where writing (files) or adding
/// (folders) is refused, no `r` where reading or listing is.
package struct Attributes {
    package init() {}
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
        case .fifo, .socket, .characterDevice, .blockDevice:
            break
        }
        return perm
    }

    static func fileType(_ kind: ItemKind) -> mode_t {
        switch kind {
        case .file: return S_IFREG
        case .folder: return S_IFDIR
        case .symlink: return S_IFLNK
        case .fifo: return S_IFIFO
        case .socket: return S_IFSOCK
        case .characterDevice: return S_IFCHR
        case .blockDevice: return S_IFBLK
        }
    }

    package func stat(of item: Item, ino: UInt64) -> stat {
        var st = Glibc.stat()
        st.st_ino = UInt(ino)
        st.st_uid = item.ownerID
        st.st_gid = item.groupID
        st.st_blksize = 4096
        st.st_mode = Self.fileType(item.kind) | Self.permissions(of: item)
        st.st_nlink = UInt(max(item.linkCount, 1))
        switch item.kind {
        case .file:
            st.st_size = Int(item.documentSize)
        case .folder:
            // 2 + subfolders, as ext4 does: fts relies on it to know when a folder has none left.
            st.st_nlink = UInt(2 + item.childFolderCount)
            st.st_size = 4096
        case .symlink:
            st.st_size = item.symlinkTargetPath?.utf8.count ?? 0
        case .fifo, .socket:
            st.st_size = 0
        case .characterDevice, .blockDevice:
            st.st_size = 0
            st.st_rdev = UInt(item.deviceNumber)
        }
        // A file on the server only takes no space here: `du` shows what is local.
        st.st_blocks = item.isDownloaded ? (st.st_size + 511) / 512 : 0
        st.st_mtim = Self.timespec(item.modificationTime)
        st.st_ctim = Self.timespec(item.changeTime)
        st.st_atim = Self.timespec(item.accessTime ?? item.modificationTime)
        return st
    }

    /// Attributes of a file still being copied in: size and times from the staging file, owner,
    /// group, mode and access time from its write session.
    func stat(ofStaged staged: Glibc.stat?, ino: UInt64, attributes: NewItemAttributes) -> stat {
        var st = staged ?? Glibc.stat()
        st.st_ino = UInt(ino)
        st.st_uid = attributes.ownerID
        st.st_gid = attributes.groupID
        st.st_mode = S_IFREG | mode_t(attributes.posixPermissions & 0o7777)
        st.st_nlink = 1
        if let accessTime = attributes.accessTime { st.st_atim = Self.timespec(accessTime) }
        return st
    }

    @inline(__always) static func timespec(_ time: FileTime) -> Glibc.timespec {
        Glibc.timespec(tv_sec: Int(time.seconds), tv_nsec: Int(time.nanoseconds))
    }

    @inline(__always) static func fileTime(_ ts: Glibc.timespec) -> FileTime {
        FileTime(seconds: Int64(ts.tv_sec), nanoseconds: Int32(ts.tv_nsec))
    }
}
