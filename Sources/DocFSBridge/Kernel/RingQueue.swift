import CFuse
import Glibc
import Synchronization

/// One queue of FUSE over io_uring (see `RingTransport`): an io_uring of its own, `entries`
/// ring entries registered with the kernel for queue `qid`, and a thread that waits for requests
/// in them, hands each to libfuse and commits the reply with a fetch of the next request (one
/// submission for both).
///
/// An entry is a header buffer (`docfs_fuse_uring_req_header`: the request's fuse_in_header, its
/// first argument, the payload's size) and a payload buffer (the other arguments, then the reply's
/// arguments). The payload sits `headroom` bytes into its mapping, so the request can be laid out
/// in one piece (header and first argument copied in just before the payload) for
/// `fuse_session_process_buf` without copying a write's bytes.
///
/// Only this thread submits to the ring, replies given on other threads included (they wake it
/// through the eventfd). The kernel copies an entry's next request into it from the task that
/// submitted the entry's last command (task work), and cancels that task's entries when it
/// exits: a commit submitted by an executor thread would make the entry's next request wait
/// whenever that thread sleeps uninterruptibly (an fsync), and lose the entry when the thread
/// pool retires the thread. This thread always waits in `io_uring_enter`, and lives as long as
/// the ring.
final class RingQueue: @unchecked Sendable {
    let qid: UInt16
    let fuseFD: Int32
    private let session: OpaquePointer
    private let transport: RingTransport
    private let payloadSize: Int
    private static let headroom = 4096
    private static let headerSize = MemoryLayout<docfs_fuse_uring_req_header>.size
    /// user_data of the eventfd read that wakes the thread (entries use their index).
    private static let wakeTag = UInt64.max
    /// user_data of the deliberately refused REGISTER (`refuseRegistration`).
    private static let refuseTag = UInt64.max - 1

    private var ring = io_uring()
    private let eventFD: Int32
    private var wakeBuffer: UInt64 = 0
    private let headers: [UnsafeMutableRawPointer]
    private let mappings: [UnsafeMutableRawPointer]
    private let iovecs: UnsafeMutablePointer<iovec>
    private let commitIDs: UnsafeMutablePointer<UInt64>
    /// Per entry, on the queue's thread only: whether its last command was a REGISTER (else a
    /// COMMIT_AND_FETCH), and how often in a row the kernel asked for it again.
    private var registering: [Bool]
    private var retries: [UInt8]
    /// A command the kernel answers with EAGAIN or EINTR is sent again, at most this often in a
    /// row (as libfuse's ring does): after that the entry counts as refused.
    private static let retryLimit: UInt8 = 16
    /// Entries whose reply is in their buffers, waiting for the thread to commit them.
    private let ready = Mutex<[Int]>([])
    private var thread: pthread_t?
    private let threadID = Atomic<UInt>(0)
    private let stopping = Atomic<Bool>(false)

