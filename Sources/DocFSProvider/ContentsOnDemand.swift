/// Contents still arriving: a file being downloaded on demand. Reads of a handle opened on it
/// wait only until the bytes they ask for are in place (or the download ended), so a reader of a
/// large file starts before the whole file is here.
public protocol ContentArrival: AnyObject, Sendable {
    /// Returns once bytes `0..<end` are in place or the download finished; throws the download's
    /// error (EIO), or `.serverUnreachable`'s EIO when no byte arrived for the bounded wait.
    func waitForBytes(through end: Int64) throws(ProviderError)
}

/// A descriptor on a file's contents and, while they are still arriving, their arrival.
public struct OpenedContents: Sendable {
    public var fd: Int32
    public var arrival: (any ContentArrival)?
    public init(fd: Int32, arrival: (any ContentArrival)? = nil) {
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
