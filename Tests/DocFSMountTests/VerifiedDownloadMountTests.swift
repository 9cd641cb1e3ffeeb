import Foundation
import XCTest

/// Every download is checked against the SHA-256 its uploader recorded on the server: an object
/// replaced in the bucket is EIO for its reader, with one log line naming the key, and none of it
/// is kept; once the object is mended, the next read fetches it again.
final class VerifiedDownloadMountTests: ReplicaTestCase {
    func testAnObjectReplacedInTheBucketIsNeverServed() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf 'the real contents' > mnt/doc.txt").status, 0)
        try r.waitUntilUploaded()
        let item = try XCTUnwrap(try r.serverTree()["/doc.txt"])
        let key = try XCTUnwrap(item.contentKey)
        XCTAssertGreaterThanOrEqual(try r.count("SELECT count(*) FROM docfs_versions WHERE content_key = '\(key)' AND sha256 IS NOT NULL"), 1,
                                    "the upload recorded its SHA-256")
        // A second replica has the metadata only (nothing of it in any cache).
        let b = try makeSecond(r)
        eventually("B lists the file") { FileManager.default.fileExists(atPath: b.mnt + "/doc.txt") }

        _ = try servers.s3check(["put", r.bucket, key, "a forged contents"])   // same size, other bytes
        let read = r.fx.sh("cat '\(b.mnt)/doc.txt'")
        XCTAssertNotEqual(read.status, 0, "the damaged object is not served: \(read)")
        XCTAssertTrue(read.stderr.contains("Input/output error"), read.stderr)
        XCTAssertFalse(read.stdout.contains("forged"), read.stdout)
        XCTAssertEqual(r.xattr(b.mnt + "/doc.txt", "user.docfs.downloaded"), "no", "nothing of it kept")
        let log = (try? String(contentsOfFile: b.store + "/docfs.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains(key) && log.contains("does not match"), log.suffix(2000).description)

        _ = try servers.s3check(["put", r.bucket, key, "the real contents"])
        XCTAssertEqual(contents(b.mnt + "/doc.txt"), "the real contents")
    }
}
