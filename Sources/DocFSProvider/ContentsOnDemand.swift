import Foundation

/// Contents still arriving: a file being downloaded on demand, from its first byte on. Reads of
/// a handle opened on it wait only until the bytes they ask for are in place (or the download
/// ended), so a reader of a large file starts before the whole file is here. The provider
/// reports progress; the bridge waits. (A class, not a protocol: the bridge's read path takes it
/// as one reference.)
public final class ContentArrival: @unchecked Sendable {
    /// The bytes expected in all.
    public let size: Int64
    /// How long a reader waits without a byte arriving before its read fails with EIO.
    public let stallTimeout: TimeInterval

    private let condition = NSCondition()
    private var available: Int64 = 0
    private var finished = false
    private var failure: ProviderError?
    private var lastProgress = Date()

    public init(size: Int64, stallTimeout: TimeInterval) {
        self.size = size
        self.stallTimeout = stallTimeout
    }

    /// Bytes `0..<count` are in place.
    public func progressed(to count: Int64) {
        condition.lock()
        available = max(available, count)
        lastProgress = Date()
        condition.broadcast()
        condition.unlock()
    }

    /// The download ended: every byte is in place (nil), or it failed with `error`.
    public func finish(_ error: ProviderError?) {
        condition.lock()
        finished = true
        failure = error
        if error == nil { available = max(available, size) }
        condition.broadcast()
        condition.unlock()
    }

    public var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return finished
    }

    /// Returns once bytes `0..<end` are in place or the download finished; throws the download's
    /// error, or an EIO error when no byte arrived for `stallTimeout`.
    public func waitForBytes(through end: Int64) throws(ProviderError) {
        let wanted = min(end, size)
        let started = Date()
        condition.lock()
        defer { condition.unlock() }
        while available < wanted && !finished {
            // Measured from this wait's start too: a reader after one that gave up waits its own time.
            let deadline = max(lastProgress, started).addingTimeInterval(stallTimeout)
            if !condition.wait(until: deadline), Date() >= deadline {
                throw ProviderError(.serverUnreachable, "no bytes of the contents arrived from the server for \(Int(stallTimeout)) s", errno: EIO)
            }
        }
        if let failure, available < wanted { throw failure }
    }

    /// Waits for the whole file (a program that opens it for writing copies all of it).
    public func waitForAll() throws(ProviderError) {
        try waitForBytes(through: size)
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

// Defaults for a provider whose contents are always here.
extension Provider {
    public func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents {
        OpenedContents(fd: try openContents(of: identifier))
    }
    public func contentsClosed(of identifier: ItemIdentifier) {}
    /// Refuses: every file of this provider is always here (EOPNOTSUPP).
    public func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        throw ProviderError(.unsupported, "this provider keeps every file's contents here; there is nothing to pin")
    }
    public func isPinned(_ identifier: ItemIdentifier) -> Bool { false }
    /// Refuses: this provider has no server to fetch the contents back from (EOPNOTSUPP).
    public func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int {
        throw ProviderError(.unsupported, "this provider has no server to download evicted contents from")
    }
}
