import Foundation
import XCTest

/// The bucket is no second door (schema 16), against moto checking signatures and IAM policies
/// (Tests/remote/servers.sh): each replica has S3 keys of its own with the policy `docfs remote
/// add-replica` prints; a replica mounted with only those keys syncs, and another replica's
/// keys can neither overwrite nor delete its packs, whose files stay byte-exact.
final class BucketDoorMountTests: ReplicaTestCase {
    /// `docfs remote add-replica NAME` as the owner, and an IAM user with the policy it printed:
    /// the user's S3 variables.
    func replicaKeys(_ r: RemoteMount, role: String) throws -> [String: String] {
        let added = r.fx.docfs(["remote", "add-replica", role] + r.remoteArguments, env: r.awsEnvironment(secret: r.servers.secretKey))
        XCTAssertEqual(added.status, 0, "\(added)")
        guard let start = added.stdout.firstIndex(of: "{") else { throw FixtureError("no policy printed: \(added)") }
        let policy = String(added.stdout[start...])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(policy.utf8)) as? [String: Any], policy)
        XCTAssertEqual(object["Version"] as? String, "2012-10-17")
        XCTAssert(policy.contains("\(r.prefix)/packs/\(role)/*"), policy)
        XCTAssertFalse(policy.contains("s3:*"), policy)
        for statement in object["Statement"] as? [[String: Any]] ?? [] where statement["Effect"] as? String == "Allow" {
            let actions = statement["Action"] as? [String] ?? []
            XCTAssertFalse(
                actions.contains { $0.hasPrefix("s3:Delete") || $0.hasPrefix("s3:PutBucket") || $0.hasPrefix("s3:PutLifecycle") },
                "no delete, no change to the bucket: \(statement)")
        }
        XCTAssert(policy.contains("\"Deny\"") && policy.contains("s3:DeleteObjectVersion") && policy.contains("s3:PutBucketVersioning"), policy)
        let file = r.fx.dir + "/policy-\(role).json"
        try policy.write(toFile: file, atomically: true, encoding: .utf8)
        let user = try XCTUnwrap(try r.servers.s3check(["create-user", "docfs-\(role)", file]) as? [String: String])
        return ["AWS_ACCESS_KEY_ID": user["id"] ?? "", "AWS_SECRET_ACCESS_KEY": user["secret"] ?? "", "AWS_REGION": "us-east-1"]
    }

    /// Runs s3check.py with `keys`: the error it failed with (nil: it succeeded).
    func refusal(_ r: RemoteMount, _ keys: [String: String], _ args: [String]) -> String? {
        do {
            _ = try r.servers.s3check(args, env: keys)
            return nil
        } catch {
            return "\(error)"
        }
    }

    func testAReplicasKeysAddOnlyItsOwnPacksAndCannotTouchAnothers() throws {
        let r = try makeRemote()
        let second = r.roleName("second"), other = r.roleName("other")
        let secondKeys = try replicaKeys(r, role: second)
        let otherKeys = try replicaKeys(r, role: other)

        // The second replica syncs with only its own keys: its packs land under its folder.
        let b = try makeSecond(r, env: secondKeys, name: "second")
        XCTAssertEqual(r.fx.sh("head -c 200000 /dev/urandom > src.bin && cp src.bin '\(b.mnt)/b.bin'").status, 0)
        try waitForQuiet(r, b)
        let packs = try r.servers.psql(
            r.databaseURL,
            """
            SELECT DISTINCT b.pack_key FROM docfs_items i JOIN docfs_manifest_blocks mb ON mb.key = i.content_key
            JOIN docfs_blocks b ON b.hash = mb.hash WHERE i.name = 'b.bin' AND NOT i.deleted
            """
        ).compactMap { $0.first ?? nil }
        XCTAssertFalse(packs.isEmpty)
        for pack in packs { XCTAssert(pack.hasPrefix("\(r.prefix)/packs/\(second)/"), pack) }
        let pack = try XCTUnwrap(packs.first)

        // The other replica's keys: read the tree, add under its own folder, nothing else.
        XCTAssertNil(refusal(r, otherKeys, ["get", r.bucket, pack]), "reading the tree's objects")
        let own = "\(r.prefix)/packs/\(other)/\(UUID().uuidString.lowercased())"
        XCTAssertNil(refusal(r, otherKeys, ["put", r.bucket, own, "mine"]), "adding under its own folder")
        for (what, args) in [
            ("overwriting the second replica's pack", ["put", r.bucket, pack, "garbage"]),
            ("deleting the second replica's pack", ["delete", r.bucket, pack]),
            ("a pack in the owner's folder", ["put", r.bucket, "\(r.prefix)/packs/\(UUID().uuidString.lowercased())", "x"]),
            ("the tree's marker", ["put", r.bucket, "\(r.prefix)/docfs-tree.json", "{}"]),
            ("deleting its own object", ["delete", r.bucket, own]),
        ] {
            let refused = refusal(r, otherKeys, args)
            XCTAssertNotNil(refused, "\(what): accepted")
            XCTAssert(refused?.contains("AccessDenied") == true, "\(what): \(refused ?? "")")
        }
        // Nor may the second replica's own keys delete its own pack (only the owner's gc deletes).
        XCTAssert(refusal(r, secondKeys, ["delete", r.bucket, pack])?.contains("AccessDenied") == true)

        // The second replica's file reads byte-exact from the bucket on the first replica.
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/b.bin"]).status, 0)
        let cmp = r.fx.sh("cmp src.bin mnt/b.bin", timeout: 90)
        XCTAssertEqual(cmp.status, 0, "the first replica reads b.bin byte-exact: \(cmp)\n\(r.logTail())")
        XCTAssertEqual(r.fx.sh("printf 'from A' > mnt/a.txt").status, 0)
        try waitForQuiet(r, b)
        XCTAssertEqual(contents(b.mnt + "/a.txt"), "from A")
        assertSameTrees(r, b)
    }

    /// A replica's own keys cannot change what it wrote (schema 18): the set-up turned versioning
    /// on, each pack is recorded with the version its upload made and read as that version. With
    /// the writer's own keys, as an attacker holding them would: a PUT over its pack is taken (a
    /// new version no one reads), deleting the pack or any version of it and suspending
    /// versioning are refused; its file still reads byte-exact on the other replica and on the
    /// writer once evicted. The server refuses a pack without a version, or with a bad one.
    func testAReplicasOwnKeysCannotChangeThePacksItWrote() throws {
        let r = try makeRemote()
        XCTAssertEqual(
            try r.servers.psql(r.databaseURL, "SELECT value FROM docfs_meta WHERE key = 'pack_versions'").first?.first, "on",
            "the owner's set-up turned the bucket's versioning on")
        let second = r.roleName("second")
        let secondKeys = try replicaKeys(r, role: second)
        let b = try makeSecond(r, env: secondKeys, name: "second")
        XCTAssertEqual(r.fx.sh("head -c 300000 /dev/urandom > src.bin && cp src.bin '\(b.mnt)/b.bin'").status, 0)
        try waitForQuiet(r, b)
        let rows = try r.servers.psql(
            r.databaseURL,
            """
            SELECT DISTINCT b.pack_key, b.pack_version FROM docfs_items i JOIN docfs_manifest_blocks mb ON mb.key = i.content_key
            JOIN docfs_blocks b ON b.hash = mb.hash WHERE i.name = 'b.bin' AND NOT i.deleted
            """)
        XCTAssertFalse(rows.isEmpty)
        for row in rows {
            let pack = try XCTUnwrap(row[0] ?? nil), version = row[1] ?? nil
            XCTAssert(pack.hasPrefix("\(r.prefix)/packs/\(second)/"), pack)
            XCTAssertNotNil(version, "the pack \(pack) is recorded with its version")
            // The attack, with the writer's own keys: other bytes over its pack (a new version).
            XCTAssertNil(refusal(r, secondKeys, ["put", r.bucket, pack, "garbage"]), "its own folder: \(pack)")
            let versions = try XCTUnwrap(try r.servers.s3check(["versions", r.bucket, pack]) as? [[String: Any]])
            XCTAssertEqual(versions.count, 2, "the pack's bytes and the garbage, each a version: \(versions)")
            XCTAssert(versions.contains { $0["versionId"] as? String == version && $0["latest"] as? Bool == false }, "\(versions)")
            for (what, args) in [("deleting its own pack", ["delete", r.bucket, pack])]
                + versions.compactMap({ $0["versionId"] as? String }).map({ ("deleting the version \($0)", ["delete-version", r.bucket, pack, $0]) })
                + [("suspending the bucket's versioning", ["suspend-versioning", r.bucket])]
            {
                let refused = refusal(r, secondKeys, args)
                XCTAssert(refused?.contains("AccessDenied") == true, "\(what): \(refused ?? "accepted")")
            }
            XCTAssertEqual((try r.servers.s3check(["versions", r.bucket, pack]) as? [[String: Any]])?.count, 2, "no version went")
        }

        // The file reads byte-exact from the bucket on the other replica and on its writer.
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/b.bin"]).status, 0)
        var cmp = r.fx.sh("cmp src.bin mnt/b.bin", timeout: 90)
        XCTAssertEqual(cmp.status, 0, "the first replica reads b.bin byte-exact: \(cmp)\n\(r.logTail())")
        XCTAssertEqual(r.fx.docfs(["evict", b.mnt + "/b.bin"]).status, 0)
        cmp = r.fx.sh("cmp src.bin '\(b.mnt)/b.bin'", timeout: 90)
        XCTAssertEqual(cmp.status, 0, "the writer reads b.bin byte-exact once evicted: \(cmp)")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE damaged_ns IS NOT NULL"), 0, "nothing found damaged")

        // The server takes a pack only with a version id of the right shape, once versioning is
        // on, and never another version for a pack recorded with one.
        let hash = String(repeating: "a", count: 64)
        let fresh = "\(r.prefix)/packs/\(second)/\(UUID().uuidString.lowercased())"
        _ = try r.servers.psql(r.roleURL(second), "SELECT docfs_record_intents(ARRAY['\(fresh)'])")
        let record = { (version: String) in
            "SELECT docfs_record_pack('\(fresh)', 1, ARRAY['\(hash)'], ARRAY[0::bigint], ARRAY[1::bigint]\(version))"
        }
        for (what, sql, expected) in [
            ("no version", record(""), "no version id"),
            ("a NULL version", record(", NULL::text"), "no version id"),
            ("a bad version", record(", 'a b'"), "not a version id"),
            ("\"null\"", record(", 'null'"), "not a version id"),
            ("a version too long", record(", repeat('v', 1025)"), "not a version id"),
        ] {
            XCTAssertThrowsError(try r.servers.psql(r.roleURL(second), sql), what) { error in
                XCTAssert("\(error)".contains(expected), "\(what): \(error)")
            }
        }
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks WHERE pack_key = '\(fresh)'"), 0, "nothing of a refused call stays")
        _ = try r.servers.psql(r.roleURL(second), record(", 'v1'"))
        XCTAssertThrowsError(try r.servers.psql(r.roleURL(second), record(", 'v2'")), "another version") { error in
            XCTAssert("\(error)".contains("recorded with another version"), "\(error)")
        }
        XCTAssertEqual(
            try r.servers.psql(r.databaseURL, "SELECT DISTINCT pack_version FROM docfs_blocks WHERE pack_key = '\(fresh)'")
                .map { $0.first ?? nil }, ["v1"])
        XCTAssertEqual(r.fx.sh("printf 'still writing' > '\(b.mnt)/after.txt'").status, 0)
        try waitForQuiet(r, b)
        XCTAssertEqual(contents(r.mnt + "/after.txt"), "still writing")
    }

    /// Dedup never counts on another replica's pack, whose bytes that replica's keys may still
    /// overwrite (IAM has no portable "no overwrite"): the same bytes written on a third replica
    /// go into its own pack, and read byte-exact after the first writer overwrote its packs.
    func testDedupNeverCountsOnAnotherReplicasPack() throws {
        let r = try makeRemote()
        let second = r.roleName("second"), other = r.roleName("other")
        let secondKeys = try replicaKeys(r, role: second)
        let otherKeys = try replicaKeys(r, role: other)
        let b = try makeSecond(r, env: secondKeys, name: "second")
        let c = try makeSecond(r, env: otherKeys, name: "other")
        XCTAssertEqual(r.fx.sh("head -c 300000 /dev/urandom > src.bin && cp src.bin '\(b.mnt)/b.bin'").status, 0)
        try waitForQuiet(r, b, others: [c])
        XCTAssertEqual(r.fx.sh("cp src.bin '\(c.mnt)/c.bin'").status, 0)
        try waitForQuiet(r, b, others: [c])

        func blocks(_ name: String, outside folder: String) throws -> (all: Int, outside: Int) {
            let rows = try r.servers.psql(
                r.databaseURL,
                """
                SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks p WHERE p.hash = mb.hash
                                                                 AND p.pack_key LIKE '\(r.prefix)/packs/\(folder)/%'))
                FROM docfs_items i JOIN docfs_manifest_blocks mb ON mb.key = i.content_key
                WHERE i.name = '\(name)' AND NOT i.deleted
                """)
            let row = try XCTUnwrap(rows.first)
            return (Int(row[0] ?? "") ?? -1, Int(row[1] ?? "") ?? -1)
        }
        let bBlocks = try blocks("b.bin", outside: second), cBlocks = try blocks("c.bin", outside: other)
        XCTAssertGreaterThan(bBlocks.all, 0)
        XCTAssertEqual(cBlocks.all, bBlocks.all, "the same bytes, the same blocks")
        XCTAssertEqual(cBlocks.outside, 0, "every block of c.bin has a place in the third replica's own folder")

        // The second replica overwrites its own packs with garbage, as its keys allow.
        let packs = try r.servers.psql(
            r.databaseURL, "SELECT DISTINCT pack_key FROM docfs_blocks WHERE pack_key LIKE '\(r.prefix)/packs/\(second)/%'"
        )
        .compactMap { $0.first ?? nil }
        XCTAssertFalse(packs.isEmpty)
        for pack in packs { XCTAssertNil(refusal(r, secondKeys, ["put", r.bucket, pack, "garbage"]), "its own folder: \(pack)") }

        // The third replica's file still reads byte-exact from the bucket on the first replica.
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/c.bin"]).status, 0)
        let cmp = r.fx.sh("cmp src.bin mnt/c.bin", timeout: 90)
        XCTAssertEqual(cmp.status, 0, "c.bin byte-exact after the second replica overwrote its packs: \(cmp)\n\(r.logTail())")
    }
}
