import Foundation
import DocFSProvider

/// One file's contents coming from the server into `staging/`, in order from the first byte.
/// Readers opened on the partial file wait in `waitForBytes` for the range they read; when the
/// last byte is in, the store renames the file into `contents/` (the readers' descriptors stay
/// valid: same inode).
final class ContentDownload: ContentArrival, @unchecked Sendable {
    let row: Int64
    let key: String
    let contentVersion: UInt64
    let size: Int64
    let path: String
    /// How long a reader waits without a byte arriving before its read fails with EIO (the
    /// request itself goes on until the S3 client's read timeout). `DOCFS_DOWNLOAD_TIMEOUT`
    /// (seconds) changes it, for a slow link or a test of a server that hangs.
    static let stallTimeout: TimeInterval = {
        if let text = ProcessInfo.processInfo.environment["DOCFS_DOWNLOAD_TIMEOUT"], let value = Double(text), value > 0 { return value }
        return 30
    }()

    private let condition = NSCondition()
    private var available: Int64 = 0
    private var finished = false
    private var failure: ProviderError?
    private var lastProgress = Date()

    init(row: Int64, key: String, contentVersion: UInt64, size: Int64, path: String) {
        self.row = row
        self.key = key
        self.contentVersion = contentVersion
        self.size = size
        self.path = path
    }

    /// Bytes `0..<count` are written (called as chunks land).
    func progressed(to count: Int64) {
        condition.lock()
        available = max(available, count)
        lastProgress = Date()
        condition.broadcast()
        condition.unlock()
    }

    func finish(_ error: ProviderError?) {
        condition.lock()
        finished = true
        failure = error
        if error == nil { available = max(available, size) }
        condition.broadcast()
        condition.unlock()
    }

    var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return finished
    }

    func waitForBytes(through end: Int64) throws(ProviderError) {
        let wanted = min(end, size)
        let started = Date()
        condition.lock()
        defer { condition.unlock() }
        while available < wanted && !finished {
            // Measured from this wait's start too: a reader after one that gave up waits its own time.
            let deadline = max(lastProgress, started).addingTimeInterval(Self.stallTimeout)
            if !condition.wait(until: deadline), Date() >= deadline {
                throw ProviderError(.serverUnreachable, "no bytes of the contents arrived from the server for \(Int(Self.stallTimeout)) s", errno: EIO)
            }
        }
        if let failure, available < wanted { throw failure }
    }

    /// Waits for the whole file (a program that opens it for writing copies all of it).
    func waitForAll() throws(ProviderError) {
        try waitForBytes(through: size)
        condition.lock()
        defer { condition.unlock() }
        if let failure { throw failure }
    }
}
