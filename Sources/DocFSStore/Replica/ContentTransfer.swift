import Foundation
import DocFSProvider

/// A file's contents coming from the server into `staging/`, as the replica's sync makes it
/// (DocFSReplica's `ContentDownload`: ranged streams, retries, readers served as bytes arrive).
/// The store only asks for one when a file not here is opened, hands readers its `arrival`, and
/// places the file in `contents/` when it ends.
package protocol ContentTransfer: AnyObject, Sendable {
    var row: Int64 { get }
    var key: String { get }
    var contentVersion: UInt64 { get }
    var size: Int64 { get }
    var path: String { get }
    var arrival: ContentArrival { get }
    /// Starts moving bytes; called once, after the store has registered the transfer.
    func start()
}

/// What to download: the object `key` (`size` bytes, the item's `contentVersion`) into the
/// existing empty file at `path`.
package struct ContentTransferRequest: Sendable {
    package var row: Int64
    package var key: String
    package var contentVersion: UInt64
    package var size: Int64
    package var path: String

    package init(row: Int64, key: String, contentVersion: UInt64, size: Int64, path: String) {
        self.row = row
        self.key = key
        self.contentVersion = contentVersion
        self.size = size
        self.path = path
    }
}

/// Makes the transfer of one file's contents; it calls `ended` once when it ends (nil: every
/// byte is in; else why not).
package typealias ContentTransferMaker =
    @Sendable (
        _ request: ContentTransferRequest,
        _ ended: @escaping @Sendable (any ContentTransfer, String?) -> Void
    ) -> any ContentTransfer