    /// Sets up the io_uring and the buffers; throws the reason when the kernel refuses.
    init(
        qid: UInt16, entries: Int, payloadSize: Int, fuseFD: Int32, session: OpaquePointer,
        transport: RingTransport
    ) throws(RingTransport.SetupError) {
        self.qid = qid
        self.fuseFD = fuseFD
        self.session = session
        self.transport = transport
        self.payloadSize = (payloadSize + 4095) & ~4095
        let rc = docfs_uring_init(&ring, UInt32(max(8, entries * 2)))
        guard rc == 0 else { throw .init("io_uring_setup failed: \(String(cString: strerror(-rc)))") }
        let efd = eventfd(0, Int32(EFD_CLOEXEC))
        guard efd >= 0 else {
            docfs_uring_exit(&ring)
            throw .init("eventfd failed: \(String(cString: strerror(errno)))")
        }
        eventFD = efd
        iovecs = .allocate(capacity: 2 * entries)
        commitIDs = .allocate(capacity: entries)
        commitIDs.initialize(repeating: 0, count: entries)
        var headers: [UnsafeMutableRawPointer] = []
        var mappings: [UnsafeMutableRawPointer] = []
        for i in 0..<entries {
            let header = UnsafeMutableRawPointer.allocate(byteCount: Self.headerSize, alignment: 64)
            header.initializeMemory(as: UInt8.self, repeating: 0, count: Self.headerSize)
            // Mapped, not malloc'ed: the pages a request never touches are never faulted in.
            let m = mmap(nil, Self.headroom + self.payloadSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            guard let m, m != MAP_FAILED else {
                header.deallocate()
                for h in headers { h.deallocate() }
                for p in mappings { munmap(p, Self.headroom + self.payloadSize) }
                iovecs.deallocate(); commitIDs.deallocate()
                close(efd); docfs_uring_exit(&ring)
                throw .init("mmap of ring buffers failed")
            }
            headers.append(header)
            mappings.append(m)
            iovecs[2 * i] = iovec(iov_base: header, iov_len: Self.headerSize)
            iovecs[2 * i + 1] = iovec(iov_base: m + Self.headroom, iov_len: self.payloadSize)
        }
        self.headers = headers
        self.mappings = mappings
        registering = Array(repeating: true, count: entries)
        retries = Array(repeating: 0, count: entries)
    }

    /// Frees the ring and buffers: only after `join()`, once the kernel let go of the entries
    /// (unmounted) or never had them.
    func release() {
        docfs_uring_exit(&ring)
        close(eventFD)
        for h in headers { h.deallocate() }
        for m in mappings { munmap(m, Self.headroom + payloadSize) }
        iovecs.deallocate()
        commitIDs.deallocate()
    }

    // MARK: The thread

    /// Starts the thread; `failing` (a fault hook for tests) makes it fail as if it could not.
    func start(failing: Bool = false) {
        let box = Unmanaged.passRetained(self).toOpaque()
        var tid = pthread_t()
        let rc =
            failing
            ? EAGAIN
            : pthread_create(
                &tid, nil,
                { arg in
                    let queue = Unmanaged<RingQueue>.fromOpaque(arg!).takeRetainedValue()
                    queue.run()
                    return nil
                }, box)
        if rc == 0 {
            thread = tid
        } else {
            Unmanaged<RingQueue>.fromOpaque(box).release()
            transport.queueCouldNotStart(self, "pthread_create failed: \(String(cString: strerror(rc)))")
        }
    }

    /// A REGISTER the kernel must refuse (a queue id no CPU has), sent from the calling thread
    /// on this queue's ring while its own thread does not run: a refused registration turns the
    /// ring off for the connection and the kernel serves through /dev/fuse, where it would
    /// otherwise hold every request until this queue had an entry. The kernel's answer, or nil
    /// when it could not be sent.
    func refuseRegistration() -> Int32? {
        guard
            docfs_uring_prep_fuse_cmd(
                &ring, fuseFD, UInt32(DOCFS_FUSE_IO_URING_CMD_REGISTER), UInt16.max, 0,
                iovecs, Self.refuseTag) == 0
        else { return nil }
        guard docfs_uring_submit_and_wait(&ring, 1) >= 0 else { return nil }
        var tag: UInt64 = 0, res: Int32 = 0
        while docfs_uring_reap(&ring, &tag, &res, 1) == 1 {
            if tag == Self.refuseTag { return res }
        }
        return nil
    }

    /// Asks the thread to end (at its next wake-up) and waits for it.
    func join() {
        stopping.store(true, ordering: .relaxed)
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(eventFD, &one, 8)
    }

    private func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        pinToCPU()
        let entries = headers.count
        for i in 0..<entries {
            _ = docfs_uring_prep_fuse_cmd(
                &ring, fuseFD, UInt32(DOCFS_FUSE_IO_URING_CMD_REGISTER), qid, 0,
                iovecs + 2 * i, UInt64(i))
        }
        _ = docfs_uring_prep_read(&ring, eventFD, &wakeBuffer, 8, Self.wakeTag)
        // Registered once submitted: a refusal comes back as a completion with an error.
        let submitted = docfs_uring_submit_and_wait(&ring, 0)
        guard submitted >= 0 else {
            transport.queueCouldNotStart(self, "io_uring_enter failed: \(String(cString: strerror(-submitted)))")
            transport.queueEnded(qid)
            return
        }
        transport.queueRegistered(qid)
        var live = entries
        let reapMax = UInt32(entries + 1)
        let tags = UnsafeMutablePointer<UInt64>.allocate(capacity: Int(reapMax))
        let results = UnsafeMutablePointer<Int32>.allocate(capacity: Int(reapMax))
        defer { tags.deallocate(); results.deallocate() }
        var pending: [Int] = []
        pending.reserveCapacity(entries)
        // Entries the kernel refused (not the connection's end): with none left, this CPU's
        // requests would wait for ever.
        var refused = 0
        // Fault hook for tests only: this queue's first completed request counts as refused.
        let loseEntries = getenv("DOCFS_TEST_RING_ENTRIES_LOST").flatMap { UInt16(String(cString: $0)) } == qid
        while live > 0 {
            let rc = docfs_uring_submit_and_wait(&ring, 1)
            if rc < 0, rc != -EINTR, rc != -EAGAIN, rc != -EBUSY {
                transport.queueFailed(qid, "io_uring_enter failed: \(String(cString: strerror(-rc)))")
                break
            }
            let n = Int(docfs_uring_reap(&ring, tags, results, reapMax))
            var wokenToStop = false
            for k in 0..<n {
                let tag = tags[k], res = results[k]
                if tag == Self.wakeTag {
                    if stopping.load(ordering: .relaxed) { wokenToStop = true; continue }
                    _ = docfs_uring_prep_read(&ring, eventFD, &wakeBuffer, 8, Self.wakeTag)
                    continue
                }
                let index = Int(tag)
                if loseEntries, res >= 0 {
                    // Lost as the kernel would lose it: never answered by this queue again.
                    live -= 1; refused += 1
                    continue
                }
                if res == -EAGAIN || res == -EINTR, retries[index] < Self.retryLimit {
                    // Not lost: the kernel asks for the same command again (a REGISTER before the
                    // connection's INIT settled, an interrupted wait).
                    retries[index] += 1
                    resend(index)
                    continue
                }
                if res < 0 {
                    // ENOTCONN/ECANCELED: the connection ends; so does EBADF, which a commit
                    // meets once the device's connection is gone at unmount (seen as the other
                    // queue ended); anything else: the kernel refused the entry (a refused
                    // registration turns the ring off for the connection).
                    live -= 1
                    if res != -ENOTCONN, res != -ECANCELED, res != -EBADF {
                        refused += 1
                        transport.queueFailed(qid, "the kernel refused ring entry \(index): \(String(cString: strerror(-res)))")
                    }
                    continue
                }
                retries[index] = 0
                serve(index)
            }
            if wokenToStop { break }
            // Replies given on this thread (most) were noted in `ready` by `complete`, as were
            // those given later on other threads (which then woke this one).
            ready.withLock { swap(&pending, &$0) }
            for index in pending { prepCommit(index) }
            pending.removeAll(keepingCapacity: true)
            if live == 0, refused > 0, !stopping.load(ordering: .relaxed) {
                transport.queueLostItsEntries(qid)
                break
            }
        }
        transport.queueEnded(qid)
    }

