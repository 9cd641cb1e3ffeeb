import struct Foundation.Date
#if canImport(Glibc)
    import Glibc
#endif

/// A point in time exact to the nanosecond, as a filesystem keeps it (`struct timespec`).
///
/// Foundation's `Date` is a Double: it rounds nanoseconds away (…123456789 reads back as
/// …123456716), which makes `rsync -a` see every file as changed. Items keep `FileTime`; the
/// `Date` properties of `Item` are views of it for the Apple vocabulary.
public struct FileTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Seconds since 1970-01-01 UTC (negative before).
    public var seconds: Int64
    /// 0 ..< 1_000_000_000.
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        // Normalised, so that equal instants compare equal.
        var s = seconds
        var n = Int64(nanoseconds)
        s += n / 1_000_000_000
        n %= 1_000_000_000
        if n < 0 { n += 1_000_000_000; s -= 1 }
        self.seconds = s
        self.nanoseconds = Int32(n)
    }

    /// The nearest FileTime to a Date (exact to about a microsecond for present-day dates).
    public init(_ date: Date) {
        let t = date.timeIntervalSince1970
        let s = t.rounded(.down)
        var n = ((t - s) * 1e9).rounded()
        if n >= 1e9 { n = 1e9 - 1 }
        self.init(seconds: Int64(s), nanoseconds: Int32(n))
    }

    public var date: Date { Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9) }

    /// The wall clock now, as the kernel stamps files: CLOCK_REALTIME_COARSE (the last tick).
    /// The staged copies' times come from the kernel's coarse clock, so a time taken here with
    /// the fine clock could fall after a write that came later (a folder newer than the file
    /// just written into it); one clock for both keeps times in the order of the calls.
    public static func now() -> FileTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return FileTime(seconds: Int64(ts.tv_sec), nanoseconds: Int32(ts.tv_nsec))
    }

    /// Nanoseconds since the epoch, clamped to Int64 (years 1677 to 2262): how the store keeps it.
    public var totalNanoseconds: Int64 {
        let (high, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? Int64.min : Int64.max }
        let (sum, overflow2) = high.addingReportingOverflow(Int64(nanoseconds))
        if overflow2 { return seconds < 0 ? Int64.min : Int64.max }
        return sum
    }

    public init(totalNanoseconds ns: Int64) {
        var s = ns / 1_000_000_000
        var n = ns % 1_000_000_000
        if n < 0 { n += 1_000_000_000; s -= 1 }
        self.init(seconds: s, nanoseconds: Int32(n))
    }

    public static func < (lhs: FileTime, rhs: FileTime) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    public var description: String {
        let digits = String(nanoseconds)
        return "\(seconds)." + String(repeating: "0", count: 9 - digits.count) + digits
    }
}
