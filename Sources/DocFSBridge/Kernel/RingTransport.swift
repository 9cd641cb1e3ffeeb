import CFuse
import Glibc
import Logging
import Synchronization

/// FUSE over io_uring (`-o io_uring`; kernel 6.14+ with the fuse module's `enable_uring` on).
///
/// Why: through /dev/fuse every request costs a read(2) and its reply a writev(2), each a sleep
/// and a wake-up of a daemon thread. Through the ring, the reply and the fetch of the next request
/// are one submission, and the kernel hands a request to a queue of the CPU that asked.
///
/// How, on top of libfuse 3.14 (which knows nothing of it):
/// - INIT: the custom read (`InitNegotiation.customIO`) shows this the INIT request; if the kernel
///   offers FUSE_OVER_IO_URING (flags2), the INIT reply asks for it. Without the offer (the module
///   parameter is N) one log line says so and /dev/fuse serves.
/// - Once the INIT reply is written, one `RingQueue` per possible CPU (the kernel's queue count)
///   registers its entries, each on a thread of its own. The kernel holds back every request until
///   all queues have an entry, then sends requests through the ring.
/// - A request from an entry goes to libfuse's `fuse_session_process_buf`, so the low-level ops
///   serve it as any other. Its reply reaches the custom writev like every reply: `reply` finds
///   the entry by the reply's unique id (replies may come later, from another thread) and copies
///   it into the entry; the queue's thread commits it and fetches the next request.
/// - Forgets, interrupts and notifications still travel through /dev/fuse, whose read loop stays.
final class RingTransport: @unchecked Sendable {
    struct SetupError: Error { let message: String; init(_ m: String) { message = m } }

    let log: Logger
    let entriesPerQueue: Int
    /// The INIT request's unique id while its reply is pending, else 0.
    private let pendingInit = Atomic<UInt64>(0)
    private let offered = Atomic<Bool>(false)
    /// Whether replies may belong to ring entries (set before the first registration).
    private let serving = Atomic<Bool>(false)
    /// Replies being copied into an entry (`reply`): `stop` frees the buffers only once none is.
    private let completing = Atomic<Int>(0)
    /// Requests handed to libfuse from the ring, for the log line at the end and tests.
    let served = Atomic<Int>(0)
    private let lock = Mutex<Void>(())
    /// unique id → (queue, entry) of each request from the ring whose reply is pending.
    private var inFlight: [UInt64: (queue: RingQueue, entry: Int)] = [:]
    private var queues: [RingQueue] = []
    private var session: OpaquePointer?
    private var fuseFD: Int32 = -1
    private var payloadSize = 0

    /// Whether the ring was asked for by name (the fallback's log line is a notice then).
    let asked: Bool
    /// Set once the session's loop has returned (or its unmount begun): a queue that then meets
    /// errors is ending with the connection, and must not signal the process. libfuse has put the
    /// default SIGTERM action back by then, so such a signal would kill the daemon mid-teardown.
    private let sessionEnding = Atomic<Bool>(false)

    init(log: Logger, asked: Bool = true, entriesPerQueue: Int = 8) {
        self.log = log
        self.asked = asked
        self.entriesPerQueue = entriesPerQueue
    }

    /// The session and its /dev/fuse descriptor, once mounted (before INIT is read).
    func attach(session: OpaquePointer, fd: Int32) {
        lock.withLock { _ in
            self.session = session; fuseFD = fd
        }
    }

    /// The number of queues the kernel expects: one per possible CPU.
    static func possibleCPUs() -> Int {
        if let text = try? String(contentsOfFile: "/sys/devices/system/cpu/possible", encoding: .utf8) {
            // "0-1" or "0,2-3": the highest number + 1.
            let last = text.split(whereSeparator: { $0 == "," || $0 == "-" || $0 == "\n" }).compactMap { Int($0) }.max()
            if let last { return last + 1 }
        }
        return Int(sysconf(Int32(_SC_NPROCESSORS_CONF)))
    }

    // MARK: INIT