    /// The kernel put a request in entry `index`: lay it out in one piece and let libfuse
    /// dispatch it. Its reply comes back through `complete` (now or later, on any thread).
    private func serve(_ index: Int) {
        let header = headers[index]
        let payload = mappings[index] + Self.headroom
        let length = Int(header.load(fromByteOffset: 0, as: UInt32.self))
        let unique = header.load(fromByteOffset: 8, as: UInt64.self)
        let payloadBytes = Int(header.load(fromByteOffset: 256 + 16, as: UInt32.self))
        commitIDs[index] = header.load(fromByteOffset: 256 + 8, as: UInt64.self)
        let inHeader = MemoryLayout<fuse_in_header>.size
        let firstArgument = length - inHeader - payloadBytes
        guard firstArgument >= 0, firstArgument <= 128, payloadBytes <= payloadSize else {
            // Not a layout this code knows: answer EIO rather than guess.
            transport.noteMalformed(length: length, payload: payloadBytes)
            var out = fuse_out_header(len: UInt32(MemoryLayout<fuse_out_header>.size), error: -EIO, unique: unique)
            memcpy(header, &out, MemoryLayout<fuse_out_header>.size)
            header.storeBytes(of: UInt32(0), toByteOffset: 256 + 16, as: UInt32.self)
            ready.withLock { $0.append(index) }
            return
        }
        let start = payload - inHeader - firstArgument
        memcpy(start, header, inHeader)
        if firstArgument > 0 { memcpy(start + inHeader, header + 128, firstArgument) }
        transport.willServe(unique: unique, queue: self, entry: index)
        var buf = fuse_buf()
        buf.size = length
        buf.mem = start
        fuse_session_process_buf(session, &buf)
    }

