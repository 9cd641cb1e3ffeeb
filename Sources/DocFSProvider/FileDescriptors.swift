import Glibc

/// Whole-file work on descriptors that providers and the bridge share, in one place: writing
/// and copying all of a file (retrying short and interrupted calls), and sealed anonymous memory
/// files (`memfd_create`), a convenient thing for `openContents` to return.
///
/// `memfd_create` and `copy_file_range` are looked up once with dlsym: Swift's Glibc module is
/// built without `_GNU_SOURCE`, which declares them.
public enum FileDescriptors {
    /// Writes all of `bytes` at `offset` of `fd` (ENOSPC for a write that writes nothing).
    public static func writeAll(_ bytes: [UInt8], to fd: Int32, at offset: Int = 0, what: String = "write") throws(ProviderError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
            if n < 0 { if errno == EINTR { continue }; throw .posix(errno, what) }
            if n == 0 { throw .posix(ENOSPC, what) }
            done += n
        }
    }

    /// Copies all of `source` from offset 0 to `destination` at offset 0, in the kernel where it
    /// can (`copy_file_range`: a reflink or a server-side copy on filesystems that have them;
    /// `sendfile` across filesystems, to a memory file), by reading and writing where it cannot.
    /// Returns the bytes copied.
    @discardableResult
    public static func copyAll(from source: Int32, to destination: Int32, what: String = "copy") throws(ProviderError) -> Int64 {
        var inOffset: Int64 = 0
        var outOffset: Int64 = 0
        if let copy = copyFileRange {
            while true {
                let n = copy(source, &inOffset, destination, &outOffset, 1 << 30, 0)
                if n > 0 { continue }
                if n == 0 { return inOffset }
                let e = errno
                if e == EINTR { continue }
                if e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP { break }
                if e == ENOMEM { throw ProviderError(.noSpace, "\(what): out of memory", errno: ENOSPC) }
                throw .posix(e, what)
            }
        }
        // sendfile writes at the destination's file position: put it where the copy stands.
        if lseek(destination, off_t(inOffset), SEEK_SET) == off_t(inOffset) {
            var offset = off_t(inOffset)
            while true {
                let n = sendfile(destination, source, &offset, 1 << 30)
                if n > 0 { continue }
                if n == 0 { return Int64(offset) }
                let e = errno
                if e == EINTR { continue }
                if e == EINVAL || e == ENOSYS { inOffset = Int64(offset); break }
                if e == ENOMEM { throw ProviderError(.noSpace, "\(what): out of memory", errno: ENOSPC) }
                throw .posix(e, what)
            }
        }
        return try copyByReading(from: source, to: destination, offset: Int(inOffset), what: what)
    }

    /// An anonymous memory file holding a copy of `bytes`, sealed against any change, at offset 0.
    /// `name` shows in /proc/PID/fd as `memfd:docfs:NAME`.
    public static func sealedMemoryFile(_ bytes: [UInt8], name: String) throws(ProviderError) -> Int32 {
        let fd = try memoryFile(name: name)
        do throws(ProviderError) { try writeAll(bytes, to: fd, what: "fill a memory file") } catch {
            close(fd)
            throw error
        }
        seal(fd)
        return fd
    }

    /// An empty anonymous memory file that can be sealed (`seal`) once filled.
    public static func memoryFile(name: String) throws(ProviderError) -> Int32 {
        guard let create = memfdCreate else {
            throw ProviderError(.unsupported, "memfd_create is not available (glibc 2.27 or later is needed)")
        }
        // The name is at most 249 bytes.
        var label = "docfs:" + name
        while label.utf8.count > 200 { label.removeLast() }
        let fd = create(label, 0x1 | 0x2) // MFD_CLOEXEC | MFD_ALLOW_SEALING
        if fd < 0 { throw .posix(errno, "memfd_create") }
        return fd
    }

    /// Seals a memory file against shrinking, growing and writing. Best effort: without seals
    /// the bytes still never change when nothing writes to them.
    public static func seal(_ fd: Int32) {
        _ = fcntl(fd, 1024 + 9, Int32(0x2 | 0x4 | 0x8)) // F_ADD_SEALS: SHRINK | GROW | WRITE
    }

    private static func copyByReading(from source: Int32, to destination: Int32, offset start: Int, what: String) throws(ProviderError) -> Int64 {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = start
        while true {
            let n = pread(source, buffer, 1 << 20, off_t(offset))
            if n < 0 { if errno == EINTR { continue }; throw .posix(errno, what) }
            if n == 0 { return Int64(offset) }
            var done = 0
            while done < n {
                let w = pwrite(destination, buffer + done, n - done, off_t(offset + done))
                if w < 0 { if errno == EINTR { continue }; throw .posix(errno, what) }
                if w == 0 { throw .posix(ENOSPC, what) }
                done += w
            }
            offset += n
        }
    }

    private typealias MemfdCreate = @convention(c) (UnsafePointer<CChar>, UInt32) -> Int32
    private typealias CopyFileRange = @convention(c) (Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32) -> Int

    private static let memfdCreate: MemfdCreate? = symbol("memfd_create")
    private static let copyFileRange: CopyFileRange? = symbol("copy_file_range")

    private static func symbol<T>(_ name: String) -> T? {
        guard let found = dlsym(dlopen(nil, RTLD_NOW), name) else { return nil }
        return unsafeBitCast(found, to: T.self)
    }
}
