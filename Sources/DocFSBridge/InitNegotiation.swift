import CFuse
import Glibc
import Synchronization

/// Asks the kernel for `FUSE_HANDLE_KILLPRIV_V2`, which libfuse 3.14 cannot ask for.
///
/// Why: without it the kernel never marks an inode as having no security attributes (SB_NOSEC),
/// so before every write(2) it sends GETXATTR `security.capability` to learn whether privileges
/// must be dropped: two round trips per write instead of one. With it the kernel asks once per
/// inode, and clearing set-user-ID/set-group-ID when contents change becomes the filesystem's job
/// (the bridge does it at a file's first write and at truncate, `Bridge.setIDToDrop`; docfs
/// stores no `security.capability`).
///
/// How: libfuse routes every request it reads from /dev/fuse and every reply it writes through
/// the custom I/O functions (`fuse_session_custom_io`). The read notes the INIT request when the
/// kernel offers the flag; the write sets the flag in that request's reply. Every other message
/// costs one comparison.
final class InitNegotiation: Sendable {
    /// The INIT request's unique id while its reply is pending, else 0 (no request has id 0).
    private let pendingInit = Atomic<UInt64>(0)
    /// Whether the INIT reply carried the flag.
    let granted = Atomic<Bool>(false)

    /// Called with each request read from the device.
    @inline(__always)
    func sawRequest(_ buf: UnsafeRawPointer, length: Int) {
        let headerSize = MemoryLayout<fuse_in_header>.size
        // major, minor, max_readahead, flags: the part of fuse_init_in every kernel sends.
        guard length >= headerSize + 16,
              buf.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == FUSE_INIT.rawValue else { return }
        let major = buf.loadUnaligned(fromByteOffset: headerSize, as: UInt32.self)
        let offered = buf.loadUnaligned(fromByteOffset: headerSize + 12, as: UInt32.self)
        guard major == 7, offered & UInt32(FUSE_HANDLE_KILLPRIV_V2) != 0 else { return }
        pendingInit.store(buf.loadUnaligned(fromByteOffset: 8, as: UInt64.self), ordering: .relaxed)
    }

    /// Called with each reply before it is written; amends the INIT reply.
    @inline(__always)
    func amendReply(_ iov: UnsafeMutablePointer<iovec>, count: Int32) {
        let pending = pendingInit.load(ordering: .relaxed)
        guard pending != 0, count >= 2, let header = iov[0].iov_base,
              iov[0].iov_len >= MemoryLayout<fuse_out_header>.size,
              header.loadUnaligned(fromByteOffset: 8, as: UInt64.self) == pending else { return }
        pendingInit.store(0, ordering: .relaxed)
        // An error reply, or the short reply that asks the kernel for another major version,
        // has no flags to amend.
        guard header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0,
              let body = iov[1].iov_base, iov[1].iov_len >= 16 else { return }
        let flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
        body.storeBytes(of: flags | UInt32(FUSE_HANDLE_KILLPRIV_V2), toByteOffset: 12, as: UInt32.self)
        granted.store(true, ordering: .relaxed)
    }

    /// The custom I/O table: plain read(2)/writev(2) on the session's descriptor, observed.
    static func customIO() -> fuse_custom_io {
        var io = fuse_custom_io()
        io.read = { fd, buf, length, userdata in
            let n = Glibc.read(fd, buf, length)
            if n > 0, let buf, let userdata {
                Unmanaged<Bridge>.fromOpaque(userdata).takeUnretainedValue().initNegotiation
                    .sawRequest(UnsafeRawPointer(buf), length: n)
            }
            return n
        }
        io.writev = { fd, iov, count, userdata in
            if let iov, let userdata {
                Unmanaged<Bridge>.fromOpaque(userdata).takeUnretainedValue().initNegotiation
                    .amendReply(iov, count: count)
            }
            return Glibc.writev(fd, iov, count)
        }
        return io
    }
}
