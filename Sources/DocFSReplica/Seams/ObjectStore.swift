import Foundation
import SystemPackage
import DocFSRemote

/// What the sync engine asks of the object storage (an S3-compatible server in a mount,
/// `S3Client`), so that uploads and downloads can be tested against objects in memory.
package protocol ObjectStore: Sendable {
    /// Uploads a file whole (multipart above `partSize`); `partUploaded` hears each part, `digest`
    /// the SHA-256 (hex) of the bytes sent.
    @discardableResult
    func uploadFile(
        at path: FilePath, bucket: String, key: String, partSize: Int64, resumeUploadID: String?,
        uploadStarted: @Sendable (String) async throws -> Void,
        partUploaded: @Sendable (Int) -> Void,
        digest: (@Sendable (String) -> Void)?
    ) async throws -> String?
    /// Downloads an object (or an inclusive range) into a file, created or truncated.
    @discardableResult
    func getObject(
        bucket: String, key: String, range: ClosedRange<Int64>?, toFileAt path: FilePath,
        progress: (@Sendable (Int64) -> Void)?
    ) async throws -> Int64
    /// Downloads bytes `range` into the existing file at the same offsets; `progress` answers
    /// false to stop.
    @discardableResult
    func getObject(
        bucket: String, key: String, range: Range<Int64>, intoFileAt path: FilePath,
        progress: (@Sendable (Int64) -> Bool)?
    ) async throws -> Int64
    /// A small object in memory (the tree marker; a run of a pack's blocks, of the pack's
    /// recorded version when it has one).
    func getObjectBytes(bucket: String, key: String, versionID: String?, range: ClosedRange<Int64>?, upTo limit: Int) async throws -> [UInt8]
    @discardableResult
    func putObject(bucket: String, key: String, bytes: [UInt8], contentType: String) async throws -> String?
    /// A pack: the version the PUT made (nil: a bucket without versioning).
    func putNewObject(bucket: String, key: String, bytes: [UInt8], contentType: String) async throws -> S3Written
    func listMultipartUploads(bucket: String, prefix: String?) async throws -> [S3PendingUpload]
    func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws
    func shutdown() async throws
}

extension S3Client: ObjectStore {}
