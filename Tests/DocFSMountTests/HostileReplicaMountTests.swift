import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// The server is the only door (schema 11): one replica's credentials, used by hand with psql,
/// can change nothing the server's functions do not check. Each attempt is refused; meanwhile
/// the other replicas keep syncing, their daemons stay up and every file reads byte-exact.
final class HostileReplicaMountTests: ReplicaTestCase {
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

    func testAHostileReplicaIsRefusedAndTheOthersGoOn() throws {
        let r = try makeRemote()
        XCTAssertEqual(
            r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt && head -c 300000 /dev/urandom > mnt/shared/big.bin").status, 0)
        try r.waitUntilUploaded()
        let second = try makeSecond(r, name: "honest")
        let third = try makeSecond(r, name: "third")
        XCTAssertEqual(r.fx.sh("printf 'from B' > '\(second.mnt)/shared/b.txt'").status, 0)
        try waitForQuiet(r, second, others: [third])
        let honest = r.roleName("honest"), hostile = r.roleName("hostile")
        _ = try r.replicaArguments(role: "hostile")
        let before = try r.serverTree()
        let root = try XCTUnwrap(r.servers.psql(r.databaseURL, "SELECT id FROM docfs_items WHERE parent_id IS NULL").first?.first ?? nil)
        let shared = try XCTUnwrap(before["/shared"]?.id)
        let honestOperation = try XCTUnwrap(
            r.servers.psql(
                r.databaseURL,
                "SELECT operation_id FROM docfs_changes WHERE role = '\(honest)' LIMIT 1"
            ).first?.first ?? nil)
        let honestManifest = try XCTUnwrap(
            r.servers.psql(
                r.databaseURL,
                "SELECT key FROM docfs_manifests WHERE role = '\(honest)' LIMIT 1"
            ).first?.first ?? nil)
        let knownBlock = try XCTUnwrap(r.servers.psql(r.databaseURL, "SELECT hash, pack_key, length FROM docfs_blocks LIMIT 1").first)
        let (hash, pack, length) = (knownBlock[0] ?? "", knownBlock[1] ?? "", knownBlock[2] ?? "0")
        let packs = "replica/packs/"
        let newPack = packs + hostile + "/" + UUID().uuidString.lowercased()

        // Plain SQL on the tables: nothing but reading.
        assertRefused(
            r, hostile, "a change-log row far ahead (freezes every replica)",
            """
            INSERT INTO docfs_changes (position, item_id, kind, operation_id, content_version, metadata_version, at_ns)
            VALUES (9000000000000000000, \(shared), 'create', gen_random_uuid(), 1, 1, 0)
            """, "permission denied")
        assertRefused(
            r, hostile, "a block of length 0",
            """
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns) VALUES (repeat('a', 64), '\(newPack)', 0, 0, 0)
            """, "permission denied")
        assertRefused(r, hostile, "a block made negative", "UPDATE docfs_blocks SET length = -1", "permission denied")
        assertRefused(r, hostile, "a name with a slash", "UPDATE docfs_items SET name = 'a/b' WHERE id = \(shared)", "permission denied")
        assertRefused(
            r, hostile, "a version with a wrong SHA-256",
            """
            INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, sha256)
            VALUES (\(shared), 9, 'x', 1, 0, repeat('0', 64))
            """, "permission denied")
        assertRefused(r, hostile, "reading others' upload intents", "SELECT key FROM docfs_upload_intents", "permission denied")
        assertRefused(r, hostile, "deleting others' upload intents", "DELETE FROM docfs_upload_intents", "permission denied")
        assertRefused(r, hostile, "reading the operations' owners", "SELECT * FROM docfs_operations", "permission denied")
        assertRefused(r, hostile, "the owner's layout", "SELECT docfs_set_layout(gen_random_uuid(), '{}')", "permission denied")
        assertRefused(r, hostile, "a table of its own", "CREATE TABLE docfs_mine (x int)", "permission denied")

        // Through the functions: every field checked.
        let create = { (fields: String) in #"{"op":"\#(UUID())","kind":"create","parent":\#(shared),\#(fields)}"# }
        try assertOperationRefused(r, hostile, "a name with /", create(#""name":"a/b","item_kind":"directory""#), "is not a valid item name")
        try assertOperationRefused(
            r, hostile, "a 4 KiB name", create(#""name":"\#(String(repeating: "x", count: 4096))","item_kind":"directory""#),
            "is not a valid item name")
        try assertOperationRefused(r, hostile, "the name ..", create(#""name":"..","item_kind":"directory""#), "is not a valid item name")
        try assertOperationRefused(r, hostile, "an empty name", create(#""name":"","item_kind":"directory""#), "is not a valid item name")
        try assertOperationRefused(r, hostile, "a kind no folder holds", create(#""name":"s","item_kind":"socket""#), "is not a kind of item")
        try assertOperationRefused(r, hostile, "a mode out of range", create(#""name":"m","item_kind":"directory","mode":99999"#), "out of range")
        try assertOperationRefused(r, hostile, "an owner out of range", create(#""name":"u","item_kind":"directory","uid":-1"#), "out of range")
        try assertOperationRefused(
            r, hostile, "a time before any", create(#""name":"t","item_kind":"directory","created_ns":-9000000000000000000"#),
            "out of range")
        try assertOperationRefused(
            r, hostile, "another replica's contents",
            create(#""name":"stolen","item_kind":"file","content_key":"\#(honestManifest)","size":6"#),
            "not recorded by this replica")
        try assertOperationRefused(
            r, hostile, "contents no upload recorded",
            create(#""name":"ghost","item_kind":"file","content_key":"replica/objects/ghost","size":1"#),
            "is not on the server")
        try assertOperationRefused(
            r, hostile, "another replica's operation id (a replay, or one pre-empted)",
            #"{"op":"\#(honestOperation)","kind":"create","parent":\#(shared),"name":"p","item_kind":"directory"}"#,
            "belongs to another replica")
        try assertOperationRefused(
            r, hostile, "a forged operation kind", #"{"op":"\#(UUID())","kind":"layout","item":\#(root)}"#,
            "not an operation")

        // Packs, blocks, manifests and intents.
        assertRefused(
            r, hostile, "a pack recorded without its intent",
            """
            SELECT docfs_record_pack('\(newPack)', 10, ARRAY[repeat('b', 64)], ARRAY[0::bigint], ARRAY[10::bigint])
            """, "has no upload intent")
        assertRefused(
            r, hostile, "an intent outside the tree's prefix",
            """
            SELECT docfs_record_intents(ARRAY['elsewhere/packs/\(UUID().uuidString.lowercased())'])
            """, "not a pack or manifest of this tree")
        // Packs only under its own folder (schema 16): neither another replica's nor the owner's.
        for elsewhere in [packs + honest + "/", packs] {
            assertRefused(
                r, hostile, "an intent for a pack outside its folder",
                """
                SELECT docfs_record_intents(ARRAY['\(elsewhere)\(UUID().uuidString.lowercased())'])
                """, "is not under this replica's folder")
        }
        _ = try r.servers.psql(r.roleURL(hostile), "SELECT docfs_record_intents(ARRAY['\(newPack)'])")
        for (what, offset, length, size, words) in [
            ("a block of length 0", 0, 0, 10, "not a place in a pack"),
            ("a block of negative length", 0, -5, 10, "not a place in a pack"),
            ("a block past its pack's end", 8, 4, 10, "not a place in a pack"),
            ("a huge pack", 0, 10, 1_000_000_000_000_000, "not a pack size"),
        ] {
            assertRefused(
                r, hostile, what,
                """
                SELECT docfs_record_pack('\(newPack)', \(size), ARRAY[repeat('b', 64)], ARRAY[\(offset)::bigint], ARRAY[\(length)::bigint])
                """, words)
        }
        // A block the tree has, recorded again elsewhere: the sound one keeps its place (dedup is not poisoned).
        _ = try r.servers.psql(
            r.roleURL(hostile),
            """
            SELECT docfs_record_pack('\(newPack)', \(length), ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[\(length)::bigint], 'v1')
            """)
        XCTAssertEqual(try r.servers.psql(r.databaseURL, "SELECT pack_key FROM docfs_blocks WHERE hash = '\(hash)'").first?.first, pack)
        assertRefused(
            r, hostile, "a manifest claiming another replica's operation",
            """
            SELECT docfs_record_manifests('[{"key":"replica/manifests/\(honestOperation)-0123456789abcdef","size":\(length),"hashes":["\(hash)"]}]', '{}')
            """, "belongs to another replica")
        assertRefused(
            r, hostile, "a manifest whose size is not its blocks'",
            """
            SELECT docfs_record_manifests('[{"key":"replica/manifests/\(UUID().uuidString.lowercased())-0123456789abcdef","size":\((Int(length) ?? 0) + 1),"hashes":["\(hash)"]}]', '{}')
            """, "bytes in its blocks")
        // Another replica's intent: neither renewed nor dropped by this one.
        let honestPack = packs + honest + "/" + UUID().uuidString.lowercased()
        _ = try r.servers.psql(r.roleURL(honest), "SELECT docfs_record_intents(ARRAY['\(honestPack)'])")
        assertRefused(
            r, hostile, "taking another replica's intent", "SELECT docfs_record_intents(ARRAY['\(honestPack)'])",
            "is not under this replica's folder")
        _ = try r.servers.psql(r.roleURL(hostile), "SELECT docfs_drop_intents(ARRAY['\(honestPack)'])")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_upload_intents WHERE key = '\(honestPack)'"), 1,
            "another replica's intent stays")

        // Nothing of that reached the tree, and the honest replicas go on.
        let after = try r.serverTree()
        XCTAssertEqual(Set(after.keys), Set(before.keys), "the tree is as the honest replicas left it")
        XCTAssertEqual(r.fx.sh("printf 'A again' > mnt/shared/a2.txt && printf 'B again' > '\(second.mnt)/shared/b2.txt'").status, 0)
        try waitForQuiet(r, second, others: [third])
        for mnt in [r.mnt, second.mnt, third.mnt] {
            XCTAssertEqual(contents(mnt + "/shared/a2.txt"), "A again")
            XCTAssertEqual(contents(mnt + "/shared/b2.txt"), "B again")
            XCTAssertEqual(r.fx.sh("cmp mnt/shared/big.bin '\(mnt)/shared/big.bin'").status, 0, "\(mnt) reads big.bin byte-exact")
        }
        assertSameTrees(r, second)
        let versions = r.fx.docfs(["versions", second.mnt + "/shared/b2.txt"], env: r.awsEnvironment(secret: r.servers.secretKey), timeout: 60)
        XCTAssert(versions.stdout.contains("(role \(honest))"), "the server recorded who sent it: \(versions)")
    }

    func testARemovedReplicaStopsWithOneLineAndTheOthersNeverNotice() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        // Its stall is retried every 2 s, not every minute: let in again, it goes on within seconds.
        let leaving = try makeSecond(r, env: ["DOCFS_STALLED_RETRY": "2"], name: "leaving")
        try waitForQuiet(r, leaving)
        let role = r.roleName("leaving")
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let removed = r.fx.docfs(["remote", "remove-replica", role] + r.remoteArguments, env: env)
        XCTAssertEqual(removed.status, 0, "\(removed)")
        XCTAssertEqual(r.fx.sh("printf 'kept here' > '\(leaving.mnt)/shared/late.txt' && printf 'A goes on' > mnt/shared/a2.txt").status, 0)
        try r.waitUntilUploaded()
        var fields: [String: Any]?
        eventually("the removed replica says so", timeout: 60) {
            fields = statusFields(r, leaving.mnt)
            return (fields?["lastError"] as? String)?.contains("not permitted to log in") == true
                && (fields?["pending"] as? NSNumber)?.intValue ?? 0 > 0
        }
        if (fields?["lastError"] as? String)?.contains("not permitted to log in") != true {
            XCTFail("status: \(fields ?? [:])\nlog: \(r.fx.sh("tail -20 '\(leaving.store)/docfs.log'").stdout)")
        }
        XCTAssertEqual(contents(leaving.mnt + "/shared/late.txt"), "kept here", "its change stays here, waiting")
        eventually("the other replica's change still reaches the removed one's tree on the server", timeout: 30) {
            (try? r.serverTree()["/shared/a2.txt"]) != nil
        }
        XCTAssertNil(try r.serverTree()["/shared/late.txt"])
        let list = r.fx.docfs(["remote", "replicas", "--json"] + r.remoteArguments, env: env)
        XCTAssertEqual(list.status, 0, "\(list)")
        let entries = (try? JSONSerialization.jsonObject(with: Data(list.stdout.utf8))) as? [[String: Any]] ?? []
        XCTAssertEqual(entries.first { $0["name"] as? String == role }?["active"] as? Bool, false, "listed as removed: \(list.stdout)")
        // Let in again: what waited goes up.
        let again = r.fx.docfs(["remote", "add-replica", role] + r.remoteArguments, env: env)
        XCTAssertEqual(again.status, 0, "\(again)")
        try waitForQuiet(r, leaving)
        XCTAssertEqual(contents(r.mnt + "/shared/late.txt"), "kept here")
    }
}
