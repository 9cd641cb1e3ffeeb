import Foundation
import Crypto
import Synchronization
import SystemPackage
@testable import DocFSRemote
@testable import DocFSReplica

/// An object store in memory: objects by key, uploads read whole from their files, faults
/// injected per call, every download counted.
final class InMemoryObjects: ObjectStore {
    struct State {
        var objects: [String: Data] = [:]
        var failures: [any Error] = []
        var uploads = 0
        var downloads = 0
        /// A bucket that keeps versions: each `putNewObject` makes one ("key version" → bytes).
        var versioned = false
        var versions: [String: Data] = [:]
    }
    let state = Mutex(State())

    func failNext(_ errors: any Error...) { state.withLock { $0.failures += errors } }
    subscript(key: String) -> Data? { state.withLock { $0.objects[key] } }
    func put(_ key: String, _ text: String) { state.withLock { $0.objects[key] = Data(text.utf8) } }
    var uploads: Int { state.withLock { $0.uploads } }
    var downloads: Int { state.withLock { $0.downloads } }

    private func enter(upload: Bool) throws {
        try state.withLock { s in
            if upload { s.uploads += 1 } else { s.downloads += 1 }
            if !s.failures.isEmpty { throw s.failures.removeFirst() }
        }
    }

    private func object(_ key: String) throws -> Data {
        guard let data = state.withLock({ $0.objects[key] }) else {
            throw S3Error(kind: .notFound, status: 404, code: "NoSuchKey", message: key)
        }
        return data
    }

    func uploadFile(
        at path: FilePath, bucket: String, key: String, partSize: Int64, resumeUploadID: String?,
        uploadStarted: @Sendable (String) async throws -> Void,
        partUploaded: @Sendable (Int) -> Void,
        digest: (@Sendable (String) -> Void)?
    ) async throws -> String? {
        try enter(upload: true)
        let data = try Data(contentsOf: URL(fileURLWithPath: path.string))
        digest?(SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined())
        state.withLock { $0.objects[key] = data }
        return nil
    }

    func getObject(
        bucket: String, key: String, range: ClosedRange<Int64>?, toFileAt path: FilePath,
        progress: (@Sendable (Int64) -> Void)?
    ) async throws -> Int64 {
        try enter(upload: false)
        var data = try object(key)
        if let range { data = data.subdata(in: Int(range.lowerBound)..<min(data.count, Int(range.upperBound) + 1)) }
        try data.write(to: URL(fileURLWithPath: path.string))
        progress?(Int64(data.count))
        return Int64(data.count)
    }

    func getObject(
        bucket: String, key: String, range: Range<Int64>, intoFileAt path: FilePath,
        progress: (@Sendable (Int64) -> Bool)?
    ) async throws -> Int64 {
        try enter(upload: false)
        let data = try object(key)
        let slice = data.subdata(in: Int(range.lowerBound)..<min(data.count, Int(range.upperBound)))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path.string))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(range.lowerBound))
        try handle.write(contentsOf: slice)
        _ = progress?(Int64(slice.count))
        return Int64(slice.count)
    }

    func getObjectBytes(bucket: String, key: String, versionID: String?, range: ClosedRange<Int64>?, upTo limit: Int) async throws -> [UInt8] {
        try enter(upload: false)
        let data: Data
        if let versionID {
            guard let version = state.withLock({ $0.versions["\(key) \(versionID)"] }) else {
                throw S3Error(kind: .notFound, status: 404, code: "NoSuchVersion", message: key)
            }
            data = version
        } else {
            data = try object(key)
        }
        guard let range else { return Array(data) }
        return Array(data.subdata(in: Int(range.lowerBound)..<min(data.count, Int(range.upperBound) + 1)))
    }

    func putObject(bucket: String, key: String, bytes: [UInt8], contentType: String) async throws -> String? {
        try enter(upload: true)
        state.withLock { $0.objects[key] = Data(bytes) }
        return nil
    }

    func putNewObject(bucket: String, key: String, bytes: [UInt8], contentType: String) async throws -> S3Written {
        try enter(upload: true)
        return state.withLock { s in
            s.objects[key] = Data(bytes)
            guard s.versioned else { return S3Written(etag: nil, versionID: nil) }
            let id = UUID().uuidString
            s.versions["\(key) \(id)"] = Data(bytes)
            return S3Written(etag: nil, versionID: id)
        }
    }

    func listMultipartUploads(bucket: String, prefix: String?) async throws -> [S3PendingUpload] { [] }
    func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {}
    func shutdown() async throws {}
}

extension InMemoryObjects {
    /// The server's object for a live item at `path`, as text.
    func text(of path: String, on server: InMemoryServer) -> String? {
        guard let key = server.tree()[path]?.contentKey else { return nil }
        // A version made of blocks: its manifest's blocks, cut from their packs.
        if let manifest = server.state.withLock({ s in s.manifests[key].map { m in m.hashes.compactMap { s.blocks[$0] } } }) {
            var bytes = Data()
            for block in manifest {
                guard let pack = self[block.pack] else { return nil }
                bytes.append(pack.subdata(in: Int(block.offset)..<Int(block.offset + block.length)))
            }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let data = self[key] else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}
