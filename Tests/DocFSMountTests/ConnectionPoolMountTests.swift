import Foundation
import XCTest

/// A mounted replica's sessions on PostgreSQL, counted by the server itself (`pg_stat_activity`):
/// at most one LISTEN connection and a pool of at most two (docs/REMOTE.md, "Connections"), however
/// busy it is sending and receiving; and replicas behind pgbouncer in transaction pooling (started
/// by Tests/remote/servers.sh), listening on PostgreSQL itself or not at all, converge with one that
/// is not.
final class ConnectionPoolMountTests: ReplicaTestCase {
    /// The bound docs/REMOTE.md names: the pool's two and the listening one.
    static let sessionsPerReplica = 3

    /// Sessions on the tree's database by role: all of them, and those whose last statement was a
    /// LISTEN. The tests' own psql sessions are left out.
    func sessions(_ r: RemoteMount) throws -> [String: (all: Int, listening: Int)] {
        let rows = try r.servers.psql(
            r.servers.adminURL,
            """
            SELECT usename, count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%')
            FROM pg_stat_activity
            WHERE datname = '\(r.database)' AND backend_type = 'client backend'
              AND coalesce(application_name, '') <> 'psql' AND pid <> pg_backend_pid()
            GROUP BY usename
            """)
        var out: [String: (all: Int, listening: Int)] = [:]
        for row in rows where row.count == 3 {
            out[row[0] ?? ""] = (Int(row[1] ?? "") ?? 0, Int(row[2] ?? "") ?? 0)
        }
        return out
    }

    func testAMountedReplicaHoldsOneListeningConnectionAndAPoolOfTwo() throws {
        let r = try makeRemote()
        let b = try makeSecond(r, name: "b")
        let roles = [r.owner: "A", r.roleName("b"): "B"]
        var most: [String: Int] = [:], mostListening: [String: Int] = [:], samples: [String: [Int]] = [:]
        func sample() throws {
            for (role, count) in try sessions(r) where roles[role] != nil {
                most[role] = max(most[role] ?? 0, count.all)
                mostListening[role] = max(mostListening[role] ?? 0, count.listening)
                samples[role, default: []].append(count.all)
            }
        }
        // Both replicas send and receive at once: files on each, a folder of them renamed, some
        // removed, each round counted while it is on its way.
        for round in 0..<8 {
            for (mnt, side) in [(r.mnt, "a"), (b.mnt, "b")] {
                XCTAssertEqual(
                    r.fx.sh(
                        "mkdir -p '\(mnt)/\(side)\(round)' && for i in 1 2 3 4 5 6; do printf '\(side) \(round) %s' $i > '\(mnt)/\(side)\(round)'/f$i.txt; done"
                    ).status, 0)
            }
            try sample()
            if round > 0 {
                XCTAssertEqual(r.fx.sh("mv '\(r.mnt)/a\(round - 1)' '\(r.mnt)/a\(round - 1)-moved' && rm '\(b.mnt)/b\(round - 1)/f1.txt'").status, 0)
            }
            try sample()
        }
        let deadline = Date().addingTimeInterval(180)
        var converged = false
        while Date() < deadline, !converged {
            try sample()
            converged =
                contents(b.mnt + "/a7/f6.txt") == "a 7 6" && contents(r.mnt + "/b7/f6.txt") == "b 7 6"
                && exists(b.mnt + "/a6-moved/f6.txt") && !exists(r.mnt + "/b6/f1.txt")
            if !converged { usleep(200_000) }
        }
        XCTAssertTrue(converged, "the replicas did not converge within 180 s")
        try waitForQuiet(r, b)
        // Each one listens (once its listening connection is up: it comes up in the background).
        eventually("each replica has its listening connection", timeout: 60) {
            (try? self.sessions(r)).map { s in roles.keys.allSatisfy { (s[$0]?.listening ?? 0) == 1 } } ?? false
        }
        try sample()
        let report = roles.map { role, name in
            "\(name): at most \(most[role] ?? 0) session(s), \(mostListening[role] ?? 0) listening; samples \(samples[role] ?? [])"
        }.sorted().joined(separator: "\n")
        print("connections per replica:\n\(report)")
        for (role, name) in roles {
            XCTAssertLessThanOrEqual(most[role] ?? 0, Self.sessionsPerReplica, "\(name) held more sessions than its pool and its LISTEN:\n\(report)")
            XCTAssertLessThanOrEqual(mostListening[role] ?? 0, 1, "\(name) listened on more than one session:\n\(report)")
            XCTAssertGreaterThan(most[role] ?? 0, 0, "\(name) was never seen on the server:\n\(report)")
        }
        assertSameTrees(r, b)
    }

    // MARK: pgbouncer

    /// The test pgbouncer's URL for `role` (with `password`) on this tree's database.
    func bouncerURL(_ r: RemoteMount, role: String, password: String) throws -> String {
        guard let text = ProcessInfo.processInfo.environment["DOCFS_TEST_PGBOUNCER_URL"], !text.isEmpty,
            let port = URLComponents(string: text)?.port
        else {
            throw XCTSkip("DOCFS_TEST_PGBOUNCER_URL is not set: Tests/remote/servers.sh starts pgbouncer")
        }
        return "postgres://\(role):\(password)@127.0.0.1:\(port)/\(r.database)"
    }