    /// Each request read from /dev/fuse: notes the INIT request and whether the kernel offers the ring.
    @inline(__always)
    func sawRequest(_ buf: UnsafeRawPointer, length: Int) {
        let headerSize = MemoryLayout<fuse_in_header>.size
        // major, minor, max_readahead, flags, flags2 of fuse_init_in.
        guard length >= headerSize + 20,
            buf.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == FUSE_INIT.rawValue
        else { return }
        let flags = buf.loadUnaligned(fromByteOffset: headerSize + 12, as: UInt32.self)
        let flags2 = buf.loadUnaligned(fromByteOffset: headerSize + 16, as: UInt32.self)
        offered.store(
            flags & DOCFS_FUSE_INIT_EXT_BIT != 0 && flags2 & DOCFS_FUSE_OVER_IO_URING_FLAGS2 != 0,
            ordering: .relaxed)
        pendingInit.store(buf.loadUnaligned(fromByteOffset: 8, as: UInt64.self), ordering: .relaxed)
    }

    /// The INIT reply before it is written: asks for the ring when the kernel offered it. True
    /// when it did (then call `start` once the reply is written).
    @inline(__always)
    func amendInitReply(_ iov: UnsafeMutablePointer<iovec>, count: Int32) -> Bool {
        // fuse_init_out up to flags2 (offset 32).
        guard let body = InitNegotiation.initReplyBody(iov, count: count, pending: pendingInit, atLeast: 36) else { return false }
        guard offered.load(ordering: .relaxed) else {
            log.log(
                level: asked ? .notice : .debug,
                "io_uring: the kernel does not offer FUSE over io_uring (is /sys/module/fuse/parameters/enable_uring Y?); serving through /dev/fuse")
            return false
        }
        // The kernel wants each payload buffer to hold its largest request or reply.
        let maxWrite = Int(body.loadUnaligned(fromByteOffset: 20, as: UInt32.self))
        let maxPages = Int(body.loadUnaligned(fromByteOffset: 28, as: UInt16.self))
        // Once asked for, the kernel holds every request back until each queue has registered:
        // so the queues are made now, and the ring is asked for only if they all could be.
        do throws(SetupError) {
            try prepareQueues(payloadSize: max(8192, maxWrite, maxPages * 4096, 32 * 4096))
        } catch {
            log.notice("io_uring: could not set up the ring (\(error.message)); serving through /dev/fuse")
            return false
        }
        let flags = body.loadUnaligned(fromByteOffset: 12, as: UInt32.self)
        body.storeBytes(of: flags | DOCFS_FUSE_INIT_EXT_BIT, toByteOffset: 12, as: UInt32.self)
        let flags2 = body.loadUnaligned(fromByteOffset: 32, as: UInt32.self)
        body.storeBytes(of: flags2 | DOCFS_FUSE_OVER_IO_URING_FLAGS2, toByteOffset: 32, as: UInt32.self)
        return true
    }

    /// One queue per possible CPU, each with its io_uring and buffers, not yet registered.
    private func prepareQueues(payloadSize: Int) throws(SetupError) {
        try lock.withLock { _ throws(SetupError) in
            guard let session else { throw SetupError("no session") }
            guard queues.isEmpty else { return }
            var made: [RingQueue] = []
            do throws(SetupError) {
                for qid in 0..<Self.possibleCPUs() {
                    made.append(
                        try RingQueue(
                            qid: UInt16(qid), entries: entriesPerQueue, payloadSize: payloadSize,
                            fuseFD: fuseFD, session: session, transport: self))
                }
            } catch {
                for q in made { q.release() }
                throw error
            }
            queues = made
            self.payloadSize = payloadSize
        }
    }

    /// After the INIT reply that asked for the ring was written: the queues register, each on
    /// its thread.
    func start() {
        let made = lock.withLock { _ in queues }
        guard !made.isEmpty else { return }
        serving.store(true, ordering: .releasing)
        log.info("io_uring: registering \(made.count) queues of \(entriesPerQueue) entries (payload \(payloadSize >> 10) KiB each)")
        // Fault hook for tests only: DOCFS_TEST_RING_QUEUE_FAILS=QID makes that queue fail to start.
        let failing = getenv("DOCFS_TEST_RING_QUEUE_FAILS").flatMap { UInt16(String(cString: $0)) }
        for q in made { q.start(failing: q.qid == failing) }
    }

    // MARK: Requests and replies

    @inline(__always)
    func willServe(unique: UInt64, queue: RingQueue, entry: Int) {
        lock.withLock { _ in inFlight[unique] = (queue, entry) }
        served.add(1, ordering: .relaxed)
    }

