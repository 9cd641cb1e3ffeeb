import CFuse
import Foundation
import Glibc
import DocFSProvider
import Synchronization

/// The staged copy of a file open for writing (a new file's other state until its import is
/// its `CopyIn`).
///
/// Writes never touch the stored contents: they go to a staging file on the store's filesystem,
/// which the provider takes over on close (import for a new file, a new content version for an
/// existing one) by renaming it. Readers of the old contents are never torn.
final class WriteSession: @unchecked Sendable {
    /// The staged file: -1 and "" while the bytes are in memory (`InMemoryCopy`). Set once, when
    /// the copy spills to a staged file, under `memoryLock`.
    private(set) var fd: Int32
    private(set) var path: String
    /// A small new file's bytes and times, kept in the daemon's memory until it grows past its
    /// bound (`spill`); nil once it is (or always was) a staged file. Guarded by `memoryLock`.
    private var memory: InMemoryCopy?
    private let memoryLock = Mutex<Void>(())
    /// Where a copy in memory gets its staged file when it spills.
    private let pool: StagingFilePool?
    /// Changed since the last commit (guarded by the node's sessionLock).
    var dirty: Bool
    /// Handed to the provider: the file is now the stored contents, and a further write must
    /// stage a fresh copy first (guarded by the node's sessionLock).
    var committed = false
    /// Whether this copy's first write looked for set-user/group-ID bits to clear (guarded by the
    /// node's sessionLock).
    var setIDChecked = false
    /// The stored item's version this copy began from (nil for a new file), and the version its
    /// commit made: the base of the provider's `modifyContents`, and of the next copy.
    var base: ItemVersion?
    var landed: ItemVersion?
    /// Tells the provider the file is no longer open for writing; passed on to the next copy of
    /// the same file, and called when the last one goes.
    var writer: WriterRegistration?
    /// The kernel writes this staged file itself (a passthrough writer's backing file): the
    /// daemon sees no write, so it is never handed to the provider while a handle is open (a
    /// commit takes a copy), and what changed is told by `stamp` (guarded by the node's sessionLock).
    var backing = false
    /// The staged file's stamp when a copy of it last went in (or was refused): nil until then.
    var committedStamp: Stamp?
    /// The last copy was refused (the file reads as its stored version once closed).
    var copyRefused = false

    /// What a write moves: size, modification and change time.
    struct Stamp: Equatable {
        var size: Int64, modified: timespec, changed: timespec
        static func == (a: Stamp, b: Stamp) -> Bool {
            a.size == b.size && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
                && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
        }
    }

    func stamp() -> Stamp? {
        status().map { Stamp(size: Int64($0.st_size), modified: $0.st_mtim, changed: $0.st_ctim) }
    }

    /// Written (through the kernel) since a copy of it last went in.
    func changedSinceCommit() -> Bool {
        guard let committedStamp else { return false }
        return stamp() != committedStamp
    }

    /// The staged file for the kernel to write (a passthrough writer), or nil for bytes in memory.
    var backingFD: Int32? { memoryLock.withLock { _ in memory == nil && fd >= 0 ? fd : nil } }

    /// A new staged file holding this one's bytes and modification time, for the provider to
    /// take while the kernel may still write this one.
    func copy(in pool: StagingFilePool, durable: Bool) throws(ProviderError) -> WriteSession {
        let copy = try WriteSession.stage(in: pool, copying: self, dirty: false)
        if let st = status() {
            var times = [timespec(tv_sec: 0, tv_nsec: Bridge.utimeOmit), st.st_mtim]
            _ = futimens(copy.fd, &times)
        }
        if durable { copy.sync() }
        return copy
    }

    /// The time an empty staged file was dated (its create's); its ctime is the kernel's coarse
    /// clock at that moment, a tick apart, so while its mtime still says this the file was not
    /// written and both times are this one.
    private(set) var emptyDatedAt: FileTime?

