import Foundation
import Synchronization
import DocFSProvider
import DocFSStore

/// One file's contents coming from the server into `staging/`. Each stream is one ranged
/// request from a chunk to the end of the file, written at its offset as it arrives; `ChunkPlan`
/// says where streams start and where one stops (at a chunk another stream has). A sequential
/// reader is served by one stream; a read far ahead of it starts another at its chunk. Readers
/// opened on the partial file wait on `arrival` for the range they read; when every chunk is in,
/// the store renames the file into `contents/` (the readers' descriptors stay valid: same inode).
final class ContentDownload: ContentTransfer {
    /// Fetches bytes `range` of the object into the file at the same offsets, reporting the
    /// bytes written so far after each piece; `progress` answers false to stop early. Returns the
    /// bytes written.
    typealias Fetch = @Sendable (_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Bool) async throws -> Int64

    package let row: Int64
    package let key: String
    package let contentVersion: UInt64
    package let size: Int64
    package let path: String
    package let arrival: ContentArrival

    private struct Stream {
        /// Where its claimed chunks end (it has claimed every chunk from its start to here).
        var claimedEnd: Int64
        var claimed: Int
        /// The end of what it wrote so far.
        var reached: Int64
        var stopped = false
    }
    private struct Work {
        var plan: ChunkPlan
        var streams: [Int: Stream] = [:]
        var nextStream = 0
        var workers = 0
        var done = 0
        var tries = 0
        var ended = false
    }
    private let work: Mutex<Work>
    private let fetch: Fetch
    /// Checks the whole file once every byte is in (its SHA-256 against the server's record):
    /// an answer is why it does not match, and the download fails with it.
    private let verify: (@Sendable (String) async -> String?)?
    /// Files up to one chunk reach their readers only after the check: not a byte of a damaged
    /// object is served. Larger ones stream as they arrive (a reader far into a 10 GiB file need
    /// not wait for all of it) and are checked whole at the end: what a reader took before is
    /// not checked yet (blocks with hashes of their own would check it: issue 27's blocks).
    private let holdsUntilVerified: Bool
    private let ended: @Sendable (ContentDownload, String?) -> Void

