import Foundation
import XCTest

/// Blocks keep their places (schema 16), on the loopback servers, with one replica role's own
/// password through psql: a mark is a report that moves nothing, a place of another length is
/// another block's (schema 20: a block is its hash and its length) and refuses no one's upload,
/// a place is dropped only once two replicas (or the owner's check) found it damaged and another
/// is there; meanwhile every other replica reads its files byte-exact and its uploads land.
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

    /// The packs block `hash` (of `length` bytes, or of any) has a place in.
    func places(_ r: RemoteMount, _ hash: String, length: Int64? = nil) throws -> Set<String> {
        let sql = "SELECT pack_key FROM docfs_blocks WHERE hash = '\(hash)'" + (length.map { " AND length = \($0)" } ?? "")
        return Set(try r.servers.psql(r.databaseURL, sql).compactMap { $0.first ?? nil })
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
    /// length. The mark flags one place and moves nothing; the other length is a place of another
    /// block, which no manifest of the others names; two lengths of one hash in one call, or one
    /// that contradicts the caller's own place, are refused; a place of the right length in a
    /// pack that holds nothing is one more place, never in place of the sound one. Another replica
    /// reads the file byte-exact, the same bytes uploaded again land, and the owner's check drops
    /// the empty place and clears the false mark.
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

        // Re-placing it with another length: refused, whatever the pack's size. The first place is
        // in the owner's pack (this mount is the owner's), which every replica counts on; a place
        // of another length beside a replica's place is another block's (the next test).
        let newPack = "\(r.prefix)/packs/\(hostile)/\(UUID().uuidString.lowercased())"
        let otherPack = "\(r.prefix)/packs/\(hostile)/\(UUID().uuidString.lowercased())"
        let ownPack = "\(r.prefix)/packs/\(hostile)/\(UUID().uuidString.lowercased())"
        _ = try r.servers.psql(r.roleURL(hostile), "SELECT docfs_record_intents(ARRAY['\(newPack)', '\(otherPack)', '\(ownPack)'])")
        assertRefused(
            r, hostile, "a place with the issue's length",
            """
            SELECT docfs_record_pack('\(newPack)', 4294967296, ARRAY['\(hash)'], ARRAY[123::bigint], ARRAY[99999::bigint], 'v1')
            """, "length is not the block's")
        assertRefused(
            r, hostile, "a place one byte short",
            """
            SELECT docfs_record_pack('\(newPack)', \(length), ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[\(length - 1)::bigint], 'v1')
            """, "length is not the block's")
        // Nor may a replica contradict its own sound place.
        _ = try r.servers.psql(
            r.roleURL(hostile), "SELECT docfs_record_pack('\(otherPack)', 100, ARRAY[repeat('d', 64)], ARRAY[0::bigint], ARRAY[10::bigint], 'v1')")
        assertRefused(
            r, hostile, "a length its own place contradicts",
            """
            SELECT docfs_record_pack('\(ownPack)', 100, ARRAY[repeat('d', 64)], ARRAY[0::bigint], ARRAY[7::bigint], 'v1')
            """, "length is not the block's")
        // A manifest's lengths are checked like its hashes, and sum to its size.
        let manifestKey = "\(r.prefix)/manifests/\(UUID().uuidString.lowercased())-0123456789abcdef"
        for (size, lengths, words) in [
            (length, "[\"x\"]", "not a block hash or length"), (length, "[0]", "not a block hash or length"),
            (length, "[1.5]", "not a block hash or length"), (length, "[1, 2]", "not a block hash or length"),
            (length + 1, "[\(length)]", "another number of bytes"),
        ] {
            assertRefused(
                r, hostile, "a manifest of \(size) bytes with lengths \(lengths)",
                """
                SELECT docfs_record_manifests('[{"key": "\(manifestKey)", "size": \(size), "hashes": ["\(hash)"], "lengths": \(lengths)}]'::jsonb, '{}')
                """, words)
        }
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_manifests WHERE key = '\(manifestKey)'"), 0)
        assertRefused(
            r, hostile, "one hash with two lengths in one pack",
            """
            SELECT docfs_record_pack('\(newPack)', 100, ARRAY[repeat('c', 64), repeat('c', 64)], ARRAY[0::bigint, 10::bigint],
                                     ARRAY[10::bigint, 20::bigint])
            """, "length is not the block's")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key IN ('\(newPack)', '\(ownPack)')"), 0,
            "nothing of a refused call stays")
        XCTAssertEqual(try places(r, hash, length: length), [pack])

        // The mark (twice: still one role's report), then a place of the right length in a pack
        // that holds nothing, in one transaction (before the writer's heal adds a sound place):
        // one more place, never in place of the first.
        _ = try r.servers.psql(
            r.roleURL(hostile),
            """
            SELECT docfs_mark_block_damaged('\(hash)', '\(pack)'); SELECT docfs_mark_block_damaged('\(hash)', '\(pack)');
            SELECT docfs_record_pack('\(newPack)', \(length), ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[\(length)::bigint], 'v1')
            """)
        XCTAssertEqual(try places(r, hash, length: length), [pack, newPack], "the first place stays")
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
        XCTAssert(try places(r, hash, length: length).contains(pack), "the first place stays")

        // The owner's check: the empty place is dropped (the block has others), the false mark
        // cleared. The hostile's own block, in a pack it never sent, is the only damage it finds,
        // and no version names it (gc drops it once unnamed past its grace).
        let check = try ownersCheck(r)
        let damaged = (check.report["damaged"] as? [[String: Any]]) ?? []
        XCTAssertEqual(Set(damaged.compactMap { $0["pack"] as? String }), [otherPack], "\(check.report)")
        XCTAssert(damaged.allSatisfy { ($0["named"] as? Bool) == false }, "\(check.report)")
        XCTAssertEqual((check.report["versions"] as? [Any])?.count ?? 0, 0, "\(check.report)")
        let after = try places(r, hash, length: length)
        XCTAssert(after.contains(pack) && !after.contains(newPack), "\(after)")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE damaged_ns IS NOT NULL AND pack_key <> '\(otherPack)'"), 0)
        assertSameTrees(r, b)
    }

    /// A replica role records, in advance, a block anyone can guess (a small file's SHA-256) with
    /// a length that is not its bytes', in its own pack. Another replica then writes those bytes
    /// and an unrelated file in one go: both land (a place of another length is another block's,
    /// never a reason to refuse a pack) and the first replica reads both byte-exact. Recorded
    /// after the other replica's place, a third length is one more block of its own, and the
    /// file still reads.
    func testABlockRecordedFirstWithAnotherLengthHoldsNoOneUp() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        let b = try makeSecond(r, name: "honest")
        try waitForQuiet(r, b)
        let hostile = r.roleName("hostile")
        _ = try r.replicaArguments(role: "hostile")

        let guessed = "a file anyone could guess\n"
        XCTAssertEqual(r.fx.sh("printf '\(guessed)' > guessed.txt").status, 0)
        let hash = String(r.fx.sh("sha256sum guessed.txt").stdout.prefix(64))
        let pack = "\(r.prefix)/packs/\(hostile)/\(UUID().uuidString.lowercased())"
        _ = try r.servers.psql(r.roleURL(hostile), "SELECT docfs_record_intents(ARRAY['\(pack)'])")
        _ = try r.servers.psql(
            r.roleURL(hostile), "SELECT docfs_record_pack('\(pack)', 100, ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[1::bigint], 'v1')")

        XCTAssertEqual(
            r.fx.sh(
                "cp guessed.txt '\(b.mnt)/shared/guessed.txt' && head -c 100000 /dev/urandom > other.bin && cp other.bin '\(b.mnt)/shared/other.bin'"
            ).status, 0)
        try waitForQuiet(r, b)
        for name in ["guessed.txt", "other.bin"] {
            let cmp = r.fx.sh("cmp \(name) mnt/shared/\(name)", timeout: 90)
            XCTAssertEqual(cmp.status, 0, "\(name) reached A byte-exact: \(cmp)\n\(r.logTail())")
        }
        XCTAssertEqual(contents(r.mnt + "/shared/a.txt"), "from A")
        XCTAssertEqual(try places(r, hash, length: Int64(guessed.utf8.count)).count, 1, "the honest block has its own place")
        XCTAssertEqual(try places(r, hash, length: 1), [pack], "the hostile's block stays its own")
        XCTAssertEqual(
            try r.count(
                """
                SELECT count(*) FROM docfs_items i JOIN docfs_manifest_blocks mb ON mb.key = i.content_key
                WHERE i.name = 'guessed.txt' AND NOT i.deleted AND mb.hash = '\(hash)' AND mb.length = \(guessed.utf8.count)
                """), 1, "the file's manifest names the block by its hash and its length")

        // (Another role: the first may not contradict its own place.)
        let latecomer = r.roleName("latecomer")
        _ = try r.replicaArguments(role: "latecomer")
        let later = "\(r.prefix)/packs/\(latecomer)/\(UUID().uuidString.lowercased())"
        _ = try r.servers.psql(r.roleURL(latecomer), "SELECT docfs_record_intents(ARRAY['\(later)'])")
        _ = try r.servers.psql(
            r.roleURL(latecomer), "SELECT docfs_record_pack('\(later)', 100, ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[2::bigint], 'v1')")
        XCTAssertEqual(try places(r, hash, length: 2), [later])
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/shared/guessed.txt"]).status, 0)
        XCTAssertEqual(contents(r.mnt + "/shared/guessed.txt"), guessed, "read again from the honest replica's place")
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