    /// Callers that found this copy's commit under way (set `committed`, provider not yet done)
    /// wait here, so none of them answers before the provider has the new contents.
    private let commitState = Mutex<(inFlight: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func beginCommit() { commitState.withLock { $0.inFlight = true } }

    var isCommitting: Bool { commitState.withLock { $0.inFlight } }

    func endCommit() {
        let waiters = commitState.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.inFlight = false
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no commit of this copy is under way.
    func waitForCommit() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = commitState.withLock { s -> Bool in
                if !s.inFlight { return true }
                s.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private init(fd: Int32, path: String, dirty: Bool, memory: InMemoryCopy? = nil, pool: StagingFilePool? = nil) {
        self.fd = fd
        self.path = path
        self.dirty = dirty
        self.memory = memory
        self.pool = pool
    }

    deinit {
        if fd >= 0 {
            close(fd)
            if !committed, !path.isEmpty { unlink(path) }
        }
        if let memory { InMemoryCopy.release(memory.bytes.count) }
        writer?.end()
    }

    /// A new empty staging file, or a copy of `source` (an open descriptor) when given. An empty
    /// one is dated `created` (now unless given).
    static func stage(
        in pool: StagingFilePool, copying source: Int32?, dirty: Bool,
        created: FileTime? = nil
    ) throws(ProviderError) -> WriteSession {
        let (fd, path) = try pool.take()
        let session = WriteSession(fd: fd, path: path, dirty: dirty)
        if let source {
            try FileDescriptors.copyAll(from: source, to: fd, what: "copy contents to staging file")
        } else {
            // The pool made this file a while ago: an empty file closed without a write (a
            // create, an O_TRUNC) must carry the time of that call, not the pool's.
            let dated = created ?? .now()
            let time = Attributes.timespec(dated)
            var times = [time, time]
            if futimens(fd, &times) == 0 { session.emptyDatedAt = dated }
        }
        return session
    }

    /// The provider's live file at `path` (`LiveContentsProvider`), changed in place: the
    /// kernel's passthrough readers already hold it. Removed when the session ends, as any staged file.
    static func adopting(_ path: String) throws(ProviderError) -> WriteSession {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw .posix(errno, "open live file \(path)") }
        return WriteSession(fd: fd, path: path, dirty: false)
    }

    /// The provider's live file without a name (`LiveContentsProvider.adoptStaleContents`), open
    /// for reading and writing as `fd`, which the session takes: gone with the last descriptor.
    static func adopting(descriptor fd: Int32) -> WriteSession {
        WriteSession(fd: fd, path: "", dirty: false)
    }

    /// A new empty file kept in memory while it has at most `limit` bytes (and all such files
    /// together at most `InMemoryCopy.budget`); past that it spills to a file from `pool`.
    /// Dated `created`, the create's time.
    static func inMemory(limit: Int, spillingTo pool: StagingFilePool, created: FileTime = .now()) -> WriteSession {
        WriteSession(fd: -1, path: "", dirty: true, memory: InMemoryCopy(limit: limit, created: created), pool: pool)
    }

    /// A new staging file holding a copy of `previous` (a file or in memory).
    static func stage(in pool: StagingFilePool, copying previous: WriteSession, dirty: Bool) throws(ProviderError) -> WriteSession {
        if let bytes = previous.memoryContents() {
            let (fd, path) = try pool.take()
            let session = WriteSession(fd: fd, path: path, dirty: dirty)
            try FileDescriptors.writeAll(bytes, to: fd, what: "write staging file")
            return session
        }
        return try stage(in: pool, copying: previous.fd, dirty: dirty)
    }

    // MARK: - The bytes, in memory or in the staged file

    /// The bytes while they are in memory (a copy); nil once the copy is a staged file.
    func memoryContents() -> [UInt8]? {
        memoryLock.withLock { _ in memory?.bytes }
    }

    /// Moves the bytes in memory to a staged file (with the modification time they had); nothing
    /// to do for a staged file. Call with `memoryLock` held.
    private func spillLocked() throws(ProviderError) {
        guard let copy = memory, let pool else { return }
        let (newFD, newPath) = try pool.take()
        do throws(ProviderError) { try FileDescriptors.writeAll(copy.bytes, to: newFD, what: "write staging file") } catch {
            close(newFD)
            unlink(newPath)
            throw error
        }
        var times = [timespec(tv_sec: 0, tv_nsec: Bridge.utimeOmit), Attributes.timespec(copy.modified)]
        _ = futimens(newFD, &times)
        fd = newFD
        path = newPath
        memory = nil
        InMemoryCopy.release(copy.bytes.count)
    }

    /// A staged file for the provider to take by path (the bytes in memory spill first).
    func stagedPath() throws(ProviderError) -> String {
        try memoryLock.withLock { _ throws(ProviderError) -> String in
            try spillLocked()
            return path
        }
    }

    /// `fstat` of the staged file, or the same fields for bytes in memory.
    func status() -> stat? {
        memoryLock.withLock { _ -> stat? in
            var st = stat()
            if let copy = memory {
                st.st_mode = S_IFREG | 0o600
                st.st_nlink = 1
                st.st_size = off_t(copy.bytes.count)
                st.st_blksize = 4096
                st.st_blocks = blkcnt_t((copy.bytes.count + 511) / 512)
                st.st_mtim = Attributes.timespec(copy.modified)
                st.st_ctim = Attributes.timespec(copy.changed)
                st.st_atim = Attributes.timespec(copy.accessed)
                return st
            }
            return fstat(fd, &st) == 0 ? st : nil
        }
    }

    /// `status()` as stat(2) reports it: a staged file not written since it was dated carries
    /// that time as its ctime too (the kernel's coarse clock put the real one a tick later).
    func reportedStatus() -> stat? {
        guard var st = status() else { return nil }
        if let dated = emptyDatedAt, Attributes.fileTime(st.st_mtim) == dated { st.st_ctim = st.st_mtim }
        return st
    }

    /// Reads up to `size` bytes at `offset` into `buffer`, as `pread`.
    func read(into buffer: UnsafeMutableRawPointer, _ size: Int, at offset: Int) -> Int {
        let inMemory: Int? = memoryLock.withLock { _ in
            guard let copy = memory else { return nil }
            guard offset < copy.bytes.count else { return 0 }
            let n = min(size, copy.bytes.count - offset)
            copy.bytes.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
            return n
        }
        if let inMemory { return inMemory }
        return pread(fd, buffer, size, off_t(offset))
    }

    /// Puts a write request's bytes at `offset` (see the static `put`): into memory while the
    /// copy stays within its bounds, else into the staged file (spilling the memory first).
    func put(_ source: UnsafeMutablePointer<fuse_bufvec>, at offset: Int) -> (written: Int, errno: Int32) {
        // Nil: the bytes go to the staged file, written after the lock is let go (as `read` does).
        let inMemory: (written: Int, errno: Int32)? = memoryLock.withLock { _ in
            guard var copy = memory else { return nil }
            memory = nil // not shared while it changes (no copy of the bytes)
            let size = fuse_buf_size(source)
            let end = offset + size
            if copy.grow(to: end) {
                var done = 0
                while done < size {
                    var target = fuse_bufvec()
                    target.count = 1
                    target.buf.size = size - done
                    let n = copy.bytes.withUnsafeMutableBytes { bytes -> Int in
                        target.buf.mem = bytes.baseAddress! + offset + done
                        return fuse_buf_copy(&target, source, fuse_buf_copy_flags(rawValue: 0))
                    }
                    if n == -Int(EINTR) { continue }
                    if n <= 0 { break }
                    done += n
                }
                if done < size { copy.shrink(to: max(copy.previousSize, offset + done)) }
                let now = FileTime.now()
                copy.modified = now
                copy.changed = now
                memory = copy
                return (done, done < size ? EIO : 0)
            }
            memory = copy
            do throws(ProviderError) { try spillLocked() } catch {
                return (0, error.errno == 0 ? EIO : error.errno)
            }
            return nil
        }
        if let inMemory { return inMemory }
        return Self.put(source, into: fd, at: offset)
    }

    /// ftruncate; 0 or the errno.
    func truncate(to size: Int64) -> Int32 {
        memoryLock.withLock { _ -> Int32 in
            if var copy = memory {
                memory = nil // not shared while it changes
                let previous = copy.bytes.count
                if Int(size) <= previous || copy.grow(to: Int(size)) {
                    if Int(size) < previous { copy.shrink(to: Int(size)) }
                    let now = FileTime.now()
                    copy.modified = now
                    copy.changed = now
                    memory = copy
                    return 0
                }
                memory = copy
                do throws(ProviderError) { try spillLocked() } catch { return error.errno == 0 ? EIO : error.errno }
            }
            return ftruncate(fd, off_t(size)) == 0 ? 0 : errno
        }
    }

    /// Sets the modification time (futimens; the change time moves to now).
    func setModificationTime(_ time: FileTime) {
        memoryLock.withLock { _ in
            if var copy = memory {
                copy.modified = time
                copy.changed = FileTime.now()
                memory = copy
                return
            }
            var times = [timespec(tv_sec: 0, tv_nsec: Bridge.utimeOmit), Attributes.timespec(time)]
            _ = futimens(fd, &times)
        }
    }

    /// fsync of the staged file (bytes in memory have nothing to sync: the provider's
    /// `synchronize` makes the import durable).
    func sync() {
        let fd = memoryLock.withLock { _ in memory == nil ? self.fd : -1 }
        if fd >= 0 { Glibc.fsync(fd) }
    }

    /// What the next copy of the same file starts from: this one's version and registration.
    func handOver(to next: WriteSession) {
        next.base = landed ?? base
        next.writer = writer
        writer = nil
    }

    /// Puts a write request's bytes into `fd` at `offset`: libfuse's buffer is memory (pwrite),
    /// or for a large request with splice a pipe, which splice(2) empties into the file (from the
    /// kernel's pages to the staged file's page cache: the bytes never pass through the daemon's
    /// memory). Returns how many bytes landed, and the errno that stopped it short (0 when all did).
    static func put(_ source: UnsafeMutablePointer<fuse_bufvec>, into fd: Int32, at offset: Int) -> (written: Int, errno: Int32) {
        let size = fuse_buf_size(source)
        var done = 0
        while done < size {
            var target = fuse_bufvec()
            target.count = 1
            target.buf.size = size - done
            target.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue | FUSE_BUF_FD_SEEK.rawValue)
            target.buf.fd = fd
            target.buf.pos = off_t(offset + done)
            // Advances `source` past what it copied, so a short copy goes on where it stopped.
            let n = fuse_buf_copy(&target, source, fuse_buf_copy_flags(rawValue: 0))
            if n < 0 {
                if n == -Int(EINTR) { continue }
                return (done, Int32(-n))
            }
            if n == 0 { return (done, EIO) }
            done += n
        }
        return (done, 0)
    }
}

/// A file open for writing, as a replica was told (`contentsOpenedForWriting`); `end` tells it
/// the writer let go, once.
final class WriterRegistration: Sendable {
    private let ended: @Sendable () -> Void
    private let done = Atomic<Bool>(false)

