import Glibc
import Synchronization

/// The FUSE operations counted by `RequestStats` (a fixed set, so a metric's labels stay few).
package enum FuseOp: Int, CaseIterable, Sendable {
    case lookup, forget, getattr, setattr, readlink, mknod, mkdir, unlink, rmdir, symlink, rename, link
    case open, read, write, flush, release, fsync, opendir, readdir, readdirplus, releasedir, fsyncdir
    case statfs, getxattr, listxattr, setxattr, removexattr, access, create

    package var name: String { "\(self)" }
}

/// Per-request counters for `-o metrics`: requests and their time by operation, bytes read and
/// written, refusals by rule and errno.
///
/// A request costs two relaxed atomic adds (its latency bucket's count and time) and, for read
/// and write, one more: no lock, nothing allocated. Each bucket keeps its own time so that a
/// scrape can hand the library observations that sum right (`MountMetrics`).
/// The time is what the FUSE thread spent on it; an action handed to the provider's executor
/// (mkdir, rename, a write's first setuid drop, …) is timed until it was handed over.
///
/// Unchecked Sendable: `cells` is only ever reached through its atomics.
package final class RequestStats: @unchecked Sendable {
    /// Upper bounds of the latency buckets, in nanoseconds (the last bucket has none).
    package static let bucketBounds: [UInt64] = [
        10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
        10_000_000, 50_000_000, 100_000_000, 500_000_000, 1_000_000_000, 5_000_000_000,
    ]

    /// [operation][bucket] request counts, then as many nanosecond totals: one allocation of
    /// atomics that lives as long as this object, reached by pointer arithmetic, so that counting
    /// retains nothing and checks no bounds.
    private let cells: UnsafeMutablePointer<Atomic<UInt64>>
    /// Buckets per operation (`bucketBounds.count + 1`) and operations (`FuseOp.allCases.count`),
    /// as literals so the request path computes no array (a test holds them to those counts).
    package static var slots: Int { 15 }
    package static var operationCount: Int { 30 }
    private static var cellCount: Int { operationCount * slots * 2 }
    private let bytesReadCell = Atomic<UInt64>(0)
    private let bytesWrittenCell = Atomic<UInt64>(0)
    /// Refusals are rare next to requests and counted by three labels: a dictionary under a
    /// mutex, never touched by a request that succeeds.
    private let refusalCounts = Mutex<[Refusal: UInt64]>([:])

    package struct Refusal: Hashable, Sendable {
        package var op: String
        package var rule: String
        package var errno: String
    }

    package struct OpFigures: Sendable {
        package var op: FuseOp
        /// Requests per latency bucket (not cumulative) and their nanoseconds,
        /// `bucketBounds.count + 1` of each.
        package var counts: [UInt64]
        package var nanoseconds: [UInt64]
    }

    package init() {
        cells = .allocate(capacity: Self.cellCount)
        for i in 0..<Self.cellCount { (cells + i).initialize(to: Atomic(0)) }
    }

    deinit {
        cells.deinitialize(count: Self.cellCount)
        cells.deallocate()
    }

    /// The bucket of a request that took `ns` (as `bucketBounds`, written out: no array on the
    /// request path).
    @inline(__always)
    package static func slot(_ ns: UInt64) -> Int {
        if ns <= 10_000 { return 0 }
        if ns <= 50_000 { return 1 }
        if ns <= 100_000 { return 2 }
        if ns <= 250_000 { return 3 }
        if ns <= 500_000 { return 4 }
        if ns <= 1_000_000 { return 5 }
        if ns <= 2_500_000 { return 6 }
        if ns <= 5_000_000 { return 7 }
        if ns <= 10_000_000 { return 8 }
        if ns <= 50_000_000 { return 9 }
        if ns <= 100_000_000 { return 10 }
        if ns <= 500_000_000 { return 11 }
        if ns <= 1_000_000_000 { return 12 }
        if ns <= 5_000_000_000 { return 13 }
        return 14
    }

    /// A monotonic clock in nanoseconds (vDSO: no system call).
    @inline(__always)
    package static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    @inline(__always)
    package func record(_ op: FuseOp, since start: UInt64) {
        let elapsed = Self.now() &- start
        let count = op.rawValue &* Self.slots &+ Self.slot(elapsed)
        // Time before count: a scrape reads the count first, so it never sees a request's count
        // without its time.
        (cells + (count &+ Self.operationCount &* Self.slots)).pointee.wrappingAdd(elapsed, ordering: .relaxed)
        (cells + count).pointee.wrappingAdd(1, ordering: .relaxed)
    }

    @inline(__always) package func bytesRead(_ n: Int) { if n > 0 { bytesReadCell.wrappingAdd(UInt64(n), ordering: .relaxed) } }
    @inline(__always) package func bytesWritten(_ n: Int) { if n > 0 { bytesWrittenCell.wrappingAdd(UInt64(n), ordering: .relaxed) } }

    package func refused(op: String, rule: String, errno: String) {
        refusalCounts.withLock { $0[Refusal(op: op, rule: rule, errno: errno), default: 0] += 1 }
    }

    // MARK: Reading (a scrape)

    package var totalBytesRead: UInt64 { bytesReadCell.load(ordering: .relaxed) }
    package var totalBytesWritten: UInt64 { bytesWrittenCell.load(ordering: .relaxed) }
    package var refusals: [Refusal: UInt64] { refusalCounts.withLock { $0 } }

    /// Each operation's figures so far (operations never asked for included, at zero).
    package func operations() -> [OpFigures] {
        let nanos = Self.operationCount * Self.slots
        return FuseOp.allCases.map { op in
            let first = op.rawValue * Self.slots
            let counts = (first..<first + Self.slots).map { (cells + $0).pointee.load(ordering: .relaxed) }
            let times = (first..<first + Self.slots).map { (cells + nanos + $0).pointee.load(ordering: .relaxed) }
            return OpFigures(op: op, counts: counts, nanoseconds: times)
        }
    }
}
