import Foundation
import DocFSProvider
import DocFSStore

/// What contents on demand (`ContentsOnDemand`) asks of the replica's store: mechanics only (a
/// file's snapshot, a download's staging file and its placing, passes under the writer lock that
/// evict or pin rows), so that the decisions run against a store in memory in the tests.
package protocol OnDemandStore: AnyObject, Sendable {
    /// Contents on demand, once handed over (`setOnDemandHandler`): it outlives an engine.
    var onDemandHandler: (any OnDemandHandler)? { get }
    func setOnDemandHandler(_ handler: (any OnDemandHandler)?)
    /// The item's path in the tree, for log lines.
    func path(ofRow row: Int64) -> String
    /// The current row an identifier names (nil: none).
    func onDemandRow(of identifier: ItemIdentifier) -> Int64?
    /// The item at `row` (nil: gone).
    func onDemandFile(row: Int64) -> OnDemandFile?
    /// Opens the file's contents for reading (a file not here: waits for its whole download).
    func openStoredContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32
    /// A new empty file to download `row`'s contents into.
    func newDownloadFile(row: Int64) throws(ProviderError) -> String
    /// Places a finished download if the item still wants that version and object; false when
    /// it changed meanwhile.
    func placeDownloadedContents(row: Int64, from path: String, contentVersion: UInt64, key: String) throws(ProviderError) -> Bool
    /// A placed download: the kernel drops what it cached of the item.
    func noteContentsPlaced(row: Int64)
    /// Where `row`'s contents are kept once here.
    func onDemandContentPath(row: Int64) -> String
    /// Runs `body` under the store's writer lock (its evictions and pins in one transaction).
    func onDemandPass<T>(_ body: (any OnDemandPassing) throws(ProviderError) -> T) throws(ProviderError) -> T
}

/// What a pass under the store's writer lock can do (`StoreReplica`'s `OnDemandPass`).
package protocol OnDemandPassing {
    /// The bytes of contents here; when they and `reserving` are over `limit`, the files that
    /// could go (downloaded, not empty, on the server, nothing waiting).
    func contentsHere(limit: Int64, reserving: Int64) throws(ProviderError) -> (local: Int64, candidates: [Int64])
    /// The files below a folder that are (or are not) downloaded.
    func filesBelow(_ folder: Int64, downloaded: Bool) throws(ProviderError) -> [Int64]
    /// Evicts these files in order but those `blocker` keeps, until `enough` bytes went.
    func evict(
        _ rows: [Int64], stopAt enough: Int64?, blocker: (OnDemandFile) -> String?
    )
        throws(ProviderError) -> (evicted: [Int64], bytes: Int64, kept: [(row: Int64, reason: String)])
    func setPinned(_ pinned: Bool, row: Int64) throws(ProviderError)
    func pinnedRows() throws(ProviderError) -> Set<Int64>
}

extension OnDemandPass: OnDemandPassing {}