    init(_ identifier: ItemIdentifier, provider: any OpenWritersProvider) {
        provider.contentsOpenedForWriting(of: identifier)
        ended = { provider.contentsClosedForWriting(of: identifier) }
    }

    func end() {
        if !done.exchange(true, ordering: .relaxed) { ended() }
    }
}

/// The bytes and times of a small new file kept in the daemon's memory (`WriteSession.inMemory`).
/// What all of them hold together is bounded by `budget`; a copy that would pass its own `limit`
/// or the budget spills to a staged file.
struct InMemoryCopy {
    /// All copies in memory together, at most (64 MiB).
    static let budget = 64 << 20
    private static let used = Atomic<Int>(0)
    /// Bytes all copies in memory hold now (for tests and the log).
    static var inUse: Int { used.load(ordering: .relaxed) }

    let limit: Int
    var bytes: [UInt8] = []
    var modified: FileTime
    var changed: FileTime
    let accessed: FileTime
    /// The size before the last `grow` (to undo a short write).
    var previousSize = 0

    init(limit: Int, created: FileTime = .now()) {
        self.limit = limit
        modified = created
        changed = created
        accessed = created
    }

    /// Makes room for `size` bytes (zeros past the old end), within the limit and the budget;
    /// false when the copy must spill instead.
    mutating func grow(to size: Int) -> Bool {
        previousSize = bytes.count
        guard size > bytes.count else { return true }
        guard size <= limit else { return false }
        let more = size - bytes.count
        guard Self.used.wrappingAdd(more, ordering: .relaxed).newValue <= Self.budget else {
            Self.used.wrappingSubtract(more, ordering: .relaxed)
            return false
        }
        bytes += [UInt8](repeating: 0, count: more)
        return true
    }

    mutating func shrink(to size: Int) {
        guard size < bytes.count else { return }
        Self.release(bytes.count - size)
        bytes.removeLast(bytes.count - size)
    }

    static func release(_ count: Int) {
        if count > 0 { used.wrappingSubtract(count, ordering: .relaxed) }
    }
}
