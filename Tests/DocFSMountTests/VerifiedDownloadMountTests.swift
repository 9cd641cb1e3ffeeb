import Foundation
import XCTest

/// Every download is checked: each block against its SHA-256 (the name it has on the server),
/// and a whole object of a version uploaded before blocks against the SHA-256 its uploader
/// recorded. A pack or object replaced in the bucket is EIO for its reader, with one log line
/// naming the key, and none of it is kept; once mended, the next read fetches it again.
final class VerifiedDownloadMountTests: ReplicaTestCase {
    func testAPackReplacedInTheBucketIsNeverServed() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf 'the real contents' > mnt/doc.txt").status, 0)
        try r.waitUntilUploaded()
        let key = try XCTUnwrap(try r.serverTree()["/doc.txt"]?.contentKey)
        let blocks = try XCTUnwrap(try r.manifests()[key], "doc.txt is made of blocks")
        XCTAssertEqual(blocks.count, 1, "a small file is one block")
        let pack = try XCTUnwrap(blocks.first?.first as? String)
        XCTAssertEqual(try r.objects().map(\.size), [17], "the pack holds the block alone")
        // A second replica has the metadata only (nothing of it in any cache).
        let b = try makeSecond(r)
        eventually("B lists the file") { FileManager.default.fileExists(atPath: b.mnt + "/doc.txt") }

        // Same size, other bytes. The bucket keeps versions (schema 18) and the pack is read as
        // the version its upload made, so a PUT over the key alone changes nothing anyone reads
        // (BucketDoorMountTests): the recorded version's bytes are what goes bad here, as a disk's
        // would, by pointing the pack's record at the forged version.
        try damage(r, pack: pack, with: "a forged contents")
        let read = r.fx.sh("cat '\(b.mnt)/doc.txt'")
        XCTAssertNotEqual(read.status, 0, "the damaged block is not served: \(read)")
        XCTAssertTrue(read.stderr.contains("Input/output error"), read.stderr)
        XCTAssertFalse(read.stdout.contains("forged"), read.stdout)
        XCTAssertEqual(r.xattr(b.mnt + "/doc.txt", "user.docfs.downloaded"), "no", "nothing of it kept")
        let log = (try? String(contentsOfFile: b.store + "/docfs.log", encoding: .utf8)) ?? ""
        XCTAssertEqual(
            log.split(separator: "\n").filter { $0.contains("sync: block") && $0.contains(pack) && $0.contains("does not match") }.count, 1,
            "one line of the check, naming the pack (the store and the read then say what failed): \(log.suffix(2000))")

        try damage(r, pack: pack, with: "the real contents")
        XCTAssertEqual(contents(b.mnt + "/doc.txt"), "the real contents")
    }

    /// `text` as the bytes of `pack` that readers fetch: a new object over the key and, where
    /// the bucket keeps versions, the pack's record moved to that version.
    func damage(_ r: RemoteMount, pack: String, with text: String) throws {
        let put = try XCTUnwrap(try servers.s3check(["put", r.bucket, pack, text]) as? [String: Any])
        guard let version = put["versionId"] as? String, version != "null" else { return }
        _ = try servers.psql(
            r.databaseURL,
            """
            UPDATE docfs_packs SET version_id = '\(version)' WHERE key = '\(pack)';
            UPDATE docfs_blocks SET pack_version = '\(version)' WHERE pack_key = '\(pack)';
            """)
    }

    /// A version uploaded before blocks (schema 7: one object per version, its SHA-256 on the
    /// version row) still reads, and is checked the same way.
    func testAWholeObjectOfAnOlderServerStillReadsAndIsChecked() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf 'older contents!' > mnt/old.txt && printf 'older contents?' > mnt/old2.txt").status, 0)
        try r.waitUntilUploaded()
        // What a replica before schema 8 left: the bytes as one object under PREFIX/objects/,
        // its SHA-256 on the version row. old2.txt's object is then damaged in the bucket.
        for (name, bytes) in [("old.txt", "older contents!"), ("old2.txt", "forged contents")] {
            let id = try XCTUnwrap(r.identifier(r.fx.m(name)))
            let object = "\(r.prefix)/objects/\(name)"
            _ = try servers.s3check(["put", r.bucket, object, bytes])
            _ = try servers.psql(
                r.databaseURL,
                """
                UPDATE docfs_items SET content_key = '\(object)' WHERE id = \(id);
                UPDATE docfs_versions SET content_key = '\(object)',
                       sha256 = encode(sha256(convert_to((SELECT CASE WHEN name = 'old.txt' THEN 'older contents!' ELSE 'older contents?' END
                                                          FROM docfs_items WHERE id = \(id)), 'UTF8')), 'hex')
                WHERE item_id = \(id);
                """)
        }
        // A second replica learns the tree as it is now.
        let b = try makeSecond(r)
        eventually("B lists the files") { FileManager.default.fileExists(atPath: b.mnt + "/old2.txt") }
        XCTAssertEqual(contents(b.mnt + "/old.txt"), "older contents!", "a whole object reads")
        let read = r.fx.sh("cat '\(b.mnt)/old2.txt'")
        XCTAssertNotEqual(read.status, 0, "the damaged object is not served: \(read)")
        XCTAssertFalse(read.stdout.contains("forged"), read.stdout)
        let log = (try? String(contentsOfFile: b.store + "/docfs.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("\(r.prefix)/objects/old2.txt") && log.contains("does not match"), log.suffix(2000).description)
    }
}
