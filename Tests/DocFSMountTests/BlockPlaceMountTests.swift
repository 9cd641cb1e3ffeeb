import Foundation
import XCTest

/// Blocks keep their places (schema 16), on the loopback servers, with one replica role's own
/// password through psql: a mark is a report that moves nothing, a place of another length is
/// refused, a place is dropped only once two replicas (or the owner's check) found it damaged
/// and another is there; meanwhile every other replica reads its files byte-exact and its
/// uploads land.
final class BlockPlaceMountTests: ReplicaTestCase {
    /// Runs `sql` as `role`: the server must refuse it with a message holding `words`.
    func assertRefused(
        _ r: RemoteMount, _ role: String, _ what: String, _ sql: String, _ words: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let rows = try r.servers.psql(r.roleURL(role), sql)
            XCTFail("\(what): the server accepted it: \(rows)", file: file, line: line)
        } catch {
            XCTAssert("\(error)".contains(words), "\(what): expected \"\(words)\", got \(error)", file: file, line: line)
        }
    }

    /// The first block of the live file `name`: its hash, its place's pack and its length.
    func firstBlock(_ r: RemoteMount, of name: String) throws -> (hash: String, pack: String, length: Int64) {
        let row = try XCTUnwrap(
            r.servers.psql(
                r.databaseURL,
                """
                SELECT b.hash, b.pack_key, b.length FROM docfs_items i JOIN docfs_manifest_blocks mb ON mb.key = i.content_key
                JOIN docfs_blocks b ON b.hash = mb.hash WHERE i.name = '\(name)' AND NOT i.deleted ORDER BY mb.ordinal LIMIT 1
                """
            ).first)
        return (row[0] ?? "", row[1] ?? "", Int64(row[2] ?? "") ?? 0)
    }

    /// The packs block `hash` has a place in.
    func places(_ r: RemoteMount, _ hash: String) throws -> Set<String> {
        Set(try r.servers.psql(r.databaseURL, "SELECT pack_key FROM docfs_blocks WHERE hash = '\(hash)'").compactMap { $0.first ?? nil })
    }

    /// `docfs remote check STORE --json` as the owner: its exit status and report.
    func ownersCheck(_ r: RemoteMount) throws -> (status: Int32, report: [String: Any]) {
        let run = r.fx.docfs(["remote", "check", r.fx.store, "--json"], env: r.awsEnvironment(secret: r.servers.secretKey), timeout: 120)
        guard let report = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] else {
            throw FixtureError("docfs remote check: \(run)")
        }
        return (run.status, report)
    }

    /// The issue's attack: mark a sound block, then record a pack re-placing it with another
    /// length. The mark flags one place and moves nothing; the other length is refused; a place
    /// of the right length in a pack that holds nothing is one more place, never in place of
    /// the sound one. Another replica reads the file byte-exact, the same bytes uploaded again
    /// land, and the owner's check drops the empty place and clears the false mark.
    func testAMarkAndAPlaceOfAnotherLengthMoveNoBlock() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("head -c 300000 /dev/urandom > src.bin && cp src.bin mnt/big.bin && printf 'small' > mnt/small.txt").status, 0)
        try r.waitUntilUploaded()
        let b = try makeSecond(r, name: "reader")
        try waitForQuiet(r, b)
        let hostile = r.roleName("hostile")
        _ = try r.replicaArguments(role: "hostile")
        let (hash, pack, length) = try firstBlock(r, of: "big.bin")
        XCTAssertGreaterThan(length, 0)

        // Re-placing it with another length: refused, whatever the pack's size.
        let newPack = "\(r.prefix)/packs/\(hostile)/\(UUID().uuidString.lowercased())"
        _ = try r.servers.psql(r.roleURL(hostile), "SELECT docfs_record_intents(ARRAY['\(newPack)'])")
        assertRefused(
            r, hostile, "a place with the issue's length",
            """
            SELECT docfs_record_pack('\(newPack)', 4294967296, ARRAY['\(hash)'], ARRAY[123::bigint], ARRAY[99999::bigint])
            """, "length is not the block's")
        assertRefused(
            r, hostile, "a place one byte short",
            """
            SELECT docfs_record_pack('\(newPack)', \(length), ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[\(length - 1)::bigint])
            """, "length is not the block's")
        assertRefused(
            r, hostile, "one hash with two lengths in one pack",
            """
            SELECT docfs_record_pack('\(newPack)', 100, ARRAY[repeat('c', 64), repeat('c', 64)], ARRAY[0::bigint, 10::bigint],
                                     ARRAY[10::bigint, 20::bigint])
            """, "length is not the block's")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(newPack)'"), 0, "nothing of a refused call stays")
        XCTAssertEqual(try places(r, hash), [pack])

        // The mark (twice: still one role's report), then a place of the right length in a pack
        // that holds nothing, in one transaction (before the writer's heal adds a sound place):
        // one more place, never in place of the first.
        _ = try r.servers.psql(
            r.roleURL(hostile),
            """
            SELECT docfs_mark_block_damaged('\(hash)', '\(pack)'); SELECT docfs_mark_block_damaged('\(hash)', '\(pack)');
            SELECT docfs_record_pack('\(newPack)', \(length), ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[\(length)::bigint], 'v1')
            """)
        XCTAssertEqual(try places(r, hash).intersection([pack, newPack]), [pack, newPack], "the first place stays")
        XCTAssertEqual(
            try r.count("SELECT reports FROM docfs_blocks WHERE hash = '\(hash)' AND pack_key = '\(pack)'"), 1,
            "one role's marks are one report")

        // The other replica reads the file from the bucket byte-exact (the empty place tried,
        // reported, and the first one read), and the writer does too once it evicted its copy.
        XCTAssertEqual(r.fx.docfs(["evict", b.mnt + "/big.bin"]).status, 0)
        let read = r.fx.sh("cmp src.bin '\(b.mnt)/big.bin'", timeout: 90)
        XCTAssertEqual(read.status, 0, "the reader reads big.bin byte-exact: \(read)\n\(r.logTail())")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_block_reports WHERE pack_key = '\(newPack)' AND role = '\(r.roleName("reader"))'"), 1,
            "the reader tried the unflagged empty place first, reported it, and read the first place")
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/big.bin"]).status, 0)
        XCTAssertEqual(r.fx.sh("cmp src.bin mnt/big.bin", timeout: 90).status, 0, "the writer reads big.bin byte-exact")

        // Uploads naming the block land, on either replica.
        XCTAssertEqual(r.fx.sh("cp src.bin mnt/copy.bin && cp src.bin '\(b.mnt)/copy-b.bin'").status, 0)
        try waitForQuiet(r, b)
        for (mnt, name) in [(b.mnt, "copy.bin"), (r.mnt, "copy-b.bin")] {
            XCTAssertEqual(r.fx.docfs(["evict", "\(mnt)/\(name)"]).status, 0)
            let cmp = r.fx.sh("cmp src.bin '\(mnt)/\(name)'", timeout: 90)
            XCTAssertEqual(cmp.status, 0, "\(mnt) reads \(name): \(cmp)")
        }
        XCTAssert(try places(r, hash).contains(pack), "the first place stays")

        // The owner's check: the empty place is dropped (the block has others), the false mark cleared.
        let check = try ownersCheck(r)
        XCTAssertEqual(check.status, 0, "\(check.report)")
        XCTAssertEqual((check.report["damaged"] as? [Any])?.count, 0, "\(check.report)")
        let after = try places(r, hash)
        XCTAssert(after.contains(pack) && !after.contains(newPack), "\(after)")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE damaged_ns IS NOT NULL"), 0)
        assertSameTrees(r, b)
    }

    /// A place truly damaged (its pack zeroed): one replica's report flags it and drops nothing;
    /// the second replica's report confirms it, and it goes once the writer, which holds the
    /// bytes, has sent them again; both readers then read the file byte-exact.
    func testTwoReplicasReportsDropADamagedPlaceOnceAnotherIsThere() throws {
        let r = try makeRemote(mount: false)
        // The writer asks for damaged blocks every 2 s, not every 15: the heal is seen sooner.
        try r.fx.mount(env: ["DOCFS_HEAL_INTERVAL": "2"])
        XCTAssertEqual(r.fx.sh("head -c 200000 /dev/urandom > src.bin && cp src.bin mnt/one.bin").status, 0)
        try r.waitUntilUploaded()
        let b = try makeSecond(r, name: "second")
        let c = try makeSecond(r, name: "third")
        try waitForQuiet(r, b, others: [c])
        let (hash, pack, _) = try firstBlock(r, of: "one.bin")
        let blocksThere = try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(pack)'")
        XCTAssertGreaterThan(blocksThere, 0)
        _ = try r.servers.s3check(["zero", r.bucket, pack])

        // The second replica's reader finds it damaged (EIO: its only place) and reports it.
        XCTAssertNotEqual(r.fx.sh("cat '\(b.mnt)/one.bin' > /dev/null", timeout: 90).status, 0, "the damaged block is not read")
        eventually("the reader's report reached the server", timeout: 60) {
            ((try? r.count("SELECT count(*) FROM docfs_block_reports WHERE hash = '\(hash)' AND pack_key = '\(pack)'")) ?? 0) >= 1
        }
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(pack)'"), blocksThere,
            "one replica's report drops no place")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(pack)' AND confirmed"), 0)

        // The third replica's reports (its own password) confirm them: the places go once the
        // writer has sent the bytes again (never while one is its block's only place).
        let third = r.roleName("third")
        for row in try r.servers.psql(r.databaseURL, "SELECT hash FROM docfs_blocks WHERE pack_key = '\(pack)'") {
            _ = try r.servers.psql(r.roleURL(third), "SELECT docfs_mark_block_damaged('\(row[0] ?? "")', '\(pack)')")
        }
        XCTAssertGreaterThan(try r.count("SELECT count(*) FROM docfs_blocks WHERE hash = '\(hash)'"), 0, "the block keeps a place")
        eventually("the writer sent the bytes again and the damaged places went", timeout: 120) {
            ((try? r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(pack)'")) ?? 1) == 0
                && ((try? r.count("SELECT count(*) FROM docfs_blocks WHERE hash = '\(hash)' AND damaged_ns IS NULL")) ?? 0) == 1
        }
        for mnt in [b.mnt, c.mnt] {
            let cmp = r.fx.sh("cmp src.bin '\(mnt)/one.bin'", timeout: 90)
            XCTAssertEqual(cmp.status, 0, "\(mnt) reads one.bin byte-exact after the heal: \(cmp)\n\(r.logTail())")
        }
        let check = try ownersCheck(r)
        XCTAssertEqual(check.status, 0, "\(check.report)")
    }
}
