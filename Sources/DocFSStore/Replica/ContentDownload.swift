import Foundation
import Synchronization
import DocFSProvider

/// One file's contents coming from the server into `staging/`, in chunks fetched by ranged
/// requests (`ChunkPlan` orders them). Readers opened on the partial file wait on `arrival` for
/// the range they read, and a read of a chunk no one fetches yet starts a worker on it; when
/// the last chunk is in, the store renames the file into `contents/` (the readers' descriptors
/// stay valid: same inode).
final class ContentDownload: Sendable {
    /// Fetches `range` of the object into the file at the same offset, reporting the bytes of it
    /// written so far; returns how many it wrote.
    typealias FetchChunk = @Sendable (_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Void) async throws -> Int64

    let row: Int64
    let key: String
    let contentVersion: UInt64
    let size: Int64
    let path: String
    let arrival: ContentArrival

    private struct Work {
        var plan: ChunkPlan
        var workers = 0
        var done = 0
        var ended = false
    }
    private let work: Mutex<Work>
    private let fetch: FetchChunk
    private let ended: @Sendable (ContentDownload, String?) -> Void

    /// How long a reader waits without a byte arriving before its read fails with EIO (the
    /// request itself goes on until the S3 client's read timeout). `DOCFS_DOWNLOAD_TIMEOUT`
    /// (seconds) changes it, for a slow link or a test of a server that hangs.
    static let stallTimeout: TimeInterval = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_TIMEOUT"], let value = Double(text), value > 0 { return value }
        return 30
    }()

    /// Bytes per ranged request: large enough that a sequential reader is not slowed by
    /// requests, small enough that a read far into a file waits for little more than its own
    /// bytes. `DOCFS_DOWNLOAD_CHUNK` (bytes) changes it.
    static let chunkSize: Int64 = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_CHUNK"], let value = Int64(text), value >= 4096 { return value }
        return 8 << 20
    }()

    /// Requests at once for one file: one going on in order, the others jumping to where readers are.
    static let maxWorkers = 3

    init(row: Int64, key: String, contentVersion: UInt64, size: Int64, path: String, chunkSize: Int64 = ContentDownload.chunkSize,
         stallTimeout: TimeInterval = ContentDownload.stallTimeout,
         fetch: @escaping FetchChunk, ended: @escaping @Sendable (ContentDownload, String?) -> Void) {
        self.row = row
        self.key = key
        self.contentVersion = contentVersion
        self.size = size
        self.path = path
        self.fetch = fetch
        self.ended = ended
        arrival = ContentArrival(size: size, stallTimeout: stallTimeout)
        work = Mutex(Work(plan: ChunkPlan(size: size, chunkSize: chunkSize)))
        arrival.whenWanted { [weak self] range in self?.want(range) }
    }

    /// Starts fetching from the first chunk.
    func start() {
        let empty = work.withLock { w -> Bool in
            if w.plan.count == 0 { w.ended = true; return true }
            w.workers += 1
            return false
        }
        if empty { ended(self, nil) } else { launchWorker() }
    }

    /// A reader waits for `range`: its chunks go first, on a worker of their own if one is free.
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

    private func runWorker() async {
        var failure: String?
        while failure == nil {
            guard let range = work.withLock({ w -> Range<Int64>? in w.ended ? nil : w.plan.next().map(w.plan.range(of:)) }) else { break }
            do {
                let arrival = self.arrival
                let written = try await fetch(range) { n in arrival.arrived(range.lowerBound ..< range.lowerBound + min(n, Int64(range.count))) }
                if written != Int64(range.count) {
                    failure = "the server sent \(written) bytes for bytes \(range.lowerBound)-\(range.upperBound - 1) of the object (\(range.count) expected)"
                } else {
                    work.withLock { $0.done += 1 }
                }
            } catch {
                failure = "\(error)"
            }
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
        if report { ended(self, failure) }
    }
}
