import CFuse
import Glibc
import Logging
import Synchronization

/// Asks the kernel for `FUSE_HANDLE_KILLPRIV_V2` and `FUSE_PARALLEL_DIROPS`, which libfuse 3.14
/// cannot ask for (the second: see `BridgeOptions.parallelDirops`), and for passthrough.
///
/// Why: without it the kernel never marks an inode as having no security attributes (SB_NOSEC),
/// so before every write(2) it sends GETXATTR `security.capability` to learn whether privileges
/// must be dropped: two round trips per write instead of one. With it the kernel asks once per
/// inode, and clearing set-user-ID/set-group-ID when contents change becomes the filesystem's job
/// (the bridge does it at a file's first write and at truncate, `Bridge.setIDToDrop`; docfs
/// stores no `security.capability`).
///
/// The kernel still asks once per inode after each attribute refresh (a create or lookup reply,
/// a getattr): it clears the inode's S_NOSEC then, since another client may have set a
/// capability. So every new file costs one GETXATTR before its first write; only a filesystem
/// whose getxattr answers ENOSYS (`-o noxattr`) is never asked.
///
/// How: libfuse routes every request it reads from /dev/fuse and every reply it writes through
/// the custom I/O functions (`fuse_session_custom_io`). The read notes the INIT request when the
/// kernel offers the flag; the write sets the flag in that request's reply. Every other message
/// costs one comparison. INIT is always read, never spliced: with `-o splice` (`FuseOperations`)
/// libfuse splices the requests after it into a pipe, which needs a `splice_receive` here (glibc's
/// splice(2)); a write's bytes then stay in the pipe until `write_buf` moves them on.
final class InitNegotiation: Sendable {
    /// The INIT request's unique id while its reply is pending, else 0 (no request has id 0).
    private let pendingInit = Atomic<UInt64>(0)
    /// What the kernel offered: FUSE_HANDLE_KILLPRIV_V2, FUSE_PASSTHROUGH.
    private let offeredKillPriv = Atomic<Bool>(false)
    private let offeredPassthrough = Atomic<Bool>(false)
    private let offeredParallelDirops = Atomic<Bool>(false)
    /// Whether to ask for FUSE_PARALLEL_DIROPS (`BridgeOptions.parallelDirops`).
    let wantsParallelDirops: Bool
    /// Whether the INIT reply asked for FUSE_PARALLEL_DIROPS.
    let parallelDirops = Atomic<Bool>(false)

    init(parallelDirops: Bool = true) { wantsParallelDirops = parallelDirops }
    /// Whether the INIT reply carried the flag.
    let granted = Atomic<Bool>(false)

    /// Called with each request read from the device.
    @inline(__always)
    func sawRequest(_ buf: UnsafeRawPointer, length: Int) {
        let headerSize = MemoryLayout<fuse_in_header>.size
        // major, minor, max_readahead, flags: the part of fuse_init_in every kernel sends.
        guard length >= headerSize + 16,
            buf.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == FUSE_INIT.rawValue
        else { return }
        let major = buf.loadUnaligned(fromByteOffset: headerSize, as: UInt32.self)
        let offered = buf.loadUnaligned(fromByteOffset: headerSize + 12, as: UInt32.self)
        guard major == 7 else { return }
        // flags2 (the upper half of the 64 flags) counts only with FUSE_INIT_EXT.
        let offered2 =
            offered & UInt32(FUSE_INIT_EXT) != 0 && length >= headerSize + 20
            ? buf.loadUnaligned(fromByteOffset: headerSize + 16, as: UInt32.self) : 0
        offeredKillPriv.store(offered & UInt32(FUSE_HANDLE_KILLPRIV_V2) != 0, ordering: .relaxed)
        offeredParallelDirops.store(offered & UInt32(FUSE_PARALLEL_DIROPS) != 0, ordering: .relaxed)
        offeredPassthrough.store(offered2 & Passthrough.ABI.initFlag2 != 0, ordering: .relaxed)
        pendingInit.store(buf.loadUnaligned(fromByteOffset: 8, as: UInt64.self), ordering: .relaxed)
    }

    /// The body of the INIT reply (`fuse_init_out`, at least `atLeast` bytes) when `iov` is the
    /// reply to the INIT request whose unique id `pending` holds, which it then clears; nil for
    /// any other reply (at once: `pending` is 0 after INIT), an error reply, or the short reply
    /// that asks the kernel for another major version (no flags to amend).
    @inline(__always)
    static func initReplyBody(
        _ iov: UnsafeMutablePointer<iovec>, count: Int32, pending: borrowing Atomic<UInt64>,
        atLeast: Int
    ) -> UnsafeMutableRawPointer? {
        let unique = pending.load(ordering: .relaxed)
        guard unique != 0, count >= 2, let header = iov[0].iov_base,
            iov[0].iov_len >= MemoryLayout<fuse_out_header>.size,
            header.loadUnaligned(fromByteOffset: 8, as: UInt64.self) == unique
        else { return nil }
        pending.store(0, ordering: .relaxed)
        guard header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0,
            let body = iov[1].iov_base, iov[1].iov_len >= atLeast
        else { return nil }
        return body
    }

