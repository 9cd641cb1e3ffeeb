import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// A replica that reads from a hot standby (`docfs init --remote-read`): the standby is the test
/// cluster's, made with `pg_basebackup -R` when this class first needs it
/// (`Tests/remote/servers.sh standby-start`; other runs pay nothing for it), and stopped by PID
/// when the class ends and by `servers.sh stop`, pass or fail. Writes go to the primary; reads
/// wait for the standby's replay, so a standby that lags, is paused or restarts delays changes
/// and never loses or reorders one.
final class StandbyReadMountTests: ReplicaTestCase {
    /// The standby's port (started if it is not running).
    func standbyPort() throws -> Int {
        let started = Date()
        defer { print("standby: servers.sh standby-start took \(String(format: "%.2f", Date().timeIntervalSince(started))) s (an observation)") }
        let r = runProcess("/bin/sh", [servers.serversScript, "standby-start", servers.serversDir], cwd: "/", timeout: 300, outDir: "/tmp")
        guard r.status == 0, let port = Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw FixtureError("servers.sh standby-start failed: \(r)")
        }
        return port
    }

    func stopStandby() throws {
        let r = runProcess("/bin/sh", [servers.serversScript, "standby-stop", servers.serversDir], cwd: "/", timeout: 120, outDir: "/tmp")
        guard r.status == 0 else { throw FixtureError("servers.sh standby-stop failed: \(r)") }
    }

    override class func tearDown() {
        // The standby goes with the class (servers.sh stop would also stop it).
        let env = ProcessInfo.processInfo.environment
        if let script = env["DOCFS_TEST_SERVERS_SH"], let dir = env["DOCFS_TEST_SERVERS_DIR"] {
            _ = runProcess("/bin/sh", [script, "standby-stop", dir], cwd: "/", timeout: 120, outDir: "/tmp")
        }
        super.tearDown()
    }

    /// `url` (a URL of the test cluster) on the standby's port.
    func onStandby(_ url: String, port: Int) -> String {
        guard var c = URLComponents(string: url) else { return url }
        c.port = port
        return c.string ?? url
    }

    /// The standby's replay, paused or resumed (`pg_wal_replay_pause()`, as the superuser).
    func standbyReplay(pause: Bool, port: Int) throws {
        _ = try servers.psql(onStandby(servers.adminURL, port: port), pause ? "SELECT pg_wal_replay_pause()" : "SELECT pg_wal_replay_resume()")
    }

    /// Replica `name`, logging in as a role of its own, reading from the standby.
    func makeReader(_ r: RemoteMount, name: String, port: Int, env: [String: String] = [:]) throws -> Second {
        var arguments = try r.replicaArguments(role: name)
        arguments += ["--remote-read", onStandby(arguments[1], port: port)]
        let second = Second(store: r.fx.dir + "/" + name, mnt: r.fx.dir + "/mnt-" + name)
        XCTAssertEqual(mkdir(second.mnt, 0o755), 0)
        let made = r.fx.docfs(["init", second.store] + arguments, env: r.awsEnvironment(secret: r.servers.secretKey))
        guard made.status == 0 else { throw FixtureError("init of \(name) reading from the standby: \(made)") }
        try mountSecond(r, second, env: env)
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", second.mnt], timeout: 30)
            MountFixture.lazyUnmount(second.mnt)
        }
        return second
    }

    /// Files `first ..< end` under `folder` on A: each its own bytes (a few random ones, one
    /// larger than a block), written in order.
    func write(_ r: RemoteMount, _ folder: String, _ range: Range<Int>) {
        for i in range {
            let size = i % 7 == 0 ? 5_000_000 : 100 + i
            XCTAssertEqual(r.fx.sh("mkdir -p mnt/\(folder) && head -c \(size) /dev/urandom > mnt/\(folder)/f\(i)").status, 0)
        }
    }

    /// Every file of `folder` on A is on B byte for byte (cmp), and B has no other.
    func same(_ r: RemoteMount, _ b: Second, _ folder: String) -> Bool {
        names(r.mnt + "/" + folder) == names(b.mnt + "/" + folder)
            && r.fx.sh("diff -r mnt/\(folder) '\(b.mnt)/\(folder)' >/dev/null").status == 0
    }

    func testAReplicaReadingFromAStandbySeesEveryFileByteExact() throws {
        let r = try makeRemote()
        let port = try standbyPort()
        write(r, "before", 0..<3)
        try r.waitUntilUploaded()
        let b = try makeReader(r, name: "b", port: port)
        XCTAssertTrue(same(r, b, "before"))
        let started = Date()
        write(r, "after", 0..<8)
        eventually("B has A's files byte for byte", timeout: 180) { same(r, b, "after") }
        print(
            "standby: 8 files (two of 5 MB) on B through the standby \(String(format: "%.2f", Date().timeIntervalSince(started))) s after the first was written (an observation)"
        )
        // B writes too: to the primary, and A has it.
        XCTAssertEqual(r.fx.sh("printf 'from B' > '\(b.mnt)/after/b.txt'").status, 0)
        eventually("A has B's file", timeout: 120) { contents(r.mnt + "/after/b.txt") == "from B" }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        // B's reads were on the standby: its sessions there, named as a replica's.
        let role = r.roleName("b")
        eventually("B has sessions on the standby", timeout: 60) {
            let rows = try? self.servers.psql(
                self.onStandby(self.servers.adminURL, port: port),
                "SELECT count(*) FROM pg_stat_activity WHERE usename = '\(role)' AND application_name = 'docfs'")
            return (Int(rows?.first?.first.flatMap { $0 } ?? "0") ?? 0) > 0
        }
        let status = r.fx.docfs(["status", b.mnt], timeout: 30).stdout
        XCTAssertTrue(status.contains("reads from postgres://\(role)@127.0.0.1:\(port)/"), status)
    }

    func testAPausedStandbyHoldsChangesUntilItReplaysThemAndSkipsNone() throws {
        let r = try makeRemote()
        let port = try standbyPort()
        // A read gives up on the paused standby after 2 s, not 10: B says it waits sooner.
        let b = try makeReader(r, name: "b", port: port, env: ["DOCFS_STANDBY_WAIT": "2"])
        try standbyReplay(pause: true, port: port)
        var paused = true
        defer { if paused { try? standbyReplay(pause: false, port: port) } }
        write(r, "held", 0..<6)
        try r.waitUntilUploaded()
        // On the primary, not yet on the standby: B says it waits, and shows none of them.
        eventually("B's status says it waits for the standby", timeout: 60) {
            (self.statusFields(r, b.mnt)?["lastError"] as? String ?? "").contains("waiting for its replay")
        }
        XCTAssertEqual(names(b.mnt + "/held"), [], "B applied a change its standby had not replayed")
        XCTAssertFalse(exists(b.mnt + "/held"))
        try standbyReplay(pause: false, port: port)
        paused = false
        let resumed = Date()
        eventually("every held file on B once the standby replays", timeout: 180) { same(r, b, "held") }
        print("standby: 6 held files on B \(String(format: "%.2f", Date().timeIntervalSince(resumed))) s after replay resumed (an observation)")
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }

    func testTheStandbyRestartingWhileChangesAreWrittenLosesNothing() throws {
        let r = try makeRemote()
        let port = try standbyPort()
        let b = try makeReader(r, name: "b", port: port)
        write(r, "w", 0..<4)
        try stopStandby()
        defer { _ = try? standbyPort() }
        write(r, "w", 4..<8)
        // Down: B is still mounted and works here; its status names the standby.
        eventually("B's status names the standby that is down", timeout: 60) {
            (self.statusFields(r, b.mnt)?["lastError"] as? String ?? "").contains("the read standby")
        }
        XCTAssertEqual(r.fx.sh("printf 'local on B' > '\(b.mnt)/b-local.txt' && cat '\(b.mnt)/b-local.txt'").stdout, "local on B")
        // A remount with the standby down mounts too.
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt], timeout: 60).status, 0)
        try mountSecond(r, b)
        XCTAssertEqual(contents(b.mnt + "/b-local.txt"), "local on B")
        _ = try standbyPort()
        write(r, "w", 8..<10)
        // Restarted once more while A writes.
        try stopStandby()
        _ = try standbyPort()
        write(r, "w", 10..<12)
        eventually("B has every file A wrote, byte for byte", timeout: 240) { same(r, b, "w") }
        eventually("A has B's file", timeout: 120) { contents(r.mnt + "/b-local.txt") == "local on B" }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }

    /// `docfs init --remote-read` refuses what it cannot use, with one line, leaving nothing.
    func testInitRefusesAStandbyItCannotUse() throws {
        let r = try makeRemote()
        let port = try standbyPort()
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let store = r.fx.dir + "/refused"
        let cases: [(read: String, says: String)] = [
            ("standby.example:5432", "--remote-read must be postgres://"),
            ("postgres://\(r.owner):secret@127.0.0.1:\(port)/\(r.database)", "--remote-read takes no password"),
            ("postgres://\(r.owner)@127.0.0.1:1/\(r.database)", "docfs: --remote-read postgres://\(r.owner)@127.0.0.1:1"),
            // Another database: no tree there (or another one).
            (onStandby(servers.adminURL, port: port), "docfs: --remote-read"),
        ]
        for (read, says) in cases {
            let made = r.fx.docfs(["init", store] + r.remoteArguments + ["--remote-read", read], env: env, timeout: 60)
            XCTAssertNotEqual(made.status, 0, "\(read): \(made)")
            XCTAssertTrue(made.stderr.contains(says), "\(read): \(made)")
            XCTAssertFalse(exists(store), "init left \(store) behind for \(read)")
        }
        // A standby's database of another tree: its rows must never be applied here.
        let other = try makeRemote(mount: false)
        let otherURL = "postgres://\(other.owner)@127.0.0.1:\(port)/\(other.database)"
        eventually("the standby has the other tree", timeout: 60) {
            ((try? self.servers.psql(otherURL, "SELECT value FROM docfs_meta WHERE key = 'tree_id'"))?.count ?? 0) == 1
        }
        let mixed = r.fx.docfs(["init", store] + r.remoteArguments + ["--remote-read", otherURL], env: env, timeout: 60)
        XCTAssertNotEqual(mixed.status, 0, "\(mixed)")
        XCTAssertTrue(mixed.stderr.contains("serves another tree"), "\(mixed)")
        XCTAssertFalse(exists(store))
        let alone = r.fx.docfs(["init", store, "--remote-read", "postgres://x@127.0.0.1:1/db"], env: env)
        XCTAssertNotEqual(alone.status, 0)
        XCTAssertTrue(alone.stderr.contains("--remote-read goes with --remote"), "\(alone)")
        XCTAssertFalse(exists(store))
    }
}
