import Foundation

/// Contents still arriving: a file being downloaded on demand, in chunks and not necessarily in
/// order. Reads of a handle opened on it wait only until the bytes they ask for are in place (or
/// the download ended); a read of bytes no one is fetching yet tells the downloader (`wanted`),
/// which fetches them next, so a read far into a large file does not wait for what comes before.
/// The provider reports the ranges that arrived; the bridge waits. (A class, not a protocol: the
/// bridge's read path takes it as one reference.)
public final class ContentArrival: @unchecked Sendable {
    /// The bytes expected in all.
    public let size: Int64
    /// How long a reader waits without a byte arriving before its read fails with EIO.
    public let stallTimeout: TimeInterval

    private let condition = NSCondition()
    private var present = RangeSet<Int64>()
    private var finished = false
    private var failure: ProviderError?
    private var lastProgress = Date()
    private var wanted: (@Sendable (Range<Int64>) -> Void)?

    public init(size: Int64, stallTimeout: TimeInterval) {
        self.size = size
        self.stallTimeout = stallTimeout
    }

    /// Who hears of reads waiting for bytes that are not here (the downloader, to fetch them next).
    public func whenWanted(_ handler: @escaping @Sendable (Range<Int64>) -> Void) {
        condition.lock()
        wanted = handler
        condition.unlock()
    }

    /// Bytes `range` are in place.
    public func arrived(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        condition.lock()
        present.insert(contentsOf: range)
        lastProgress = Date()
        condition.broadcast()
        condition.unlock()
    }

    /// The download ended: every byte is in place (nil), or it failed with `error`.
    public func finish(_ error: ProviderError?) {
        condition.lock()
        finished = true
        failure = error
        if error == nil, size > 0 { present.insert(contentsOf: 0..<size) }
        wanted = nil
        condition.broadcast()
        condition.unlock()
    }

    public var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return finished
    }

    /// Every byte of `range` is here (call with the lock held).
    private func holds(_ range: Range<Int64>) -> Bool {
        range.isEmpty || present.ranges.contains { $0.lowerBound <= range.lowerBound && $0.upperBound >= range.upperBound }
    }

    /// Returns once bytes `range` (clipped to the file) are in place; throws the download's
    /// error, or an EIO error when no byte arrived for `stallTimeout`.
    public func waitFor(_ range: Range<Int64>) throws(ProviderError) {
        let wantedRange = max(0, min(range.lowerBound, size))..<max(0, min(range.upperBound, size))
        condition.lock()
        if holds(wantedRange) { condition.unlock(); return }
        let tell = finished ? nil : wanted
        condition.unlock()
        // Outside the lock: the downloader takes its own.
        tell?(wantedRange)
        let started = Date()
        condition.lock()
        defer { condition.unlock() }
        while !holds(wantedRange) && !finished {
            // Measured from this wait's start too: a reader after one that gave up waits its own time.
            let deadline = max(lastProgress, started).addingTimeInterval(stallTimeout)
            if !condition.wait(until: deadline), Date() >= deadline {
                throw ProviderError(.serverUnreachable, "no bytes of the contents arrived from the server for \(Int(stallTimeout)) s", errno: EIO)
            }
        }
        if let failure, !holds(wantedRange) { throw failure }
    }

    /// Waits for the whole file (a program that opens it for writing copies all of it).
    public func waitForAll() throws(ProviderError) {
        try waitFor(0..<size)
        condition.lock()
        defer { condition.unlock() }
        if let failure { throw failure }
    }
}

/// A descriptor on a file's contents and, while they are still arriving, their arrival.
public struct OpenedContents: Sendable {
    public var fd: Int32
    public var arrival: ContentArrival?
    public init(fd: Int32, arrival: ContentArrival? = nil) {
        self.fd = fd
        self.arrival = arrival
    }
}
