import Foundation
import XCTest

/// Rows written by hand as the owner (psql as the test's superuser, the server's triggers off:
/// rows of an older server, a hand-edited database) that no replica could have written: names
/// with `/`, of 4 KiB, `../x`; blocks of length 0, negative and huge. Each replica sets them
/// aside with a log line, its daemon stays up, `ls` works and every other file reads byte-exact.
final class HandWrittenRowMountTests: ReplicaTestCase {
    func testRowsNoReplicaCouldWriteAreSetAsideAndNeverCrashADaemon() throws {
        let r = try makeRemote()
        XCTAssertEqual(
            r.fx.sh(
                "head -c 300000 /dev/urandom > big.src && head -c 5000 /dev/urandom > good.src"
                    + " && cp big.src mnt/big.bin && cp good.src mnt/good.txt"
            ).status, 0)
        _ = try r.waitUntilUploaded(timeout: 180)
        let b = try makeSecond(r)
        try waitForQuiet(r, b)

        let server = try r.serverTree()
        let good = try XCTUnwrap(server["/good.txt"] ?? server["good.txt"], "\(server.keys)")
        let goodKey = try XCTUnwrap(good.contentKey)
        let pack = try XCTUnwrap(try r.objects().first { $0.key.hasPrefix("\(r.prefix)/packs/") }?.key)
        let huge: Int64 = 1 << 40
        // Block rows of lengths no chunker makes, in a real pack, each the one block of a manifest.
        let bad = [("zero.bin", "a", 0, 100), ("negative.bin", "b", -5, 100), ("huge.bin", "c", huge, huge)]
        var sql = "SET session_replication_role = replica;\n"
        for (name, letter, length, size) in bad {
            let hash = "repeat('\(letter)', 64)", key = "'\(r.prefix)/manifests/hand-\(name)'"
            sql += """
                INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns) VALUES (\(hash), '\(pack)', 0, \(length), 1);
                INSERT INTO docfs_manifests (key, size, created_ns) VALUES (\(key), \(size), 1);
                INSERT INTO docfs_manifest_blocks (key, ordinal, hash, length) VALUES (\(key), 0, \(hash), \(length));

                """
        }
        // Items: three names no folder can hold, the three files above, and one good row last
        // (its contents good.txt's), with a change each.
        let items =
            ["('a/b', 0::bigint, NULL::text)", "(repeat('x', 4096), 0, NULL)", "('../x', 0, NULL)"]
            + bad.map { "('\($0.0)', \($0.3), '\(r.prefix)/manifests/hand-\($0.0)')" }
            + ["('handmade-ok.txt', \(good.size), '\(goodKey)')"]
        sql += """
            WITH root AS (SELECT id FROM docfs_items WHERE parent_id IS NULL),
            planted AS (
                INSERT INTO docfs_items (parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode, content_key)
                SELECT root.id, v.name, 'file', v.size, 1, 1, 1, 1, 0, 0, 420, v.key
                FROM root, (VALUES \(items.joined(separator: ", "))) AS v(name, size, key)
                RETURNING id
            )
            INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns)
            SELECT id, 'create', gen_random_uuid(), 1, 1, 1 FROM planted ORDER BY id;
            SELECT pg_notify('docfs_changes', max(position)::text) FROM docfs_changes;
            """
        // As the cluster's superuser: only it may turn the triggers off (session_replication_role),
        // as an operator editing a database by hand would.
        _ = try r.servers.psql(r.superuserDatabaseURL, sql)

        let expected: Set<String> = ["big.bin", "good.txt", "zero.bin", "negative.bin", "huge.bin", "handmade-ok.txt"]
        for mnt in [r.mnt, b.mnt] {
            eventually("\(mnt) lists handmade-ok.txt", timeout: 60) {
                (try? FileManager.default.contentsOfDirectory(atPath: mnt))?.contains("handmade-ok.txt") == true
            }
            let ls = r.fx.sh("ls -la '\(mnt)'")
            XCTAssertEqual(ls.status, 0, "ls \(mnt): \(ls)")
            XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: mnt)), expected)
            for (source, name) in [("good.src", "good.txt"), ("big.src", "big.bin"), ("good.src", "handmade-ok.txt")] {
                let cmp = r.fx.sh("cmp \(source) '\(mnt)/\(name)'", timeout: 60)
                XCTAssertEqual(cmp.status, 0, "\(mnt)/\(name) reads byte-exact: \(cmp)")
            }
            // A refused manifest: the read fails, the daemon goes on.
            for name in ["zero.bin", "negative.bin", "huge.bin"] {
                let cat = r.fx.sh("head -c 4096 '\(mnt)/\(name)' > /dev/null", timeout: 60)
                XCTAssertNotEqual(cat.status, 0, "\(mnt)/\(name) is not read: \(cat)")
            }
            let status = statusFields(r, mnt)
            XCTAssertNotNil(status, "the daemon of \(mnt) answers")
            XCTAssertEqual((status?["refusedIncoming"] as? NSNumber)?.intValue, 3, "\(status ?? [:])")
        }
        if let pid = r.fx.daemonPID { XCTAssertEqual(kill(pid, 0), 0, "the first replica's daemon is up\n\(r.logTail())") }

        // One line per item set aside, naming the rule; one per refused read.
        let logB = (try? String(contentsOfFile: b.store + "/docfs.log", encoding: .utf8)) ?? ""
        let aside = logB.split(separator: "\n").filter { $0.contains("set aside the server's item") }
        XCTAssertEqual(aside.filter { $0.contains("a name with a /") }.count, 2, logB)
        XCTAssertEqual(aside.filter { $0.contains("a name of 4096 bytes") }.count, 1, logB)
        XCTAssertGreaterThanOrEqual(logB.split(separator: "\n").filter { $0.contains("manifest") && $0.contains("was refused") }.count, 2, logB)

        // The owner's `docfs remote check` reads every block row of the pack: it names the bad
        // ones and does not trap.
        let check = r.fx.docfs(["remote", "check", r.fx.store, "--json"], env: r.awsEnvironment(secret: r.servers.secretKey), timeout: 120)
        XCTAssertEqual(check.status, 1, "docfs remote check: \(check)")
        let report = (try? JSONSerialization.jsonObject(with: Data(check.stdout.utf8))) as? [String: Any]
        let refused = report?["refused"] as? [String] ?? []
        XCTAssertEqual(refused.count, 3, "\(check)")
        XCTAssertEqual(refused.filter { $0.contains("has the length 0 ") }.count, 1, "\(refused)")
        XCTAssertEqual(report?["blocks"] as? Int, 2, "the two good blocks were read: \(check)")

        // Both replicas still sync, both ways.
        XCTAssertEqual(r.fx.sh("echo from-b > '\(b.mnt)/after.txt'").status, 0)
        eventually("the first replica has after.txt", timeout: 60) {
            (try? String(contentsOfFile: r.mnt + "/after.txt", encoding: .utf8)) == "from-b\n"
        }
        XCTAssertEqual(r.fx.sh("echo from-a > mnt/after-a.txt").status, 0)
        eventually("the second replica has after-a.txt", timeout: 60) {
            (try? String(contentsOfFile: b.mnt + "/after-a.txt", encoding: .utf8)) == "from-a\n"
        }
    }
}
