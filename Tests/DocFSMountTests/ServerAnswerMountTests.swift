import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// A replica mounts and works offline whatever its server answers, at the mount and later: a port
/// that accepts and says nothing, one that answers bytes of no protocol, one that closes at once.
/// Replica B reaches PostgreSQL through a TCP gate (Tests/remote/tcpgate.py) whose mode the test
/// turns; each turn cuts B's open connections, its LISTEN among them. What B wrote meanwhile
/// reaches A once the gate passes the bytes again.
final class ServerAnswerMountTests: ReplicaTestCase {
    /// The gate, started by the test and stopped by its PID however the test ends.
    final class Gate {
        let process = Process()
        let modeFile: String
        let port: Int

        init(targetPort: Int, folder: String) throws {
            modeFile = folder + "/gate-mode"
            let portFile = folder + "/gate-port"
            try "forward".write(toFile: modeFile, atomically: true, encoding: .utf8)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("remote/tcpgate.py").path
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", script, String(targetPort), modeFile, portFile]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(30)
            var found: Int?
            while Date() < deadline, found == nil {
                found = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0) }
                if found == nil { usleep(100_000) }
            }
            guard let found else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                throw FixtureError("the TCP gate did not start")
            }
            port = found
        }

        /// Takes effect for the next connection; the open ones are cut (within 0.1 s).
        func set(_ mode: String) throws { try mode.write(toFile: modeFile, atomically: true, encoding: .utf8) }

        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    func testAReplicaWorksOfflineWhateverItsServerAnswers() throws {
        let r = try makeRemote()
        guard let pgPort = URLComponents(string: r.databaseURL)?.port else { throw FixtureError("no port in \(r.databaseURL)") }
        let gate = try Gate(targetPort: pgPort, folder: r.fx.dir)
        addTeardownBlock { gate.stop() }

        var arguments = try r.replicaArguments(role: "b")
        arguments[1] = "postgres://\(r.roleName("b"))@127.0.0.1:\(gate.port)/\(r.database)"
        let b = Second(store: r.fx.dir + "/b", mnt: r.fx.dir + "/mnt-b")
        XCTAssertEqual(mkdir(b.mnt, 0o755), 0)
        let made = r.fx.docfs(["init", b.store] + arguments, env: r.awsEnvironment(secret: r.servers.secretKey))
        XCTAssertEqual(made.status, 0, "\(made)")
        // Its calls give up after 2 s, not 5: a silent server is found six times below, and a
        // loaded machine's slow answer only costs a retry.
        let answerTimeout = ["DOCFS_SERVER_TIMEOUT": "2"]
        try mountSecond(r, b, env: answerTimeout)
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", b.mnt], timeout: 30)
            MountFixture.lazyUnmount(b.mnt)
        }
        XCTAssertEqual(r.fx.sh("printf 'from A' > mnt/a.txt").status, 0)
        eventually("B has A's file through the gate", timeout: 120) { self.contents(b.mnt + "/a.txt") == "from A" }

        func online(_ mnt: String) -> Bool? { statusFields(r, mnt)?["online"] as? Bool }

        for mode in ["silent", "garbage", "close"] {
            // Later: the server stops answering as it should while B is mounted.
            try gate.set(mode)
            XCTAssertEqual(r.fx.sh("printf 'later, \(mode)' > '\(b.mnt)'/later-\(mode).txt").status, 0)
            XCTAssertEqual(contents(b.mnt + "/later-\(mode).txt"), "later, \(mode)")
            eventually("B says it is offline (\(mode))", timeout: 120) { online(b.mnt) == false }

            // At the mount: B comes up at once all the same, and works.
            XCTAssertEqual(r.fx.docfs(["unmount", "--no-wait", b.mnt], timeout: 120).status, 0)
            let started = Date()
            try mountSecond(r, b, env: answerTimeout)
            XCTAssertLessThan(Date().timeIntervalSince(started), 20, "the mount waited for a server that answers \(mode)")
            XCTAssertEqual(r.fx.sh("printf 'at mount, \(mode)' > '\(b.mnt)'/mount-\(mode).txt").status, 0)
            XCTAssertEqual(contents(b.mnt + "/mount-\(mode).txt"), "at mount, \(mode)")
            XCTAssertEqual(contents(b.mnt + "/a.txt"), "from A")
            eventually("B says it is offline after a mount (\(mode))", timeout: 120) { online(b.mnt) == false }
            XCTAssertNil(contents(r.mnt + "/mount-\(mode).txt"), "nothing passed a gate in mode \(mode)")
        }

        try gate.set("forward")
        XCTAssertEqual(r.fx.sh("printf 'while B was away' > mnt/a2.txt").status, 0)
        for mode in ["silent", "garbage", "close"] {
            for name in ["later", "mount"] {
                let file = "\(name)-\(mode).txt"
                eventually("A has B's \(file)", timeout: 180) { self.contents(r.mnt + "/" + file) != nil }
            }
        }
        eventually("B has what A wrote while it was away", timeout: 120) { self.contents(b.mnt + "/a2.txt") == "while B was away" }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }
}
