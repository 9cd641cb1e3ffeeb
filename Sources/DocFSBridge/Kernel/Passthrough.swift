import CFuse
import Foundation
import Glibc
import Logging
import DocFSProvider
import Synchronization

/// The kernel's FUSE passthrough (Linux 6.9+, `CONFIG_FUSE_PASSTHROUGH`): for a file opened with
/// `FOPEN_PASSTHROUGH` and a registered backing file, the kernel reads (and maps) the backing
/// file itself; the daemon sees the open and the release, never a read.
///
/// docfs uses it for read-only opens of stored contents that are all here (not a small file read
/// from inside a segment, not a replica's contents still downloading) on a provider that can make
/// them a writer's live file (`LiveContentsProvider`), and for opens for writing of a stored
/// file: the backing file is then the file's staged copy (`WriteSession`), or the readers' stored
/// file made live (`Bridge.openJoiningReaders`), which the kernel writes itself; the daemon sees
/// open, flush and release. A staged copy is committed at
/// every close(2) (flush), after which a write through a dup'd descriptor must not change the
/// committed version in place: so a commit hands the provider a copy of the staged file
/// (copy_file_range; `Bridge.commitCopy`), at each close and at the last release if it changed
/// since the last copy (its size, mtime and ctime, which the kernel's writes move). Never the
/// staged file itself: a shared mapping outlives the release and would write a stored version
/// in place (writes through a mapping after the last close are lost with the staged file;
/// through the daemon they would come as write requests). Attributes
/// are the staged file's fstat, as for any file open for writing. A new file goes through the
/// daemon (create: small files stay in memory and go into segments) unless `-o
/// passthrough_create`: then the create reply carries the staged file the pool handed out as its
/// backing file (not for a file born with set-ID bits, which its first write must clear), and
/// each close imports a copy of it (`Bridge.importCopy`), for the same reason; a second open
/// joins that backing file. The copy is what it costs: a whole new file copied once more at
/// close (ext4 here has no reflink for FICLONE; handing over the staged file itself is safe only
/// once no mapping of it can exist, which the daemon cannot see before close(2) returns). Off by
/// default for that: docs/PERFORMANCE.md has the measurement. Through the daemon too: any
/// open while the file has a handle the daemon serves. Set-user/group-ID bits a write must clear
/// are cleared at the open of a passthrough writer (the kernel clears them on the staged file,
/// not on the item, and the daemon sees no write).
/// O_APPEND, ftruncate and shared mappings are safe: the kernel opens the backing file with the
/// handle's flags (an append lands at the staged file's end), a setattr still comes to the daemon,
/// which truncates the same staged file, and a mapping writes the staged file's pages, which the
/// copy at close reads.
///
/// libfuse 3.14 has no API for it and Debian's headers predate it, so the ABI is here: the INIT
/// flag is set in the reply `InitNegotiation` already edits, the backing file is registered with
/// an ioctl on the session's descriptor, and the open reply gets `FOPEN_PASSTHROUGH` and the
/// backing id on its way out (`amendOpenReply`, in the custom writev; the reply is written on the
/// thread that asked for it, so a thread-local says which reply to amend).
///
/// The kernel's rule per inode: while a file of it is open in passthrough, every other open of it
/// must be passthrough with the same backing file (else the open fails with EIO), and a
/// passthrough open fails while a file of it is open through the page cache. So every handle is
/// admitted here under one lock: a handle goes passthrough when nothing else has the file open,
/// a read-only one joins the backing file already there (stored contents or a writer's staged
/// copy: what the daemon would read too), an open for writing joins a writer's staged copy, or
/// the readers' stored file once the provider made it live (`madeLive`): a conflicted copy that
/// shared the file takes the kept version, and a replica's upload reading it reads again
/// (`LiveDetaches`). Where the readers' file is no longer the item's version (another replica's
/// was renamed over it while they had it open), the kernel still takes the writer onto that
/// file: the provider copies the current version into it in place (the readers of this inode
/// see that version, as if the sync had written it in place) and the session takes it by a
/// descriptor (`storedDescriptor`, `LiveContentsProvider.adoptStaleContents`). One case remains
/// where the writer waits for the passthrough readers to close (a closed reader's release may
/// still be on its way; the wait runs on a thread of its own, since under io_uring that release
/// may be queued behind the open on its ring) and, when they stay, fails with EBUSY: another
/// node's passthrough readers hold the same file (an item and its conflicted copy, one file
/// under two names while the server's version is fetched, both open). The kernel keeps both
/// inodes on that file until their last handles close, so any write in place would show in the
/// other item, which ext4 never does, and a page-cache open beside them is refused
/// (`storedBacking`, and `sharedElsewhere` after the file was made live, for such a reader that
/// came while the kept copy was made: the live file is then dropped unwritten). The provider
/// also refuses a file with a name no item accounts for.
final class Passthrough: @unchecked Sendable {
    /// The kernel's constants (include/uapi/linux/fuse.h of 6.9+).
    enum ABI {
        /// FUSE_PASSTHROUGH, bit 37 of the INIT flags: bit 5 of flags2.
        static let initFlag2: UInt32 = 1 << 5
        /// fuse_init_out: flags2 and max_stack_depth.
        static let flags2Offset = 32
        static let maxStackDepthOffset = 36
        /// FOPEN_PASSTHROUGH in fuse_open_out.open_flags.
        static let openFlag: UInt32 = 1 << 7
        /// _IOW(229, 1, struct fuse_backing_map) and _IOW(229, 2, uint32_t).
        static let backingOpen: UInt = 0x4010_E501
        static let backingClose: UInt = 0x4004_E502
        /// struct fuse_backing_map { int32_t fd; uint32_t flags; uint64_t padding; }
        struct BackingMap { var fd: Int32; var flags: UInt32 = 0; var padding: UInt64 = 0 }
    }