    /// The kernel puts a request in the queue of the CPU its caller runs on: serving it on the
    /// same CPU keeps the caller's data in that CPU's cache and saves a cross-CPU wake-up. A CPU
    /// that is possible but offline refuses the mask; the thread then runs anywhere.
    private func pinToCPU() {
        _ = docfs_pin_thread_to_cpu(UInt32(qid))
    }

    var isCurrentThread: Bool { threadID.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// On the queue's own thread: submits the commits of the replies given so far, now rather
    /// than when the request being served returns.
    func flushCommits() {
        let indices = ready.withLock { list -> [Int] in
            defer { list.removeAll(keepingCapacity: true) }; return list
        }
        guard !indices.isEmpty else { return }
        for index in indices { prepCommit(index) }
        _ = docfs_uring_submit_and_wait(&ring, 0)
    }

    private func prepCommit(_ index: Int) {
        registering[index] = false
        _ = docfs_uring_prep_fuse_cmd(
            &ring, fuseFD, UInt32(DOCFS_FUSE_IO_URING_CMD_COMMIT_AND_FETCH),
            qid, commitIDs[index], iovecs + 2 * index, UInt64(index))
    }

    /// The entry's last command once more (its REGISTER, or the commit of its reply with the
    /// same commit id), submitted with the next wait.
    private func resend(_ index: Int) {
        if registering[index] {
            _ = docfs_uring_prep_fuse_cmd(
                &ring, fuseFD, UInt32(DOCFS_FUSE_IO_URING_CMD_REGISTER), qid, 0,
                iovecs + 2 * index, UInt64(index))
        } else {
            prepCommit(index)
        }
    }

    /// libfuse's reply for entry `index` (through the custom writev): the out header into the
    /// header buffer, the rest into the payload; the thread commits it. Returns the bytes taken.
    func complete(_ index: Int, _ iov: UnsafeMutablePointer<iovec>, count: Int32) -> Int {
        let header = headers[index]
        let payload = mappings[index] + Self.headroom
        let outHeader = MemoryLayout<fuse_out_header>.size
        var total = 0
        guard count >= 1 else { return 0 }
        for k in 0..<Int(count) { total += iov[k].iov_len }
        if total - outHeader > payloadSize || iov[0].iov_len < outHeader {
            var out = header.load(as: fuse_out_header.self)
            out.error = -EIO
            memcpy(header, &out, outHeader)
            header.storeBytes(of: UInt32(0), toByteOffset: 256 + 16, as: UInt32.self)
        } else {
            memcpy(header, iov[0].iov_base, outHeader)
            var at = 0
            // The first iovec may carry arguments after the out header.
            if iov[0].iov_len > outHeader {
                memmove(payload, iov[0].iov_base! + outHeader, iov[0].iov_len - outHeader)
                at = iov[0].iov_len - outHeader
            }
            for k in 1..<Int(count) where iov[k].iov_len > 0 {
                memmove(payload + at, iov[k].iov_base, iov[k].iov_len)
                at += iov[k].iov_len
            }
            header.storeBytes(of: UInt32(at), toByteOffset: 256 + 16, as: UInt32.self)
        }
        ready.withLock { $0.append(index) }
        if !isCurrentThread { wake() }
        return total
    }
}
