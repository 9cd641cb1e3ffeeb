#if canImport(Glibc)
    import Glibc
#endif
import DocFSProvider

/// One content version of a file: its bytes in an anonymous memory file (`memfd_create`), never
/// on the Swift heap and never on disk.
///
/// A version is filled once, from the staged file, and then sealed (`F_SEAL_WRITE`,
/// `F_SEAL_GROW`, `F_SEAL_SHRINK`): nobody can change it afterwards, so a reader that opened it
/// keeps seeing exactly these bytes after a newer version replaced it or the item was deleted.
/// The provider holds one descriptor per version (closed when the last reference goes); readers
/// get their own read-only descriptors through `/proc/self/fd`, which keep the memory alive until
/// they close them.
final class MemoryFile: Sendable {
    let fd: Int32
    let size: Int64

    private init(fd: Int32, size: Int64) {
        self.fd = fd
        self.size = size
    }

    deinit { close(fd) }

    /// A new version holding the bytes of the regular file open at `source` (read from offset 0).
    /// The copy is the kernel's (`sendfile`), so the bytes never pass through this process.
    static func copying(from source: Int32, name: String) throws(ProviderError) -> MemoryFile {
        let fd = try FileDescriptors.memoryFile(name: name)
        var total: Int64 = 0
        do throws(ProviderError) {
            total = try FileDescriptors.copyAll(from: source, to: fd, what: "copy the staged file into memory")
            FileDescriptors.seal(fd)
        } catch {
            close(fd)
            throw error
        }
        return MemoryFile(fd: fd, size: total)
    }

    /// A fresh read-only descriptor on these bytes (its own file offset), which the caller closes.
    func openReadOnly() throws(ProviderError) -> Int32 {
        let reopened = open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
        if reopened < 0 { throw .posix(errno, "reopen a memory file through /proc/self/fd") }
        return reopened
    }
}