    /// `-o passthrough=off` leaves it false.
    let wanted: Bool
    /// The INIT reply asked for it (the kernel offered it, docfs may register backing files).
    let negotiated = Atomic<Bool>(false)
    /// A backing file was refused (no capability after all): no further tries.
    private let refused = Atomic<Bool>(false)
    /// The session's /dev/fuse descriptor, for the ioctls.
    let deviceFD = Atomic<Int32>(-1)
    /// How long an open for writing waits for passthrough readers to close.
    static let conflictWait: TimeInterval = 2

    private let condition = NSCondition()
    /// Nodes with passthrough handles (guarded by `condition`).
    private var backings: [UInt64: Backing] = [:]

    /// A registered backing file: its id, how many handles share it, whether it is a writer's
    /// staged (live) file rather than the stored version, and its device and inode numbers.
    private struct Backing {
        var id: Int32
        var handles: Int
        var staged: Bool
        var device: UInt64
        var inode: UInt64
        /// A descriptor of the backing file (`storedDescriptor`), closed with the last handle.
        var descriptor: Int32
    }

    init(wanted: Bool) { self.wanted = wanted }

    var active: Bool { negotiated.load(ordering: .relaxed) && !refused.load(ordering: .relaxed) }

    /// Files with passthrough handles now.
    var nodesInPassthrough: Int {
        condition.lock()
        defer { condition.unlock() }
        return backings.count
    }

    /// Whether this process may register backing files: CAP_SYS_ADMIN in its effective set, in
    /// the initial user namespace (the kernel's `capable`; a mount in a user namespace is refused).
    static func hasCapability() -> Bool {
        guard let map = try? String(contentsOfFile: "/proc/self/uid_map", encoding: .utf8),
            map.split(whereSeparator: \.isWhitespace) == ["0", "0", "4294967295"]
        else { return false }
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let bits = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return bits & (1 << 21) != 0
    }

