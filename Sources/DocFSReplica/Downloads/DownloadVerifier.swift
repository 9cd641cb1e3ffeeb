import Crypto
import Foundation
import Logging
import DocFSRemote

/// Every byte downloaded is checked: a whole downloaded file's SHA-256 against the one its
/// uploader recorded on the server (`docfs_versions.sha256`). A mismatch (an object replaced or
/// damaged in the bucket) fails the download — its readers get EIO, none of it goes into the
/// store — with one log line naming the key; the next open fetches it from the server again.
/// Versions older replicas uploaded have no hash and are not checked.
struct DownloadVerifier: Sendable {
    let database: any ReplicaServer
    let logger: Logger

    struct Mismatch: Error, CustomStringConvertible { var message: String; var description: String { message } }

    /// nil when the file matches (or nothing was recorded); else why not.
    func check(_ path: String, key: String) async -> String? {
        let expected: String?
        do { expected = try await database.expectedSHA256(key: key) } catch {
            return "cannot read the recorded SHA-256 of \(key): \(error)"
        }
        guard let expected else { return nil }
        guard let actual = Self.sha256(ofFileAt: path) else { return "cannot read the downloaded file to check it" }
        guard actual != expected else { return nil }
        logger.error(
            "sync: the object \(key) does not match the SHA-256 its replica recorded (\(actual.prefix(12))… instead of \(expected.prefix(12))…): replaced or damaged in the bucket; not used"
        )
        return "the object \(key) does not match its recorded SHA-256 (replaced or damaged in the bucket)"
    }

    static func sha256(ofFileAt path: String) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var hasher = SHA256()
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
