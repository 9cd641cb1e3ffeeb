import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// `docfs remote setup` and the replica role, against the loopback servers: what the role may
/// not do (psql as that role), a replica mounted with it, one tree per prefix, gc that keeps to
/// its prefix, and a server whose schema is older than the replica's.
final class ServerSetupMountTests: ReplicaTestCase {
    /// Sets the server of `r` up with a new replica role; returns the role, its password and a
    /// URL of the database as that role (dropped with the test).
    func setUpReplicaRole(_ r: RemoteMount) throws -> (role: String, password: String, url: String) {
        let role = "docfs_replica_" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let password = UUID().uuidString
        let file = r.fx.dir + "/replica-password"
        try password.write(toFile: file, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(file, 0o600), 0)
        addTeardownBlock { [servers] in
            _ = try? servers!.psql(r.databaseURL, "DROP OWNED BY \(role)")
            _ = try? servers!.psql(servers!.adminURL, "DROP ROLE IF EXISTS \(role)")
        }
        let setup = r.fx.docfs(
            [
                "remote", "setup", "--remote", r.databaseURL, "--objects", "s3://\(r.bucket)/\(r.prefix)",
                "--s3-endpoint", servers.s3Endpoint, "--replica-role", role, "--replica-password-file", file,
            ],
            env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertEqual(setup.status, 0, "\(setup)")
        XCTAssertTrue(setup.stdout.contains("replica role \(role) created"), setup.stdout)
        var u = try XCTUnwrap(URLComponents(string: r.databaseURL))
        u.user = role
        u.password = password
        return (role, password, try XCTUnwrap(u.string))
    }

    /// psql as the replica role: throws with the server's refusal.
    func asReplica(_ url: String, _ sql: String) throws -> [[String?]] { try servers.psql(url, sql) }

    func assertRefusedToReplica(_ url: String, _ sql: String, _ words: String, line: UInt = #line) {
        XCTAssertThrowsError(try asReplica(url, sql), sql, line: line) { error in
            XCTAssertTrue("\(error)".contains(words), "\(sql): \(error)", line: line)
        }
    }

    func testAReplicaRoleSyncsAndCannotChangeTheServersRules() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf ro > mnt/ro.txt && printf shared > mnt/shared.txt").status, 0)
        try r.waitUntilUploaded()
        let (_, password, url) = try setUpReplicaRole(r)
        // As the owner: ro.txt may only be read (as a layout's read-only folder would make it).
        _ = try servers.psql(r.databaseURL, #"UPDATE docfs_items SET caps = '["read"]' WHERE name = 'ro.txt'"#)

        // The role reads everything and may not change the rules.
        XCTAssertEqual(try asReplica(url, "SELECT count(*) FROM docfs_items WHERE name = 'shared.txt'").first?.first, "1")
        assertRefusedToReplica(url, "CREATE TABLE sneaky (i int)", "permission denied")
        assertRefusedToReplica(url, "ALTER TABLE docfs_items DISABLE TRIGGER docfs_items_rules", "must be owner")
        assertRefusedToReplica(url, "DROP TABLE docfs_changes", "must be owner")
        assertRefusedToReplica(url, #"UPDATE docfs_items SET caps = '["all"]' WHERE name = 'ro.txt'"#, "permission denied")
        assertRefusedToReplica(url, "UPDATE docfs_meta SET value = 'x' WHERE key = 'tree_id'", "permission denied")
        assertRefusedToReplica(url, "DELETE FROM docfs_items WHERE name = 'shared.txt'", "permission denied")
        assertRefusedToReplica(url, "UPDATE docfs_layout SET layout = '{}'", "permission denied")
        assertRefusedToReplica(url, "SET session_replication_role = replica", "permission denied")
        // No table is written but through the server's functions (schema 11), whatever a client sets.
        assertRefusedToReplica(
            url,
            """
            SELECT set_config('docfs.initial_contents', 'on', false);
            UPDATE docfs_items SET content_version = content_version + 1, content_key = 'elsewhere', size = 9 WHERE name = 'ro.txt'
            """, "permission denied")
        assertRefusedToReplica(url, "UPDATE docfs_items SET size = 0 WHERE name = 'ro.txt'", "permission denied")
        // Damaged blocks (schema 9): marked and healed only through the server's functions, which
        // check what they are given.
        let nowhere = "'\(r.prefix)/packs/00000000-0000-0000-0000-000000000000'"
        assertRefusedToReplica(url, "UPDATE docfs_blocks SET damaged_ns = 1", "permission denied")
        assertRefusedToReplica(url, "SELECT docfs_mark_block_damaged('ABC', \(nowhere))", "not a block hash")
        assertRefusedToReplica(
            url, "SELECT docfs_mark_block_damaged(repeat('a', 64), 'elsewhere/packs/00000000-0000-0000-0000-000000000000')",
            "not a pack of this tree")
        // (Schema 16 dropped schema 9's record of blocks, which replaced places.)
        assertRefusedToReplica(
            url, "SELECT docfs_record_blocks(ARRAY[repeat('b', 64)], ARRAY[\(nowhere)], ARRAY[0::bigint], ARRAY[1::bigint])",
            "does not exist")
        assertRefusedToReplica(
            url, "SELECT docfs_record_pack('\(r.prefix)/objects/x', 1, ARRAY[repeat('b', 64)], ARRAY[0::bigint], ARRAY[1::bigint])",
            "not a pack of this tree")
        XCTAssertEqual(
            try asReplica(url, "SELECT docfs_mark_block_damaged(repeat('a', 64), \(nowhere))").first?.first, "f",
            "a block that is not there is not marked")

        // A replica with that role: init (no migration, no password in its URL), mount, sync both ways.
        let second = Second(store: r.fx.dir + "/second", mnt: r.fx.dir + "/mnt2")
        XCTAssertEqual(mkdir(second.mnt, 0o755), 0)
        var arguments = r.remoteArguments
        var roleURL = try XCTUnwrap(URLComponents(string: url))
        roleURL.password = nil
        arguments[1] = try XCTUnwrap(roleURL.string)
        // The password from a file (never in `ps`): kept in STORE/pgpass for the mount.
        XCTAssertFalse(password.isEmpty)
        let initResult = r.fx.docfs(
            ["init", second.store] + arguments + ["--password-file", r.fx.dir + "/replica-password"],
            env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertEqual(initResult.status, 0, "\(initResult)")
        XCTAssertFalse(initResult.stderr.contains("warning"), initResult.stderr)
        try mountSecond(r, second)
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", second.mnt], timeout: 30)
            MountFixture.lazyUnmount(second.mnt)
        }
        XCTAssertEqual(r.fx.sh("printf from-b > '\(second.mnt)/b.txt'").status, 0)
        eventually("b.txt reaches the first replica") { self.contents(r.mnt + "/b.txt") == "from-b" }
        XCTAssertEqual(r.fx.sh("printf from-a > mnt/a.txt").status, 0)
        eventually("a.txt reaches the replica role's mount") { self.contents(second.mnt + "/a.txt") == "from-a" }
        // What the server refuses the replica role's mount refuses too: ro.txt is read-only on the server.
        XCTAssertEqual(contents(second.mnt + "/shared.txt"), "shared")
    }

    func testOneTreePerPrefixAndGCKeepsToItsPrefix() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf one > mnt/one.txt").status, 0)
        try r.waitUntilUploaded()

        // Another database (another tree) given the same prefix is refused, and leaves nothing.
        let other = r.database + "_other"
        _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(other)")
        defer { _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(other) WITH (FORCE)") }
        var arguments = r.remoteArguments
        arguments[1] = servers.databaseURL(other)
        let refused = r.fx.docfs(["init", r.fx.dir + "/intruder"] + arguments, env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("belongs to tree"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.dir + "/intruder"))

        // A version row naming a key outside PREFIX/objects/ (written by hand): gc leaves the object.
        _ = try servers.s3check(["put", r.bucket, "elsewhere/keep.txt", "not docfs's"])
        _ = try servers.psql(
            r.databaseURL,
            """
            INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns)
            SELECT id, 100, 'elsewhere/keep.txt', 12, 0 FROM docfs_items WHERE name = 'one.txt'
            """)
        let gc = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0", "--json"], env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertEqual(gc.status, 0, "\(gc)")
        let keys = (try servers.s3check(["list", r.bucket]) as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
        XCTAssertTrue(keys.contains("elsewhere/keep.txt"), "\(keys)")
        XCTAssertTrue(keys.contains("\(r.prefix)/docfs-tree.json"), "\(keys)")
    }

    /// A tree's gc lists everything under its prefix: a prefix inside or above another tree's
    /// is refused by init and by the set-up, naming both; one beside it ("replica2") is not.
    func testPrefixesCannotNest() throws {
        let r = try makeRemote(mount: false)
        let env = r.awsEnvironment(secret: servers.secretKey)
        var databases: [String] = []
        defer { for name in databases { _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") } }
        func otherDatabase(_ tag: String) throws -> String {
            let name = r.database + "_" + tag
            _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(name)")
            databases.append(name)
            return servers.databaseURL(name)
        }
        func arguments(_ url: String, _ objects: String) -> [String] {
            var arguments = r.remoteArguments
            arguments[1] = url
            arguments[3] = objects
            return arguments
        }
        let inside = r.fx.docfs(
            ["init", r.fx.dir + "/inside"] + arguments(try otherDatabase("inside"), "s3://\(r.bucket)/\(r.prefix)/packs"), env: env)
        XCTAssertNotEqual(inside.status, 0, "\(inside)")
        XCTAssertTrue(inside.stderr.contains("s3://\(r.bucket)/\(r.prefix)/packs is inside s3://\(r.bucket)/\(r.prefix),"), inside.stderr)
        XCTAssertEqual(inside.stderr.split(separator: "\n").count, 1, inside.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.dir + "/inside"))

        let aboveURL = try otherDatabase("above")
        let above = r.fx.docfs(
            [
                "remote", "setup", "--remote", aboveURL, "--objects", "s3://\(r.bucket)",
                "--s3-endpoint", servers.s3Endpoint,
            ], env: env)
        XCTAssertNotEqual(above.status, 0, "\(above)")
        XCTAssertTrue(above.stderr.contains("s3://\(r.bucket)/\(r.prefix) holds tree "), above.stderr)
        XCTAssertTrue(above.stderr.contains("s3://\(r.bucket) (the bucket's root)"), above.stderr)
        let keys = (try servers.s3check(["list", r.bucket]) as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
        XCTAssertFalse(keys.contains("docfs-tree.json"), "no marker written for the refused tree: \(keys)")

        let beside = r.fx.docfs(["init", r.fx.dir + "/beside"] + arguments(try otherDatabase("beside"), "s3://\(r.bucket)/\(r.prefix)2"), env: env)
        XCTAssertEqual(beside.status, 0, "\(beside)")
    }

    /// Two gc runs never decide at once: while another holds the server's gc lock (here a psql
    /// session), a run says so in one line, removes nothing and fails; once it is let go, gc runs.
    func testASecondGCRunIsRefusedWhileOneHoldsTheLock() throws {
        let r = try makeRemote(mount: false)
        let env = r.awsEnvironment(secret: servers.secretKey)
        // The gc lock is a row of the owner's docfs_locks (schema 14), held by a transaction.
        let release = try r.holdInAPsqlSession(
            "BEGIN; SELECT 1 FROM docfs_locks WHERE name = 'gc' FOR UPDATE; SELECT pg_sleep(300)",
            name: "docfs-test-gc-holder-\(getpid())")
        addTeardownBlock(release)
        eventually("the psql session holds the gc lock") {
            (try? self.servers.psql(
                r.databaseURL,
                "SELECT count(*) FROM (SELECT 1 FROM docfs_locks WHERE name = 'gc' FOR UPDATE SKIP LOCKED) AS free"))?.first?.first == "0"
        }

        let refused = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0"], env: env)
        XCTAssertNotEqual(refused.status, 0, "\(refused)")
        XCTAssertTrue(refused.stderr.contains("another docfs remote gc of this tree is running"), refused.stderr)
        XCTAssertEqual(refused.stderr.split(separator: "\n").count, 1, refused.stderr)
        XCTAssertEqual(refused.stdout, "", "no report: nothing was done")

        release()
        // The advisory key of earlier versions, which any role may take, decides nothing now.
        let key: Int64 = 0x646f_6366_7303 // RemoteDatabase.garbageLockKey
        let oldKey = try r.holdInAPsqlSession(
            "SELECT pg_advisory_lock(\(key)); SELECT pg_sleep(300)",
            name: "docfs-test-old-gc-key-\(getpid())")
        addTeardownBlock(oldKey)
        eventually("the psql session holds the old key") {
            (try? self.servers.psql(r.databaseURL, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"))?.first?.first == "1"
        }
        let ran = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0"], env: env)
        XCTAssertEqual(ran.status, 0, "\(ran)")
    }

    func testAServerWithAnOlderSchemaStallsTheReplicaWithOneLine() throws {
        let r = try makeRemote()
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15), "the daemon is still running after docfs unmount")
        // Older than the oldest a replica serves (one version older is served without hard links:
        // ReplicaHardLinkMountTests).
        _ = try servers.psql(r.databaseURL, "DELETE FROM docfs_schema_migrations WHERE version >= 11")
        // The stall retried every 2 s, not every minute: the set-up's end is seen within seconds.
        try r.fx.mount(env: ["DOCFS_STALLED_RETRY": "2"])
        XCTAssertEqual(r.fx.sh("printf waits > mnt/w.txt").status, 0)
        let stalled = try r.waitForStatus("the schema named in the status", timeout: 60) { $0.lastError?.contains("docfs remote setup") == true }
        XCTAssertTrue(stalled.lastError!.contains("this docfs needs"), stalled.raw)
        XCTAssertGreaterThan(stalled.pending ?? 0, 0)
        // The owner runs the set-up: the replica goes on.
        let setup = r.fx.docfs(
            [
                "remote", "setup", "--remote", r.databaseURL, "--objects", "s3://\(r.bucket)/\(r.prefix)",
                "--s3-endpoint", servers.s3Endpoint,
            ], env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertEqual(setup.status, 0, "\(setup)")
        try r.waitForStatus("the replica going on after the set-up", timeout: 120) { $0.pending == 0 && $0.lastError == nil }
    }
}

extension ServerSetupMountTests {
    func testADatabaseRestoredToAnEarlierPointIsNoticedAndNothingIsLost() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf before > mnt/a.txt").status, 0)
        try r.waitUntilUploaded()
        let dump = try r.dumpDatabase()
        XCTAssertEqual(r.fx.sh("printf after-the-backup > mnt/b.txt").status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15))

        // The database goes back to the backup (b.txt is gone from it).
        try r.restoreDatabase(from: dump)

        try r.fx.mount()
        XCTAssertEqual(r.fx.sh("printf waiting > mnt/c.txt").status, 0)
        try r.waitUntilUploaded()
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["restored to an earlier point"]).isEmpty, r.logTail())
        let server = Set(try r.serverTree().keys)
        XCTAssertTrue(server.contains("/a.txt") && server.contains("/c.txt"), "\(server)")
        XCTAssertEqual(contents(r.mnt + "/c.txt"), "waiting", "the change waiting here was kept and sent")
        // What the server lost and no other item took the identifier of is put back at its path
        // (RestoredServerMountTests has the rest); nothing is left in recovered/.
        try r.waitUntilUploaded()
        let after = Set(try r.serverTree().keys)
        XCTAssertTrue(after.contains("/b.txt"), "\(after.sorted())")
        XCTAssertEqual(contents(r.mnt + "/b.txt"), "after-the-backup")
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.store + "/recovered"))
    }
}