    /// Admits a new handle on `ino` and counts it with `retain` (under the lock, so that no two
    /// opens decide apart). `backing`: a descriptor the handle may read (or, `staged`, write)
    /// through the kernel, or nil for a handle the daemon serves. `reading`: a read-only handle,
    /// which joins passthrough handles already there (reading what they opened) rather than wait;
    /// any writer joins a writer's staged copy (the kernel takes no other handle on the file). `othersOpen` says whether the node has
    /// other handles (which are then the daemon's). Returns the backing id to put in the open
    /// reply, or nil. Throws EBUSY for a handle the daemon must serve while passthrough readers
    /// stay open.
    func admit(
        ino: UInt64, backing: Int32?, reading: Bool, staged: Bool = false, othersOpen: () -> Bool,
        retain: () -> Void, log: Logger
    ) throws(ProviderError) -> Int32? {
        // Never negotiated: nothing to decide. Refused later: handles the daemon serves still
        // wait for the passthrough readers admitted before.
        guard negotiated.load(ordering: .relaxed) else { retain(); return nil }
        let backing = refused.load(ordering: .relaxed) ? nil : backing
        condition.lock()
        defer { condition.unlock() }
        if var existing = backings[ino] {
            if reading || existing.staged {
                existing.handles += 1
                backings[ino] = existing
                retain()
                return existing.id
            }
            try waitForReadersLocked(ino: ino)
        }
        guard let fd = backing, !othersOpen(), let id = register(fd, log: log) else { retain(); return nil }
        var st = stat()
        fstat(fd, &st)
        backings[ino] = Backing(
            id: id, handles: 1, staged: staged, device: UInt64(st.st_dev), inode: UInt64(st.st_ino), descriptor: dup(fd))
        retain()
        return id
    }

    /// The stored file passthrough readers of `ino` hold (its device and inode numbers), or nil
    /// when none do (no passthrough handle, or the backing file is already a live one), or when
    /// another node's passthrough handles hold the same file (a conflicted copy's contents, a
    /// link of this item's): written in place, it would change what that item's readers see.
    func storedBacking(ino: UInt64) -> (device: UInt64, inode: UInt64)? {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = backings[ino], !entry.staged else { return nil }
        let shared = backings.contains { $0.key != ino && $0.value.device == entry.device && $0.value.inode == entry.inode }
        return shared ? nil : (entry.device, entry.inode)
    }

    /// Whether another node's passthrough handles hold the file that `ino`'s do.
    func sharedElsewhere(ino: UInt64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = backings[ino] else { return false }
        return backings.contains { $0.key != ino && $0.value.device == entry.device && $0.value.inode == entry.inode }
    }

    /// A descriptor of the stored file passthrough readers of `ino` hold (the caller's to close),
    /// for a provider that makes it live when it is no longer the stored version
    /// (`LiveContentsProvider.adoptStaleContents`); nil as `storedBacking`.
    func storedDescriptor(ino: UInt64) -> Int32? {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = backings[ino], !entry.staged, entry.descriptor >= 0 else { return nil }
        let fd = dup(entry.descriptor)
        return fd >= 0 ? fd : nil
    }

    /// The readers' stored file became the node's live file (`LiveContentsProvider`): writers
    /// join it from now on. Nothing to do when the readers have all gone meanwhile.
    func madeLive(ino: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        backings[ino]?.staged = true
        condition.broadcast()
    }

    /// Passthrough readers of the stored contents have `ino` open: a writer would wait for them.
    func readersHold(ino: UInt64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return backings[ino].map { !$0.staged } ?? false
    }

    /// Before a writer stages a copy: waits for passthrough readers of the stored contents to
    /// close (a writer's staged copy is no obstacle: the writer joins it). EBUSY when they stay.
    func waitForReaders(ino: UInt64) throws(ProviderError) {
        guard negotiated.load(ordering: .relaxed) else { return }
        condition.lock()
        defer { condition.unlock() }
        try waitForReadersLocked(ino: ino)
    }

    private func waitForReadersLocked(ino: UInt64) throws(ProviderError) {
        guard let existing = backings[ino], !existing.staged else { return }
        // The readers' releases may be on their way (close(2) does not wait for them).
        let deadline = Date(timeIntervalSinceNow: Self.conflictWait)
        // Or until another writer made the readers' file live: this one joins it then.
        while backings[ino].map({ !$0.staged }) ?? false {
            if !condition.wait(until: deadline) { break }
        }
        if backings[ino].map({ !$0.staged }) ?? false {
            throw ProviderError.posix(EBUSY, "the file is open for reading through the kernel's passthrough")
        }
    }

