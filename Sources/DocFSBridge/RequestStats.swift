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
package final class RequestStats: Sendable {
    /// Upper bounds of the latency buckets, in nanoseconds (the last bucket has none).
    package static let bucketBounds: [UInt64] = [
        10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000,
        10_000_000, 50_000_000, 100_000_000, 500_000_000, 1_000_000_000, 5_000_000_000,
    ]

    /// One heap cell per counter: `Atomic` cannot live in an array, a final class holding one can.
    final class Cell: Sendable {
        let value = Atomic<UInt64>(0)
        @inline(__always) func add(_ n: UInt64) { value.wrappingAdd(n, ordering: .relaxed) }
        var load: UInt64 { value.load(ordering: .relaxed) }
    }

    /// [operation][bucket]: requests, and their nanoseconds.
    private let counts: [[Cell]]
    private let nanos: [[Cell]]
    private let bytesReadCell = Cell()
    private let bytesWrittenCell = Cell()
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
        let slots = Self.bucketBounds.count + 1
        counts = FuseOp.allCases.map { _ in (0..<slots).map { _ in Cell() } }
        nanos = FuseOp.allCases.map { _ in (0..<slots).map { _ in Cell() } }
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
        var slot = 0
        let bounds = Self.bucketBounds
        while slot < bounds.count, elapsed > bounds[slot] { slot += 1 }
        // Time before count: a scrape reads the count first, so it never sees a request's count
        // without its time.
        nanos[op.rawValue][slot].add(elapsed)
        counts[op.rawValue][slot].add(1)
    }

    @inline(__always) package func bytesRead(_ n: Int) { if n > 0 { bytesReadCell.add(UInt64(n)) } }
    @inline(__always) package func bytesWritten(_ n: Int) { if n > 0 { bytesWrittenCell.add(UInt64(n)) } }

    package func refused(op: String, rule: String, errno: String) {
        refusalCounts.withLock { $0[Refusal(op: op, rule: rule, errno: errno), default: 0] += 1 }
    }

    // MARK: Reading (a scrape)

    package var totalBytesRead: UInt64 { bytesReadCell.load }
    package var totalBytesWritten: UInt64 { bytesWrittenCell.load }
    package var refusals: [Refusal: UInt64] { refusalCounts.withLock { $0 } }

    /// Each operation's figures so far (operations never asked for included, at zero).
    package func operations() -> [OpFigures] {
        FuseOp.allCases.map { op in
            let c = counts[op.rawValue].map(\.load)
            return OpFigures(op: op, counts: c, nanoseconds: nanos[op.rawValue].map(\.load))
        }
    }
}
