import DocFSRemote
import Foundation
import XCTest

/// The servers `make test` starts (Tests/remote/servers.sh): their addresses come from the
/// environment, and a test without them is skipped with a message saying how to get them.
enum RemoteTestEnvironment {
    static let skipMessage = "no test servers: run `make test`, or Tests/remote/servers.sh run -- swift test --filter DocFSRemoteTests"

    struct S3: Sendable {
        var endpoint: S3Endpoint
        var credentials: S3Credentials
    }

    static func s3() throws -> S3 {
        let env = ProcessInfo.processInfo.environment
        guard let url = env["DOCFS_TEST_S3_ENDPOINT"], let endpoint = S3Endpoint(url: url),
            let key = env["DOCFS_TEST_S3_ACCESS_KEY"], let secret = env["DOCFS_TEST_S3_SECRET_KEY"]
        else {
            throw XCTSkip("DOCFS_TEST_S3_ENDPOINT is not set: \(skipMessage)")
        }
        guard endpoint.host == "127.0.0.1" else { throw XCTSkip("DOCFS_TEST_S3_ENDPOINT must be on 127.0.0.1") }
        return S3(endpoint: endpoint, credentials: S3Credentials(accessKeyID: key, secretAccessKey: secret))
    }

    /// The second moto server, which checks no signature (see Tests/remote/servers.sh): for keys
    /// with `+`, `&`, `=` and prefixes with `/`, which moto's signature checker gets wrong.
    static func openS3() throws -> S3 {
        let env = try s3()
        guard let url = ProcessInfo.processInfo.environment["DOCFS_TEST_S3_OPEN_ENDPOINT"], let endpoint = S3Endpoint(url: url),
            endpoint.host == "127.0.0.1"
        else {
            throw XCTSkip("DOCFS_TEST_S3_OPEN_ENDPOINT is not set: \(skipMessage)")
        }
        return S3(endpoint: endpoint, credentials: env.credentials)
    }

    static func postgres() throws -> PostgresURL {
        guard let text = ProcessInfo.processInfo.environment["DOCFS_TEST_PG_URL"], let url = PostgresURL(text) else {
            throw XCTSkip("DOCFS_TEST_PG_URL is not set: \(skipMessage)")
        }
        guard url.host == "127.0.0.1" else { throw XCTSkip("DOCFS_TEST_PG_URL must be on 127.0.0.1") }
        return url
    }

    /// A lowercase name S3 and PostgreSQL both accept.
    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)-\(UUID().uuidString.lowercased().prefix(13))".replacingOccurrences(of: "-", with: prefix.contains("_") ? "_" : "-")
    }

    /// A temporary folder removed at the end of the test.
    static func temporaryDirectory(_ test: XCTestCase) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-remote-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(at: dir) }
        return dir
    }
}

extension RemoteDatabase {
    /// Contents as a replica records them before naming them in a version (schema 11 takes no
    /// other): one block of `size` bytes in a pack of its own under this role's intent, and a
    /// manifest of it. `name` makes the block's hash (the same name, the same block).
    func recordedContent(_ name: String, size: Int64) async throws -> RemoteContent {
        var seed: UInt64 = 14_695_981_039_346_656_037
        for byte in name.utf8 { seed = (seed ^ UInt64(byte)) &* 1_099_511_628_211 }
        let hash = String(repeating: String(format: "%016llx", seed), count: 4)
        let pack = "packs/" + UUID().uuidString.lowercased()
        var hashes: [String] = []
        if size > 0 {
            try await recordUploadIntents([pack])
            try await recordPack(pack, size: size, blocks: [StoredBlock(hash: hash, pack: pack, offset: 0, length: size)])
            hashes = [hash]
        }
        let key = "manifests/" + UUID().uuidString.lowercased() + "-" + String(hash.prefix(16))
        let missing = try await recordManifests([BlockManifest(key: key, size: size, hashes: hashes)], donePacks: size > 0 ? [pack] : [])
        guard missing.isEmpty else { throw RemoteError.server("blocks missing: \(missing)") }
        return RemoteContent(key: key, size: size)
    }
}
