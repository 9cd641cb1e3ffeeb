import Foundation
import XCTest

/// Contents as blocks on the loopback servers: small files packed (a tree is a handful of
/// PUTs), large files cut at content-defined boundaries so that an append or an edit in the
/// middle uploads only the blocks around it, a block any file already has never sent twice, and
/// versions kept by gc still restorable after it rewrote their packs.
final class BlockMountTests: ReplicaTestCase {
    func uploadedBytes(_ r: RemoteMount) throws -> Int64 {
        let status = try r.waitUntilUploaded(timeout: 180)
        let object = try JSONSerialization.jsonObject(with: Data(status.raw.utf8)) as? [String: Any]
        return try XCTUnwrap((object?["uploadedBytes"] as? NSNumber)?.int64Value, status.raw)
    }

    /// 500 files (2,000 showed the same at four times the cost): four chunks of the engine's (128
    /// entries each) or more, which unpacked would be 500 objects; packed, at least ten files an object.
    func testFiveHundredSmallFilesArePackedAndReadBackOnASecondReplica() throws {
        let r = try makeRemote()
        let source = r.fx.dir + "/src"
        let items = try makeSourceTree(source, folders: 2, subfolders: 5, filesPerFolder: 50)
        XCTAssertEqual(r.fx.sh("cp -r src/. mnt/", timeout: 300).status, 0)
        let sent = try uploadedBytes(r)
        let objects = try r.objects()
        XCTAssertLessThan(objects.count, 50, "500 small files in \(objects.count) objects")
        XCTAssertTrue(objects.allSatisfy { $0.key.hasPrefix("\(r.prefix)/packs/") }, "\(objects.prefix(3))")
        // Every distinct file's bytes counted once they are on the server (status's pending 0),
        // and nothing counted that is not in a pack (a retried PUT can leave an extra pack).
        let want = try r.localTree(source)
        let distinct = Dictionary(want.values.compactMap { e in e.sha256.map { ($0, e.size) } }, uniquingKeysWith: { a, _ in a })
        XCTAssertGreaterThanOrEqual(sent, distinct.values.reduce(0, +), "uploadedBytes counts every distinct file's bytes")
        XCTAssertLessThanOrEqual(sent, objects.reduce(0) { $0 + $1.size }, "uploadedBytes counts what went up in packs")
        try r.assertServerMatchesMount()
        try r.assertNothingDoubled(expectedItems: items)

        let b = try makeSecond(r)
        try waitForQuiet(r, b)
        let got = try r.localTree(b.mnt)
        XCTAssertEqual(got.count, want.count)
        for (path, w) in want {
            XCTAssert(
                got[path].map { $0.kind == w.kind && $0.size == w.size && $0.sha256 == w.sha256 } ?? false,
                "\(path) on the second replica: \(String(describing: got[path])), expected \(w)")
        }
    }

    /// An upload slower than gc's grace: its packs' blocks are named by no manifest until the
    /// upload ends, and gc keeps them while the upload's intents (renewed as it goes) name their
    /// packs. Before, gc dropped them and the replica sent the file again, and again.
    func testAnUploadSlowerThanGcsGraceKeepsItsBlocks() throws {
        let r = try makeRemote(mount: false)
        try r.fx.mount(extra: ["--upload-limit", "2M"])
        let size = 24 << 20 // three packs, about 12 s at 2 MiB/s
        XCTAssertEqual(r.fx.sh("head -c \(size) /dev/urandom > src/slow.bin && cp src/slow.bin mnt/").status, 0)
        var runs = 0
        let deadline = Date().addingTimeInterval(240)
        while Date() < deadline {
            _ = try r.gc(["--grace", "0"])
            runs += 1
            if let s = try? r.status(), s.pending == 0 { break }
        }
        let sent = try uploadedBytes(r)
        XCTAssertGreaterThan(runs, 1, "gc ran while the upload did")
        XCTAssertGreaterThanOrEqual(sent, Int64(size))
        XCTAssertLessThan(sent, 2 * Int64(size), "the file went up more than once (\(sent) bytes): gc took blocks of the upload")
        _ = try r.gc(["--grace", "0"])
        XCTAssertEqual(r.fx.docfs(["evict", r.fx.m("slow.bin")]).status, 0)
        XCTAssertEqual(r.fx.sh("cmp src/slow.bin mnt/slow.bin", timeout: 120).status, 0, "read back from the server after gc")
    }

    /// A 32 MiB file (64 MiB showed the same at twice the cost): sent again whole, an append
    /// would be 33 MiB and an edit 32, over three times the bounds below.
    func testAnAppendAndAMiddleEditUploadOnlyTheBlocksAroundThem() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir big && head -c 33554432 /dev/urandom > big/big.src && cp big/big.src mnt/big.bin", timeout: 120).status, 0)
        let first = try uploadedBytes(r)
        XCTAssertGreaterThanOrEqual(first, 32 << 20)

