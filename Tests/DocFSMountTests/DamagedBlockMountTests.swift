import Foundation
import XCTest

/// Damaged blocks heal, on the loopback servers: a pack overwritten with zeros in the bucket is
/// found by `docfs remote check`, the same bytes copied in again are sent (not counted on), and
/// every replica then reads both files byte-exact.
extension BlockMountTests {
    /// `docfs remote check STORE --json` as the owner: its exit status and report.
    func remoteCheck(_ r: RemoteMount) throws -> (status: Int32, report: [String: Any]) {
        let run = r.fx.docfs(["remote", "check", r.fx.store, "--json"], env: r.awsEnvironment(secret: r.servers.secretKey), timeout: 120)
        guard let report = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] else {
            throw FixtureError("docfs remote check: \(run)")
        }
        return (run.status, report)
    }

    func testADamagedPackIsFoundAndTheSameBytesCopiedInHealIt() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("head -c 307200 /dev/urandom > src.bin && cp src.bin mnt/one.bin").status, 0)
        let first = try uploadedBytes(r)
        let packs = try r.objects().filter { $0.key.hasPrefix("\(r.prefix)/packs/") }
        XCTAssertEqual(packs.count, 1, "\(packs)")
        let pack = try XCTUnwrap(packs.first)
        _ = try r.servers.s3check(["zero", r.bucket, pack.key])

        // The owner's check reads the pack, marks the block and names the file.
        let damaged = try remoteCheck(r)
        XCTAssertEqual(damaged.status, 1, "\(damaged.report)")
        let blocks = damaged.report["damaged"] as? [[String: Any]] ?? []
        XCTAssertEqual(blocks.count, 1, "\(damaged.report)")
        XCTAssertEqual(blocks.first?["pack"] as? String, pack.key)
        let versions = damaged.report["versions"] as? [[String: Any]] ?? []
        XCTAssertEqual(versions.map { $0["path"] as? String }, ["/one.bin"], "\(damaged.report)")
        XCTAssertEqual(versions.first?["current"] as? Bool, true)

        // The same bytes copied in: sent, since the server has them only damaged.
        XCTAssertEqual(r.fx.sh("cp src.bin mnt/two.bin").status, 0)
        let second = try uploadedBytes(r)
        XCTAssertGreaterThanOrEqual(second - first, 307200, "two.bin's bytes went up again (\(first) then \(second))")

        // Both files read byte-exact on the other replica, and on the writer once evicted.
        try waitForQuiet(r, b)
        for name in ["two.bin", "one.bin"] {
            let cmp = r.fx.sh("cmp src.bin mnt2/\(name)", timeout: 60)
            XCTAssertEqual(cmp.status, 0, "the second replica reads \(name): \(cmp)\n\(r.logTail())")
        }
        let evict = r.fx.docfs(["evict", r.mnt + "/one.bin", r.mnt + "/two.bin"])
        XCTAssertEqual(evict.status, 0, "\(evict)")
        for name in ["two.bin", "one.bin"] {
            let cmp = r.fx.sh("cmp src.bin mnt/\(name)", timeout: 60)
            XCTAssertEqual(cmp.status, 0, "the writer reads \(name) after its evict: \(cmp)\n\(r.logTail())")
        }

        let clean = try remoteCheck(r)
        XCTAssertEqual(clean.status, 0, "\(clean.report)")
        XCTAssertEqual((clean.report["damaged"] as? [Any])?.count, 0, "\(clean.report)")
    }

    /// A pack whose last block gc dropped (its file deleted) and did not rewrite (the rest is
    /// most of it) is longer than its blocks: the check reads the span they use and finds them
    /// sound (it read the whole pack with room for that span only, and failed whole).
    func testTheCheckReadsAPackWhoseLastBlockGcDropped() throws {
        let r = try makeRemote()
        // Eight files of one size in one copy: packed together (a few packs at most, on a busy machine).
        XCTAssertEqual(
            r.fx.sh("mkdir eight && for n in 1 2 3 4 5 6 7 8; do head -c 50000 /dev/urandom > eight/f$n.bin; done && cp eight/* mnt/").status, 0)
        _ = try uploadedBytes(r)
        let rows = try r.servers.psql(
            r.databaseURL,
            """
            SELECT b.pack_key, i.name FROM docfs_blocks b JOIN docfs_manifest_blocks mb ON mb.hash = b.hash
            JOIN docfs_items i ON i.content_key = mb.key ORDER BY b.pack_key, b.pack_offset
            """
        ).compactMap { row -> (String, String)? in
            guard row.count == 2, let pack = row[0], let name = row[1] else { return nil }
            return (pack, name)
        }
        let byPack = Dictionary(grouping: rows, by: \.0)
        let fullest = try XCTUnwrap(byPack.values.max { $0.count < $1.count })
        XCTAssertGreaterThanOrEqual(fullest.count, 2, "a pack holds several of the files: \(rows)")
        // Its last block goes; the rest (of the same size) is most of the pack.
        XCTAssertEqual(unlink(r.mnt + "/" + fullest.last!.1), 0)
        _ = try r.waitUntilUploaded()
        let gc = try r.gc(["--grace", "0", "--keep-versions", "0"])
        XCTAssertEqual((gc["blocks"] as? NSNumber)?.intValue, 1, "gc dropped the deleted file's block: \(gc)")
        XCTAssertEqual((gc["packsRewritten"] as? NSNumber)?.intValue, 0, "the pack stays as it is: \(gc)")

        let check = try remoteCheck(r)
        XCTAssertEqual(check.status, 0, "\(check.report)")
        XCTAssertEqual((check.report["blocks"] as? NSNumber)?.intValue, 7, "\(check.report)")
        XCTAssertEqual((check.report["damaged"] as? [Any])?.count, 0, "\(check.report)")
    }

    /// Nobody copies the bytes in again: the writer, which still holds them, sends them by itself
    /// once the server marks the block (here by `docfs remote check`).
    func testAReplicaHoldingTheBytesOfADamagedBlockSendsThemAgain() throws {
        let r = try makeRemote(mount: false)
        // The writer asks for damaged blocks every 2 s, not every 15: the heal is seen sooner.
        try r.fx.mount(env: ["DOCFS_HEAL_INTERVAL": "2"])
        XCTAssertEqual(r.fx.sh("head -c 307200 /dev/urandom > src.bin && cp src.bin mnt/one.bin").status, 0)
        _ = try uploadedBytes(r)
        let pack = try XCTUnwrap(try r.objects().first { $0.key.hasPrefix("\(r.prefix)/packs/") })
        _ = try r.servers.s3check(["zero", r.bucket, pack.key])
        XCTAssertEqual(try remoteCheck(r).status, 1)
        let deadline = Date().addingTimeInterval(90)
        var marked = try r.count("SELECT count(*) FROM docfs_blocks WHERE damaged_ns IS NOT NULL")
        while marked > 0, Date() < deadline {
            usleep(500_000)
            marked = try r.count("SELECT count(*) FROM docfs_blocks WHERE damaged_ns IS NOT NULL")
        }
        XCTAssertEqual(marked, 0, "the writer sent the block again\n\(r.logTail())")
        XCTAssertEqual(r.logLines(mentioningAnyOf: ["the server marked damaged"]).count, 1, r.logTail())
        let clean = try remoteCheck(r)
        XCTAssertEqual(clean.status, 0, "\(clean.report)")
        let b = try makeSecond(r)
        try waitForQuiet(r, b)
        let cmp = r.fx.sh("cmp src.bin mnt2/one.bin", timeout: 60)
        XCTAssertEqual(cmp.status, 0, "the second replica reads one.bin: \(cmp)")
    }
}
