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
    let fd: Int32
    let path: String
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

    private init(fd: Int32, path: String, dirty: Bool) {
        self.fd = fd
        self.path = path
        self.dirty = dirty
    }

    deinit {
        close(fd)
        if !committed { unlink(path) }
        writer?.end()
    }

    /// A new empty staging file, or a copy of `source` (an open descriptor) when given.
    static func stage(in pool: StagingFilePool, copying source: Int32?, dirty: Bool) throws(ProviderError) -> WriteSession {
        let (fd, path) = try pool.take()
        let session = WriteSession(fd: fd, path: path, dirty: dirty)
        if let source {
            try copyAll(from: source, to: fd)
        }
        return session
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

    var size: Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    private static func copyAll(from src: Int32, to dst: Int32) throws(ProviderError) {
        var inOff = 0
        var outOff = 0
        while true {
            let n = docfs_copy_file_range(src, &inOff, dst, &outOff, 1 << 30, 0)
            if n > 0 { continue }
            if n == 0 { return }
            let e = errno
            if e == EINTR { continue }
            if e == EXDEV || e == ENOSYS || e == EINVAL || e == EOPNOTSUPP {
                try copyByReading(from: src, to: dst, offset: inOff)
                return
            }
            throw .posix(e, "copy contents to staging file")
        }
    }

    private static func copyByReading(from src: Int32, to dst: Int32, offset start: Int) throws(ProviderError) {
        let buf = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buf.deallocate() }
        var off = start
        while true {
            let n = pread(src, buf, 1 << 20, off)
            if n < 0 { if errno == EINTR { continue }; throw .posix(errno, "read contents") }
            if n == 0 { return }
            var done = 0
            while done < n {
                let w = pwrite(dst, buf + done, n - done, off + done)
                if w < 0 { if errno == EINTR { continue }; throw .posix(errno, "write staging file") }
                done += w
            }
            off += n
        }
    }
}


/// A file open for writing, as a replica was told (`contentsOpenedForWriting`); `end` tells it
/// the writer let go, once.
final class WriterRegistration: Sendable {
    private let ended: @Sendable () -> Void
    private let done = Atomic<Bool>(false)

    init(_ identifier: ItemIdentifier, provider: any ReplicaProvider) {
        provider.contentsOpenedForWriting(of: identifier)
        ended = { provider.contentsClosedForWriting(of: identifier) }
    }

    func end() {
        if !done.exchange(true, ordering: .relaxed) { ended() }
    }
}