    /// Called with each reply before it is written; amends the INIT reply. True for that reply.
    @inline(__always) @discardableResult
    func amendReply(_ iov: UnsafeMutablePointer<iovec>, count: Int32, passthrough: Passthrough? = nil, log: Logger? = nil) -> Bool {
        guard let body = Self.initReplyBody(iov, count: count, pending: pendingInit, atLeast: 16) else { return false }
        var flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
        if offeredKillPriv.load(ordering: .relaxed) {
            flags |= UInt32(FUSE_HANDLE_KILLPRIV_V2)
            granted.store(true, ordering: .relaxed)
        }
        if wantsParallelDirops, offeredParallelDirops.load(ordering: .relaxed) {
            flags |= UInt32(FUSE_PARALLEL_DIROPS)
            parallelDirops.store(true, ordering: .relaxed)
        }
        if let passthrough, passthrough.wanted {
            negotiatePassthrough(passthrough, flags: &flags, body: body, length: iov[1].iov_len, log: log)
        }
        body.storeBytes(of: flags, toByteOffset: 12, as: UInt32.self)
        return true
    }

    /// Asks for FUSE_PASSTHROUGH (with a stacking depth of 1: the store is on a plain
    /// filesystem) where the kernel offers it and docfs may use it; says once why not otherwise.
    private func negotiatePassthrough(
        _ passthrough: Passthrough, flags: inout UInt32, body: UnsafeMutableRawPointer,
        length: Int, log: Logger?
    ) {
        let why: String
        if !offeredPassthrough.load(ordering: .relaxed) {
            why = "the kernel offers none (Linux 6.9+ with CONFIG_FUSE_PASSTHROUGH)"
        } else if flags & UInt32(FUSE_WRITEBACK_CACHE) != 0 {
            why = "the kernel allows no writeback cache with it (-o writeback)"
        } else if !Passthrough.hasCapability() {
            why = "registering backing files needs CAP_SYS_ADMIN in the initial user namespace"
        } else if length < Passthrough.ABI.maxStackDepthOffset + 4 {
            why = "the INIT reply is too short"
        } else {
            flags |= UInt32(FUSE_INIT_EXT)
            let flags2 = body.loadUnaligned(fromByteOffset: Passthrough.ABI.flags2Offset, as: UInt32.self)
            body.storeBytes(of: flags2 | Passthrough.ABI.initFlag2, toByteOffset: Passthrough.ABI.flags2Offset, as: UInt32.self)
            body.storeBytes(of: UInt32(1), toByteOffset: Passthrough.ABI.maxStackDepthOffset, as: UInt32.self)
            passthrough.negotiated.store(true, ordering: .relaxed)
            log?.info("passthrough on: the kernel reads stored contents and writes staged copies itself")
            return
        }
        log?.notice("passthrough off: \(why); file contents are read and written through the daemon")
    }

    /// The custom I/O table: plain read(2)/writev(2) on the session's descriptor, observed, and
    /// plain splice(2) for libfuse to move requests into a pipe under `-o splice` (without a
    /// `splice_receive`, libfuse never splices on a custom-I/O session).
    static func customIO() -> fuse_custom_io {
        var io = fuse_custom_io()
        io.read = { fd, buf, length, userdata in
            let n = Glibc.read(fd, buf, length)
            if n > 0, let buf, let userdata {
                let bridge = Unmanaged<Bridge>.fromOpaque(userdata).takeUnretainedValue()
                bridge.initNegotiation.sawRequest(UnsafeRawPointer(buf), length: n)
                bridge.ring?.sawRequest(UnsafeRawPointer(buf), length: n)
            }
            return n
        }
        io.writev = { fd, iov, count, userdata in
            var ringInit = false
            if let iov, let userdata {
                let bridge = Unmanaged<Bridge>.fromOpaque(userdata).takeUnretainedValue()
                Passthrough.amendOpenReply(iov, count: count)
                // A reply to a request from the ring goes back into its ring entry (RingTransport).
                if let ring = bridge.ring {
                    if let taken = ring.reply(iov, count: count) { return taken }
                    ringInit = ring.amendInitReply(iov, count: count)
                }
                if bridge.initNegotiation.amendReply(iov, count: count, passthrough: bridge.passthrough, log: bridge.log),
                    bridge.initNegotiation.granted.load(ordering: .relaxed)
                {
                    bridge.log.debug("INIT: asked the kernel for FUSE_HANDLE_KILLPRIV_V2 (docfs clears set-user-ID and set-group-ID itself)")
                }
                if ringInit {
                    let n = Glibc.writev(fd, iov, count)
                    if n > 0 { bridge.ring?.start() }
                    return n
                }
            }
            return Glibc.writev(fd, iov, count)
        }
        io.splice_receive = { fdin, offin, fdout, offout, length, flags, _ in
            docfs_splice(fdin, offin, fdout, offout, length, flags)
        }
        return io
    }
}