    /// How long a reader waits without a byte arriving before its read fails with EIO (the
    /// request itself goes on until the S3 client's read timeout). `DOCFS_DOWNLOAD_TIMEOUT`
    /// (seconds) changes it, for a slow link or a test of a server that hangs.
    static let stallTimeout: TimeInterval = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_TIMEOUT"], let value = Double(text), value > 0 { return value }
        return 30
    }()

    /// The unit streams claim and readers jump by: a read waits for at most the rest of its chunk
    /// before a stream started at that chunk reaches it. `DOCFS_DOWNLOAD_CHUNK` (bytes) changes it.
    static let chunkSize: Int64 = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_CHUNK"], let value = Int64(text), value >= 4096 { return value }
        return 8 << 20
    }()

    /// Requests at once for one file: one in order, the others started where readers jumped to.
    static let maxWorkers = 3

    /// A stream that fails (a connection reset, a server restarting) is started again from its
    /// first chunk not wholly written, after these pauses; when that many fail in a row without
    /// a whole chunk, the download fails.
    let retryDelays: [Duration]

    init(
        row: Int64, key: String, contentVersion: UInt64, size: Int64, path: String, chunkSize: Int64 = ContentDownload.chunkSize,
        stallTimeout: TimeInterval = ContentDownload.stallTimeout, retryDelays: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2)],
        fetch: @escaping Fetch, verify: (@Sendable (String) async -> String?)? = nil,
        ended: @escaping @Sendable (ContentDownload, String?) -> Void
    ) {
        self.verify = verify
        holdsUntilVerified = verify != nil && size <= chunkSize
        self.row = row
        self.key = key
        self.contentVersion = contentVersion
        self.size = size
        self.path = path
        self.fetch = fetch
        self.ended = ended
        self.retryDelays = retryDelays
        arrival = ContentArrival(size: size, stallTimeout: stallTimeout)
        work = Mutex(Work(plan: ChunkPlan(size: size, chunkSize: chunkSize)))
        arrival.whenWanted { [weak self] range in self?.want(range) }
    }

    /// Starts the first stream, from the first byte.
    package func start() {
        let empty = work.withLock { w -> Bool in
            if w.plan.count == 0 { w.ended = true; return true }
            w.workers += 1
            return false
        }
        if empty { ended(self, nil) } else { launchWorker() }
    }

    /// A reader waits for `range`: a chunk of it no stream is about to reach gets a stream of its
    /// own, if one is free (else the next stream to end starts there).
    private func want(_ range: Range<Int64>) {
        let spawn = work.withLock { w -> Bool in
            guard !w.ended, w.plan.want(range), w.workers < Self.maxWorkers else { return false }
            w.workers += 1
            return true
        }
        if spawn { launchWorker() }
    }

    private func launchWorker() {
        Task.detached { [self] in await runWorker() }
    }

    /// Streams, one after another, while the plan has somewhere to start one.
    private func runWorker() async {
        var failure: String?
        while failure == nil {
            let begun = work.withLock { w -> (id: Int, start: Int64)? in
                guard !w.ended else { return nil }
                let id = w.nextStream
                guard let first = w.plan.begin(id) else { return nil }
                w.nextStream += 1
                let start = w.plan.start(of: first)
                w.streams[id] = Stream(claimedEnd: min(size, start + w.plan.chunkSize), claimed: 1, reached: start)
                return (id, start)
            }
            guard let (id, start) = begun else { break }
            var written: Int64 = 0
            var problem: String?
            // Bytes that do not match their hash: asking again gets the same bytes (the next
            // open tries again, after the bucket is mended).
            var damaged = false
            do {
                written = try await fetch(start..<size) { [self] n in
                    // The bytes are right wherever they landed, claimed by this stream or not;
                    // a file checked whole is shown to its readers only once it matched.
                    if !holdsUntilVerified { arrival.arrived(start..<start + n) }
                    return advance(id, to: start + n)
                }
            } catch let mismatch as DownloadVerifier.Mismatch {
                problem = mismatch.message
                damaged = true
            } catch {
                problem = "\(error)"
            }
            let next = work.withLock { w -> (pause: Duration?, failure: String?) in
                guard let stream = w.streams.removeValue(forKey: id) else { return (nil, problem) }
                w.plan.end(id)
                let reached = max(stream.reached, start + written)
                if problem == nil && reached >= stream.claimedEnd {
                    w.done += stream.claimed
                    return (nil, nil)
                }
                let why =
                    problem ?? "the server sent \(reached - start) bytes from byte \(start) of the object (\(stream.claimedEnd - start) expected)"
                // The chunks it wrote whole count; the others go back to the plan for another stream.
                let first = w.plan.chunk(at: start)
                let whole = reached >= size ? stream.claimed : min(stream.claimed, w.plan.chunk(at: reached) - first)
                w.done += whole
                w.plan.release(first + whole..<first + stream.claimed)
                // Counted in a row: a stream that got a chunk in before it broke off (a request
                // deadline in a long download) starts the count again.
                if whole > 0 { w.tries = 0 }
                w.tries += 1
                guard w.tries <= retryDelays.count, !w.ended, !damaged else {
                    return (nil, w.tries > 1 ? "\(why) (tried \(w.tries) times)" : why)
                }
                return (retryDelays[w.tries - 1], nil)
            }
            failure = next.failure
            if let pause = next.pause { try? await Task.sleep(for: pause) }
        }
        // The first failure ends the download at once (readers get EIO); success waits for the last chunk.
        let report = work.withLock { w -> Bool in
            w.workers -= 1
            guard !w.ended else { return false }
            if failure != nil || (w.workers == 0 && w.done == w.plan.count) {
                w.ended = true
                return true
            }
            return false
        }
        if report {
            var problem = failure
            if problem == nil, let verify { problem = await verify(path) }
            if problem == nil, holdsUntilVerified { arrival.arrived(0..<size) }
            ended(self, problem)
        }
    }

    /// A stream's bytes reached `end`: it claims the chunks they entered, and stops (false) at
    /// one another stream has, or when the download ended.
    private func advance(_ id: Int, to end: Int64) -> Bool {
        work.withLock { w -> Bool in
            guard var stream = w.streams[id] else { return false }
            stream.reached = max(stream.reached, end)
            while stream.claimedEnd < end && !stream.stopped {
                if w.ended || !w.plan.advance(id, into: w.plan.chunk(at: stream.claimedEnd)) {
                    stream.stopped = true
                } else {
                    stream.claimed += 1
                    stream.claimedEnd = min(size, stream.claimedEnd + w.plan.chunkSize)
                }
            }
            w.streams[id] = stream
            return !stream.stopped
        }
    }
}