        // 1 MiB appended to the 32 MiB file.
        XCTAssertEqual(r.fx.sh("head -c 1048576 /dev/urandom > more && cat more >> big/big.src && cat more >> mnt/big.bin").status, 0)
        let appended = try uploadedBytes(r) - first
        XCTAssertLessThan(appended, 8 << 20, "an append of 1 MiB uploaded \(appended) bytes")
        XCTAssertGreaterThanOrEqual(appended, 1 << 20)

        // 4 KiB rewritten in the middle.
        XCTAssertEqual(
            r.fx.sh(
                """
                head -c 4096 /dev/urandom > patch
                dd if=patch of=big/big.src bs=4096 seek=4096 conv=notrunc status=none
                dd if=patch of=mnt/big.bin bs=4096 seek=4096 conv=notrunc status=none
                """
            ).status, 0)
        let edited = try uploadedBytes(r) - first - appended
        XCTAssertLessThan(edited, 9 << 20, "an edit of 4 KiB in the middle uploaded \(edited) bytes (a few blocks)")

        // The same bytes under another name: its blocks are on the server already.
        XCTAssertEqual(r.fx.sh("cp big/big.src mnt/copy.bin", timeout: 120).status, 0)
        let copied = try uploadedBytes(r) - first - appended - edited
        XCTAssertEqual(copied, 0, "a copy of a file the server has uploads no block")

        try r.assertServerMatchesMount()
        let b = try makeSecond(r)
        try waitForQuiet(r, b)
        let source = try r.localTree(r.fx.dir + "/big")["/big.src"]
        let onB = try r.localTree(b.mnt)
        XCTAssertEqual(onB["/big.bin"]?.sha256, source?.sha256, "big.bin read back whole on the second replica")
        XCTAssertEqual(onB["/copy.bin"]?.sha256, source?.sha256, "copy.bin read back whole on the second replica")
    }

    func testAVersionKeptByGcStillRestoresAfterItsPackWasRewritten() throws {
        // One pack: the first version of notes.txt beside nine files deleted afterwards. The
        // daemon first runs with a key the bucket refuses, so the ten files wait in the outbox and
        // the next mount sends them in one batch (a busy machine can pause a copy for longer than
        // the engine's quiet period, which would split them).
        let r = try makeRemote(mount: false)
        let env = r.awsEnvironment(secret: servers.secretKey)
        r.fx.daemonEnv = r.awsEnvironment(secret: "not-the-key")
        try r.fx.mount()
        XCTAssertEqual(
            r.fx.sh(
                """
                mkdir kept && printf 'the first version' > kept/notes.txt
                for i in 1 2 3 4 5 6 7 8 9; do head -c 20000 /dev/urandom > kept/tmp$i.bin; done
                cp -r kept/. mnt/
                """
            ).status, 0)
        XCTAssertEqual(try r.unmount(["--no-wait"], timeout: 60).status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15), "the daemon ended after docfs unmount --no-wait")
        XCTAssertEqual(try r.objects().count, 0, "nothing went up with the refused key")
        r.fx.daemonEnv = env
        try r.fx.mount()
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.objects().count, 1, "one pack for the ten files")
        XCTAssertEqual(r.fx.sh("rm mnt/tmp*.bin").status, 0)
        try r.waitUntilUploaded()
        // gc keeps versions for --keep-versions after they stopped being current: the deleted
        // files' deletes are dated two hours back on the server (as the owner may), so they are
        // older than that when notes.txt gets its second version, with no wait for the clock.
        _ = try r.servers.psql(
            r.databaseURL,
            "UPDATE docfs_items SET changed_ns = changed_ns - 7200000000000 WHERE deleted AND name LIKE 'tmp%.bin'")
        XCTAssertEqual(r.fx.sh("printf 'the second version' > mnt/notes.txt").status, 0)
        try r.waitUntilUploaded()

        // The first version's block stays, the deleted files' blocks go, and their pack, mostly
        // dead now, is rewritten.
        let gc = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0", "--keep-versions", "1h", "--keep-log", "1h", "--json"], env: env)
        XCTAssertEqual(gc.status, 0, "\(gc)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(gc.stdout.utf8)) as? [String: Any])
        XCTAssertEqual((report["blocks"] as? NSNumber)?.intValue, 9, "the deleted files' blocks: \(report)")
        XCTAssertEqual((report["packsRewritten"] as? NSNumber)?.intValue, 1, "\(report)")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks"), 2, "the two versions of notes.txt")
        XCTAssertEqual(try r.objects().reduce(Int64(0)) { $0 + $1.size }, 17 + 18, "what is left in the bucket")

        let run = r.fx.docfs(["versions", r.fx.m("notes.txt"), "--json"], env: env)
        let listing = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run)")
        let versions = try XCTUnwrap(listing["versions"] as? [[String: Any]])
        let first = try XCTUnwrap(versions.first { ($0["size"] as? NSNumber)?.intValue == 17 }?["number"] as? NSNumber)
        let restore = r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), first.stringValue, "--as", "notes v1.txt"], env: env)
        XCTAssertEqual(restore.status, 0, "\(restore)")
        XCTAssertEqual(contents(r.fx.m("notes v1.txt")), "the first version")
        XCTAssertEqual(contents(r.fx.m("notes.txt")), "the second version")
    }
}