    /// A replica whose calls go through pgbouncer as role `name` (a password of its own: pgbouncer
    /// asks for SCRAM), with `listen` (nil: none given) as its --remote-listen.
    func makeBehindBouncer(_ r: RemoteMount, name: String, listen: (String) -> String?) throws -> Second {
        var arguments = try r.replicaArguments(role: name)
        let role = r.roleName(name), password = "pw-\(name)-\(UInt32.random(in: 0 ... .max))"
        _ = try r.servers.psql(r.databaseURL, "ALTER ROLE \(role) PASSWORD '\(password)'")
        arguments[1] = try bouncerURL(r, role: role, password: password)
        if let listen = listen(role) { arguments += ["--remote-listen", listen] }
        let second = Second(store: r.fx.dir + "/" + name, mnt: r.fx.dir + "/mnt-" + name)
        XCTAssertEqual(mkdir(second.mnt, 0o755), 0)
        let made = r.fx.docfs(["init", second.store] + arguments, env: r.awsEnvironment(secret: r.servers.secretKey))
        guard made.status == 0 else { throw FixtureError("init of \(name) through pgbouncer: \(made)") }
        try mountSecond(r, second)
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", second.mnt], timeout: 30)
            MountFixture.lazyUnmount(second.mnt)
        }
        return second
    }

    func testReplicasBehindPgbouncerConvergeWithOneThatIsNot() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        // B: calls through pgbouncer, LISTEN on PostgreSQL itself; C: through pgbouncer only,
        // reading the change log every second.
        let b = try makeBehindBouncer(r, name: "b", listen: { r.roleURL($0) })
        let c = try makeBehindBouncer(r, name: "c", listen: { _ in "none" })
        XCTAssertEqual(contents(b.mnt + "/shared/a.txt"), "from A")
        XCTAssertEqual(contents(c.mnt + "/shared/a.txt"), "from A")

        for round in 0..<3 {
            for (mnt, side) in [(r.mnt, "a"), (b.mnt, "b"), (c.mnt, "c")] {
                XCTAssertEqual(r.fx.sh("printf '\(side) \(round)' > '\(mnt)/shared/\(side)\(round).txt'").status, 0)
            }
        }
        XCTAssertEqual(
            r.fx.sh("printf 'edited on B' > '\(b.mnt)/shared/a.txt' && mv '\(c.mnt)/shared/c0.txt' '\(c.mnt)/shared/c0-moved.txt'").status, 0)
        var last = ""
        eventually("the three replicas have every file", timeout: 180) {
            last = ""
            for mnt in [r.mnt, b.mnt, c.mnt] {
                for round in 0..<3 {
                    for side in ["a", "b", "c"] where !(side == "c" && round == 0) {
                        guard self.contents("\(mnt)/shared/\(side)\(round).txt") == "\(side) \(round)" else {
                            last = "\(mnt): \(side)\(round).txt"; return false
                        }
                    }
                }
                guard self.contents("\(mnt)/shared/c0-moved.txt") == "c 0", !self.exists("\(mnt)/shared/c0.txt"),
                    self.contents("\(mnt)/shared/a.txt") == "edited on B"
                else { last = "\(mnt): a.txt or c0"; return false }
            }
            return true
        }
        XCTAssertEqual(last, "", "still missing")
        try waitForQuiet(r, b, others: [c])
        assertSameTrees(r, b)
        assertSameTrees(r, c)

        // B and C logged in through pgbouncer (its log names each role on this database); B's
        // LISTEN is on PostgreSQL itself, C listens nowhere.
        let log = (try? String(contentsOfFile: r.servers.serversDir + "/pgbouncer/pgbouncer.log", encoding: .utf8)) ?? ""
        for name in ["b", "c"] {
            XCTAssertTrue(log.contains("login attempt: db=\(r.database) user=\(r.roleName(name))"), "\(name) never came through pgbouncer")
        }
        eventually("B listens on PostgreSQL itself and C nowhere", timeout: 60) {
            guard let s = try? self.sessions(r) else { return false }
            return s[r.roleName("b")]?.listening == 1 && (s[r.roleName("c")]?.listening ?? 0) == 0
        }
        // C's status says it reads the change log without LISTEN.
        let status = r.fx.docfs(["status", c.mnt], timeout: 30).stdout
        XCTAssertTrue(status.contains("no LISTEN"), status)
    }

    /// `docfs init --remote-listen` refuses what it cannot use, with one line, leaving nothing.
    func testInitRefusesAListeningURLItCannotUse() throws {
        let r = try makeRemote()
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let store = r.fx.dir + "/refused"
        let cases: [(listen: String, says: String)] = [
            ("db.example:5432", "--remote-listen must be none or postgres://"),
            ("postgres://\(r.owner):secret@127.0.0.1:1/\(r.database)", "--remote-listen takes no password"),
            // Nothing listens on port 1: init needs the server, and says which URL failed.
            ("postgres://\(r.owner)@127.0.0.1:1/\(r.database)", "docfs: --remote-listen postgres://\(r.owner)"),
        ]
        for (listen, says) in cases {
            let made = r.fx.docfs(["init", store] + r.remoteArguments + ["--remote-listen", listen], env: env, timeout: 60)
            XCTAssertNotEqual(made.status, 0, "\(listen): \(made)")
            XCTAssertTrue(made.stderr.contains(says), "\(listen): \(made)")
            XCTAssertFalse(exists(store), "init left \(store) behind for \(listen)")
        }
        let alone = r.fx.docfs(["init", store, "--remote-listen", "none"], env: env)
        XCTAssertNotEqual(alone.status, 0)
        XCTAssertTrue(alone.stderr.contains("--remote-listen goes with --remote"), "\(alone)")
        XCTAssertFalse(exists(store))
        // The tree is unharmed: A still sends.
        XCTAssertEqual(r.fx.sh("printf 'still here' > mnt/after.txt").status, 0)
        try r.waitUntilUploaded()
    }
}
