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
              let key = env["DOCFS_TEST_S3_ACCESS_KEY"], let secret = env["DOCFS_TEST_S3_SECRET_KEY"] else {
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
              endpoint.host == "127.0.0.1" else {
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
