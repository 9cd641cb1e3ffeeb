import DocFSRemote
import Foundation
import XCTest

/// Bucket versioning against the moto `make test` starts (signatures checked): a PUT answers
/// its version, a GET of that version reads those bytes after the key was PUT over, every
/// version is listed and each can be deleted for good.
final class S3VersionedBucketTests: XCTestCase {
    func testAVersionReadsItsOwnBytesAfterThePutOverItAndGoesForGood() async throws {
        let env = try RemoteTestEnvironment.s3()
        let client = S3Client(endpoint: env.endpoint, credentials: env.credentials)
        let bucket = RemoteTestEnvironment.uniqueName("docfs-test")
        do {
            try await client.createBucket(bucket)
            let plain = try await client.putNewObject(bucket: bucket, key: "tree/packs/before", bytes: Array("unversioned".utf8))
            XCTAssertNil(plain.versionID, "a bucket that keeps no versions answers none")
            let before = try await client.versioningEnabled(bucket: bucket)
            XCTAssertFalse(before)
            try await client.enableVersioning(bucket: bucket)
            try await client.enableVersioning(bucket: bucket) // on already is fine
            let after = try await client.versioningEnabled(bucket: bucket)
            XCTAssert(after)

            let key = "tree/packs/ra/\(UUID().uuidString.lowercased())"
            let first = try await client.putNewObject(bucket: bucket, key: key, bytes: Array("the pack as written".utf8))
            let id = try XCTUnwrap(first.versionID)
            XCTAssert(S3Client.isVersionID(id), id)
            let second = try await client.putNewObject(bucket: bucket, key: key, bytes: Array("put over it".utf8))
            XCTAssertNotEqual(second.versionID, id)

            let whole = try await client.getObjectBytes(bucket: bucket, key: key, versionID: id)
            XCTAssertEqual(String(decoding: whole, as: UTF8.self), "the pack as written")
            let part = try await client.getObjectBytes(bucket: bucket, key: key, versionID: id, range: 4...7)
            XCTAssertEqual(String(decoding: part, as: UTF8.self), "pack")
            let current = try await client.getObjectBytes(bucket: bucket, key: key)
            XCTAssertEqual(String(decoding: current, as: UTF8.self), "put over it")

            let versions = try await client.listObjectVersions(bucket: bucket, prefix: "tree").filter { $0.key == key }
            XCTAssertEqual(Set(versions.map(\.versionID)), Set([id, second.versionID].compactMap { $0 }))
            XCTAssertEqual(versions.first { $0.versionID == id }?.isLatest, false)
            XCTAssertEqual(versions.first { $0.versionID == id }?.size, 19)

            for version in versions { try await client.deleteObjectVersion(bucket: bucket, key: key, versionID: version.versionID) }
            try await client.deleteObjectVersion(bucket: bucket, key: key, versionID: id) // gone already is fine
            do {
                _ = try await client.getObjectBytes(bucket: bucket, key: key, versionID: id)
                XCTFail("a deleted version read")
            } catch let error as S3Error {
                XCTAssertEqual(error.kind, .notFound, "\(error)")
            }
            let left = try await client.listObjectVersions(bucket: bucket, prefix: "tree")
            XCTAssert(left.allSatisfy { $0.key != key }, "\(left)")
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }
}