    /// A passthrough handle on `ino` was released: the last one lets go of the backing file.
    func released(ino: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        guard let entry = backings[ino] else { return }
        if entry.handles > 1 {
            backings[ino]?.handles -= 1
            return
        }
        backings[ino] = nil
        if entry.descriptor >= 0 { close(entry.descriptor) }
        var id = UInt32(bitPattern: entry.id)
        _ = ioctl(deviceFD.load(ordering: .relaxed), ABI.backingClose, &id)
        condition.broadcast()
    }

    /// FUSE_DEV_IOC_BACKING_OPEN; nil (and passthrough off for the rest of the mount, said once)
    /// when the kernel refuses.
    private func register(_ fd: Int32, log: Logger) -> Int32? {
        var map = ABI.BackingMap(fd: fd)
        let id = ioctl(deviceFD.load(ordering: .relaxed), ABI.backingOpen, &map)
        if id > 0 { return id }
        let e = errno
        // Out of memory or descriptors is this file's trouble; anything else is the mount's.
        if e == ENOMEM || e == EMFILE || e == ENFILE { return nil }
        if !refused.exchange(true, ordering: .relaxed) {
            log.notice(
                "passthrough off: the kernel refused a backing file (\(ErrnoName.of(e))); file contents are read and written through the daemon")
        }
        return nil
    }

    // MARK: The open reply

    private static let pendingKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Answers an open with FOPEN_PASSTHROUGH and `backingID` (libfuse writes the reply through
    /// the custom writev on this thread, which amends it).
    func replyOpen(_ reply: consuming Reply, _ fi: UnsafePointer<fuse_file_info>, backingID: Int32) {
        pthread_setspecific(Self.pendingKey, UnsafeRawPointer(bitPattern: UInt(backingID)))
        reply.open(fi)
        pthread_setspecific(Self.pendingKey, nil)
    }

    /// The same for an open answered later (from the executor, on its thread).
    func replyOpen(_ reply: DeferredReply, _ fi: inout fuse_file_info, backingID: Int32) {
        pthread_setspecific(Self.pendingKey, UnsafeRawPointer(bitPattern: UInt(backingID)))
        reply.open(&fi)
        pthread_setspecific(Self.pendingKey, nil)
    }

    /// The same for a create answered with its staged file as the backing file
    /// (`Bridge.create`).
    func replyCreate(_ reply: consuming Reply, _ e: inout fuse_entry_param, _ fi: UnsafePointer<fuse_file_info>, backingID: Int32) {
        pthread_setspecific(Self.pendingKey, UnsafeRawPointer(bitPattern: UInt(backingID)))
        reply.create(&e, fi)
        pthread_setspecific(Self.pendingKey, nil)
    }

    /// Called with each reply before it is written: sets the passthrough flag and backing id in
    /// the open (or create) reply this thread is sending, if any.
    @inline(__always)
    static func amendOpenReply(_ iov: UnsafeMutablePointer<iovec>, count: Int32) {
        guard let pending = pthread_getspecific(pendingKey) else { return }
        guard count >= 2, let header = iov[0].iov_base, iov[0].iov_len >= MemoryLayout<fuse_out_header>.size,
            header.loadUnaligned(fromByteOffset: 4, as: Int32.self) == 0,
            let body = iov[1].iov_base
        else { return }
        // An open reply is fuse_open_out; a create reply is fuse_entry_out, then fuse_open_out.
        let openOut: Int
        switch iov[1].iov_len {
        case MemoryLayout<fuse_open_out>.size: openOut = 0
        case MemoryLayout<fuse_entry_out>.size + MemoryLayout<fuse_open_out>.size: openOut = MemoryLayout<fuse_entry_out>.size
        default: return
        }
        // fuse_open_out: fh (8 bytes), open_flags, then backing_id (Debian's header: padding).
        let flags = body.loadUnaligned(fromByteOffset: openOut + 8, as: UInt32.self)
        body.storeBytes(of: flags | ABI.openFlag, toByteOffset: openOut + 8, as: UInt32.self)
        body.storeBytes(of: Int32(truncatingIfNeeded: UInt(bitPattern: pending)), toByteOffset: openOut + 12, as: Int32.self)
    }
}
