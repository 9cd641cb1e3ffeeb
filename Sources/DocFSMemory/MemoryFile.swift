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
        let fd = try makeAnonymousFile(name: name)
        var total: Int64 = 0
        do throws(ProviderError) {
            total = try copyAll(from: source, to: fd)
            seal(fd)
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

    // MARK: - memfd_create

    private static let MFD_CLOEXEC: UInt32 = 0x1
    private static let MFD_ALLOW_SEALING: UInt32 = 0x2
    private static let F_ADD_SEALS: Int32 = 1024 + 9
    private static let F_SEAL_SHRINK: Int32 = 0x2
    private static let F_SEAL_GROW: Int32 = 0x4
    private static let F_SEAL_WRITE: Int32 = 0x8

    private typealias MemfdCreate = @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32

    /// glibc's `memfd_create` (2.27 and later). Swift's Glibc module does not export it (and
    /// `syscall` is variadic, so not callable from Swift), so it is looked up once with dlsym.
    private static let memfdCreate: MemfdCreate? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "memfd_create") else { return nil }
        return unsafeBitCast(symbol, to: MemfdCreate.self)
    }()

    private static func makeAnonymousFile(name: String) throws(ProviderError) -> Int32 {
        guard let create = memfdCreate else {
            throw ProviderError(.unsupported, "memfd_create is not available (glibc 2.27 or later is needed)")
        }
        // The name only shows in /proc/PID/fd (as "memfd:NAME"); at most 249 bytes.
        var label = "docfs:" + name
        while label.utf8.count > 200 { label.removeLast() }
        let fd = create(label, MFD_CLOEXEC | MFD_ALLOW_SEALING)
        if fd < 0 { throw .posix(errno, "memfd_create") }
        return fd
    }

    private static func seal(_ fd: Int32) {
        // Best effort: without seals the bytes still never change (nothing writes to them).
        _ = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
    }

    private static func copyAll(from source: Int32, to destination: Int32) throws(ProviderError) -> Int64 {
        var offset: off_t = 0
        while true {
            let n = sendfile(destination, source, &offset, 1 << 30)
            if n > 0 { continue }
            if n == 0 { return Int64(offset) }
            let e = errno
            if e == EINTR { continue }
            if e == EINVAL || e == ENOSYS { return try copyByReading(from: source, to: destination, offset: Int(offset)) }
            if e == ENOMEM { throw ProviderError(.noSpace, "out of memory for the contents", errno: ENOSPC) }
            throw .posix(e, "copy the staged file into memory")
        }
    }

    private static func copyByReading(from source: Int32, to destination: Int32, offset start: Int) throws(ProviderError) -> Int64 {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = start
        while true {
            let n = pread(source, buffer, 1 << 20, off_t(offset))
            if n < 0 { if errno == EINTR { continue }; throw .posix(errno, "read the staged file") }
            if n == 0 { return Int64(offset) }
            var done = 0
            while done < n {
                let w = pwrite(destination, buffer + done, n - done, off_t(offset + done))
                if w < 0 { if errno == EINTR { continue }; throw .posix(errno, "write a memory file") }
                done += w
            }
            offset += n
        }
    }
}
