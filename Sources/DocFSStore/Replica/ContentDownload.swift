import Foundation
import DocFSProvider

/// One file's contents coming from the server into `staging/`, in order from the first byte.
/// Readers opened on the partial file wait on `arrival` for the range they read; when the last
/// byte is in, the store renames the file into `contents/` (the readers' descriptors stay valid:
/// same inode).
final class ContentDownload: Sendable {
    let row: Int64
    let key: String
    let contentVersion: UInt64
    let size: Int64
    let path: String
    let arrival: ContentArrival

    /// How long a reader waits without a byte arriving before its read fails with EIO (the
    /// request itself goes on until the S3 client's read timeout). `DOCFS_DOWNLOAD_TIMEOUT`
    /// (seconds) changes it, for a slow link or a test of a server that hangs.
    static let stallTimeout: TimeInterval = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_TIMEOUT"], let value = Double(text), value > 0 { return value }
        return 30
    }()

    init(row: Int64, key: String, contentVersion: UInt64, size: Int64, path: String) {
        self.row = row
        self.key = key
        self.contentVersion = contentVersion
        self.size = size
        self.path = path
        arrival = ContentArrival(size: size, stallTimeout: Self.stallTimeout)
    }
}