    /// A reply on its way out: if its request came from the ring, it goes into that entry (and
    /// the bytes taken are returned); nil: write it to /dev/fuse.
    @inline(__always)
    func reply(_ iov: UnsafeMutablePointer<iovec>, count: Int32) -> Int? {
        // Counted before `serving` is read, as `stop` clears it before waiting for the count:
        // a reply that saw the ring serving finishes with its entry before the buffers go.
        completing.add(1, ordering: .sequentiallyConsistent)
        defer { completing.subtract(1, ordering: .sequentiallyConsistent) }
        guard serving.load(ordering: .sequentiallyConsistent), count >= 1, let header = iov[0].iov_base,
            iov[0].iov_len >= MemoryLayout<fuse_out_header>.size
        else { return nil }
        let unique = header.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        guard unique != 0 else {
            // A notification: replies this thread gave before it must reach the kernel first, as
            // through /dev/fuse (an entry invalidation waits for the folder lock that a request
            // still holds until its reply is committed: `KernelNotifier.invalidateEntryNow`).
            flushCommitsOfThisThread()
            return nil
        }
        guard let (queue, entry) = lock.withLock({ _ in inFlight.removeValue(forKey: unique) }) else { return nil }
        return queue.complete(entry, iov, count: count)
    }

    /// The calling thread is one of the queues' (which serve their CPU's requests inline).
    var servesThisThread: Bool { queueOfThisThread() != nil }

    /// The queue whose thread is the calling one, if any.
    private func queueOfThisThread() -> RingQueue? {
        lock.withLock { _ in queues }.first { $0.isCurrentThread }
    }

    private func flushCommitsOfThisThread() {
        queueOfThisThread()?.flushCommits()
    }

    // MARK: Queue events

    func queueRegistered(_ qid: UInt16) {
        log.debug("io_uring: queue \(qid) registered")
    }

    /// A queue that never registered: the kernel would hold every request until it had, so a
    /// registration it must refuse turns the ring off and /dev/fuse serves (one log line).
    func queueCouldNotStart(_ queue: RingQueue, _ reason: String) {
        if let res = queue.refuseRegistration(), res < 0 {
            log.warning("io_uring: queue \(queue.qid) could not start (\(reason)); serving through /dev/fuse")
        } else {
            // Nothing else turns the ring off: requests of this CPU would wait for ever.
            // As queueLostItsEntries: fuse_session_exit alone would leave the loop's read waiting.
            log.critical(
                "io_uring: queue \(queue.qid) could not start (\(reason)) and the kernel could not be told to serve through /dev/fuse; ending the session"
            )
            kill(getpid(), SIGTERM)
        }
    }

    /// A queue the kernel took every entry from while the connection lives: its CPU's requests
    /// would wait for ever, so the session ends as on SIGTERM (the executable's handler ends the
    /// loop; the daemon unmounts, and closing /dev/fuse ends the requests still held).
    func queueLostItsEntries(_ qid: UInt16) {
        if sessionEnding.load(ordering: .sequentiallyConsistent) {
            log.debug("io_uring: queue \(qid) lost its entries as the session ended")
            return
        }
        log.critical("io_uring: queue \(qid) lost all its entries; its CPU's requests cannot be served: ending the session")
        kill(getpid(), SIGTERM)
    }

    func queueFailed(_ qid: UInt16, _ message: String) {
        log.warning("io_uring: queue \(qid): \(message)")
    }

    func noteMalformed(length: Int, payload: Int) {
        log.error("io_uring: a request of \(length) bytes with a payload of \(payload) does not fit the ring's layout; answered EIO")
    }

    func queueEnded(_ qid: UInt16) {
        log.debug("io_uring: queue \(qid) ended")
    }

    /// The session's loop returned, or its unmount begins: what the queues meet from now on is
    /// the connection's end.
    func sessionEnds() {
        sessionEnding.store(true, ordering: .sequentiallyConsistent)
    }

    /// After unmounting: ends the queue threads and frees their rings and buffers.
    func stop() {
        let all = lock.withLock { _ -> [RingQueue] in
            defer { queues = [] }; return queues
        }
        guard !all.isEmpty else { return }
        for q in all { q.join() }
        serving.store(false, ordering: .sequentiallyConsistent)
        // A reply given on an executor's thread may still be inside `complete` (copying into an
        // entry, waking the eventfd): wait for it before the buffers and the eventfd go.
        while completing.load(ordering: .sequentiallyConsistent) != 0 { sched_yield() }
        lock.withLock { _ in inFlight.removeAll() }
        for q in all { q.release() }
        log.info("io_uring: \(served.load(ordering: .relaxed)) requests served through the ring")
    }
}
