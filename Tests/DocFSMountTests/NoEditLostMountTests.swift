import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// No edit lost between replicas: a file held open for writing on one replica while another
/// changes, renames or deletes it (nothing either wrote is lost), an item the server refuses
/// (set aside, the rest goes on), and a gc that runs while an upload waits for its commit.
/// Replicas online, against the loopback servers.
final class NoEditLostMountTests: ReplicaTestCase {
    /// A program on its own holding `path` open for writing (Tests/remote/hold_open.py): it has
    /// written `text` when this returns; `close()` lets it close.
    final class Holder {
        let child: Child
        let out: String
        let go: String

        init(
            _ r: RemoteMount, _ path: String, _ text: String, truncating: Bool = true, more: String? = nil,
            file: StaticString = #filePath, line: UInt = #line
        ) throws {
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("remote/hold_open.py").path
            let name = UUID().uuidString
            out = r.fx.dir + "/hold-\(name).out"
            go = r.fx.dir + "/hold-\(name).go"
            child = try Child(
                "/usr/bin/env", ["python3", script, path, truncating ? "trunc" : "inplace", text, go] + (more.map { [$0] } ?? []),
                cwd: r.fx.dir, stdout: out, stderr: out)
            let deadline = Date().addingTimeInterval(30)
            while !output.contains("ready"), !child.hasExited, Date() < deadline { usleep(20_000) }
            XCTAssert(output.contains("ready"), "the holder did not open and write \(path): \(output)", file: file, line: line)
        }

        var output: String { (try? String(contentsOfFile: out, encoding: .utf8)) ?? "" }

        /// Lets the holder close the file; asserts its close() returned 0.
        func close(file: StaticString = #filePath, line: UInt = #line) {
            FileManager.default.createFile(atPath: go, contents: nil)
            XCTAssert(child.wait(seconds: 60), "the holder did not finish", file: file, line: line)
            XCTAssert(output.contains("closed 0"), "close() of the held file: \(output)", file: file, line: line)
        }

        deinit { if !child.hasExited { child.signal(SIGKILL); child.wait(seconds: nil) } }
    }

    /// Two replicas of one server, both holding `name` (contents "base"), with nothing to send
    /// or apply.
    func twoReplicasSharing(_ name: String) throws -> (RemoteMount, Second) {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("printf base > mnt/\(name)").status, 0)
        eventually("B has \(name)") { contents(b.mnt + "/" + name) == "base" }
        try waitForQuiet(r, b)
        return (r, b)
    }

    /// The server's current state of the item named `name` (content version, deleted).
    func serverRow(_ r: RemoteMount, _ name: String) throws -> [String?]? {
        try r.servers.psql(r.databaseURL, "SELECT content_version, deleted FROM docfs_items WHERE name = '\(name)' ORDER BY id DESC LIMIT 1").first
    }

    func serverVersion(_ r: RemoteMount, _ name: String) throws -> Int {
        Int(((try serverRow(r, name))?.first ?? nil) ?? "") ?? 0
    }

    func testAnEditHeldOpenAcrossAnotherReplicasVersionKeepsBoth() throws {
        let (r, b) = try twoReplicasSharing("e1.txt")

        let holder = try Holder(r, r.mnt + "/e1.txt", "A held open")
        try waitForQuiet(r, b)
        let before = try serverVersion(r, "e1.txt")
        XCTAssertEqual(r.fx.sh("printf 'B saved' > '\(b.mnt)/e1.txt'").status, 0)
        // B's version is on the server and A has seen it (kept aside while A writes).
        try waitForQuiet(r, b)
        XCTAssertGreaterThan(try serverVersion(r, "e1.txt"), before, "B's version is the server's")
        XCTAssertEqual(contents(r.mnt + "/e1.txt"), "A held open", "A's writer reads its own bytes")
        holder.close()

        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        let files = names(r.mnt)
        let copies = files.filter { $0.hasPrefix("e1 (conflicted copy from ") && $0.hasSuffix(").txt") }
        XCTAssertEqual(copies.count, 1, "one conflicted copy: \(files)\nlog A:\n\(r.logTail())")
        XCTAssertEqual(contents(r.mnt + "/e1.txt"), "B saved", "the version A's writer did not see keeps the name")
        XCTAssertEqual(copies.first.flatMap { contents(r.mnt + "/" + $0) }, "A held open", "A's bytes beside it")
        XCTAssertGreaterThan((statusFields(r, r.mnt)?["conflicts"] as? Int) ?? 0, 0, "docfs status counts the conflict on A")
    }

    /// A's passthrough reader holds the file while B's version replaces it on A: a writer on A
    /// opens at once (no wait, no EBUSY), the reader then sees B's version with the writer's
    /// bytes on top, as if the sync had written in place, and both replicas end with them.
    func testAWriterBesideReadersOfAVersionAnotherReplicaReplacedOpensAtOnce() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        // Past the segment limit: a content file of its own, which the kernel reads itself.
        let base = testBytes(1 << 20, seed: 60)
        let path = r.mnt + "/held.bin"
        XCTAssertErrno(r.fx.writeFile(path, base), 0)
        eventually("B has the file", timeout: 60) {
            (try? FileManager.default.attributesOfItem(atPath: b.mnt + "/held.bin")[.size] as? Int) == base.count
        }
        try waitForQuiet(r, b)
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var got = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        let theirs = testBytes(1 << 20, seed: 61)
        XCTAssertErrno(r.fx.writeFile(b.mnt + "/held.bin", theirs), 0)
        try waitForQuiet(r, b)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        XCTAssertEqual(got, Array(base[0..<4]), "the reader still has the version it opened")
        let started = Date()
        let writer = open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "no wait for the reader")
        var tail = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(pread(reader, &tail, 4, off_t(theirs.count - 4)), 4)
        XCTAssertEqual(tail, Array(theirs.suffix(4)), "the reader sees B's version")
        XCTAssertEqual(pwrite(writer, "NEW!", 4, 0), 4)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        XCTAssertEqual(got, Array("NEW!".utf8))
        XCTAssertEqual(close(writer), 0)
        let want = Array("NEW!".utf8) + theirs[4...]
        try waitForQuiet(r, b)
        XCTAssertBytes(r.fx.readFile(path), want)
        eventually("B has A's write", timeout: 60) { (r.fx.readFile(b.mnt + "/held.bin").bytes ?? []) == want }
    }

    /// Between a conflicted copy and the fetch of the server's version, the item and its copy
    /// are one file under two names. With passthrough readers on both, a writer of the item
    /// waits and gets EBUSY (the kernel keeps both inodes on that file: a write in place would
    /// show in the copy); once the copy's reader is gone the writer joins at once, and the copy
    /// keeps its bytes in a file of its own.
    func testAWriterBesideReadersOfAnItemAndItsConflictedCopyWaitsOnlyWhileBothAreOpen() throws {
        let (r, b) = try twoReplicasSharing("sc.txt")
        let release = r.fx.dir + "/release-refetch"
        var released = false
        defer { if !released { FileManager.default.createFile(atPath: release, contents: nil) } }
        try conflictHeldOpen(r, b, "sc.txt", fault: ["DOCFS_FAULT": "refetch:wait", "DOCFS_FAULT_RELEASE": release])
        eventually("A waits at the fault", timeout: 60) { r.fx.log.contains("DOCFS_FAULT: waiting at refetch") }
        let copy = try XCTUnwrap(names(r.mnt).first { $0.hasPrefix("sc (conflicted copy from ") }, "\(names(r.mnt))")
        var reader = open(r.mnt + "/sc.txt", O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { if reader >= 0 { close(reader) } }
        let copyReader = open(r.mnt + "/" + copy, O_RDONLY)
        XCTAssertGreaterThanOrEqual(copyReader, 0)
        var got = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        XCTAssertEqual(pread(copyReader, &got, 4, 0), 4)
        let started = Date()
        let refused = open(r.mnt + "/sc.txt", O_WRONLY)
        let e = errno
        if refused >= 0 { close(refused) }
        XCTAssertEqual(refused, -1, "a writer beside readers of the item and of its copy")
        XCTAssertEqual(e, EBUSY)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.0, "it waited for the readers first")
        close(copyReader)
        eventually("a writer joins the item's reader once the copy's is gone") {
            let writer = open(r.mnt + "/sc.txt", O_WRONLY)
            guard writer >= 0 else { return false }
            close(writer)
            return true
        }
        XCTAssertEqual(contents(r.mnt + "/" + copy), "A held open", "the copy keeps its bytes")
        // The live file's session (and its hold on other replicas' changes) ends with the last
        // handle on it, the reader's.
        close(reader)
        reader = -1
        FileManager.default.createFile(atPath: release, contents: nil)
        released = true
        try assertConflictConverged(r, b, "sc")
    }

    /// A's writer held open across B's version (so A's edit becomes a conflicted copy), with A
    /// mounted under `fault` (DOCFS_FAULT at `refetch`: after the conflicted copy is completed
    /// and before A fetches the server's version of the file again). Returns the holder closed.
    func conflictHeldOpen(_ r: RemoteMount, _ b: Second, _ name: String, fault: [String: String]) throws {
        r.fx.stopDaemon()
        try r.fx.mount(env: fault)
        let holder = try Holder(r, r.mnt + "/" + name, "A held open")
        XCTAssertEqual(r.fx.sh("printf 'B saved' > '\(b.mnt)/\(name)'").status, 0)
        eventually("B's version is on the server", timeout: 60) { (try? serverVersion(r, name)) ?? 0 > 1 }
        eventually("A keeps B's version aside for its writer", timeout: 60) {
            r.fx.log.contains("another replica's change waits until this replica's writer closes")
        }
        holder.close()
    }

    /// Both replicas end with B's version under the name and A's beside it.
    func assertConflictConverged(_ r: RemoteMount, _ b: Second, _ stem: String, file: StaticString = #filePath, line: UInt = #line) throws {
        try waitForQuiet(r, b)
        assertSameTrees(r, b, file: file, line: line)
        let copies = names(r.mnt).filter { $0.hasPrefix(stem + " (conflicted copy from ") }
        XCTAssertEqual(copies.count, 1, "one conflicted copy: \(names(r.mnt))\nlog A:\n\(r.logTail())", file: file, line: line)
        XCTAssertEqual(
            contents(r.mnt + "/" + stem + ".txt"), "B saved", "A follows the server's version of the name; log A:\n\(r.logTail(60))", file: file,
            line: line)
        XCTAssertEqual(copies.first.flatMap { contents(r.mnt + "/" + $0) }, "A held open", "A's bytes beside it", file: file, line: line)
    }

    /// A replica killed after its conflicted copy was recorded and before it fetched the server's
    /// version of the file: at the next mount it fetches it (the change log will not name it again).
    func testAConflictWhoseFetchAKillCutShortConvergesAfterTheRemount() throws {
        let (r, b) = try twoReplicasSharing("kc.txt")
        try conflictHeldOpen(r, b, "kc.txt", fault: ["DOCFS_FAULT": "refetch:abort"])
        XCTAssertEqual(r.fx.waitForDaemonExit(seconds: 60), 134, "A ended at the fault; log:\n\(r.fx.log)")
        try r.fx.mount()
        try assertConflictConverged(r, b, "kc")
    }

    /// PostgreSQL gone between a conflicted copy and the fetch of the server's version of the
    /// file: the fetch is tried again once it is back.
    func testAConflictWhoseFetchTheServerCutShortConvergesOnceItIsBack() throws {
        let (r, b) = try twoReplicasSharing("pc.txt")
        let release = r.fx.dir + "/release-refetch"
        try conflictHeldOpen(r, b, "pc.txt", fault: ["DOCFS_FAULT": "refetch:wait", "DOCFS_FAULT_RELEASE": release])
        eventually("A waits at the fault", timeout: 60) { r.fx.log.contains("DOCFS_FAULT: waiting at refetch") }
        try r.servers.stopPostgres()
        var started = false
        defer { if !started { try? r.servers.startPostgres() } }
        FileManager.default.createFile(atPath: release, contents: nil)
        eventually("A's fetch fails", timeout: 60) { r.fx.log.contains("it decided about is fetched again later") }
        try r.servers.startPostgres()
        started = true
        try assertConflictConverged(r, b, "pc")
    }

    func testADeleteOfAFileHeldOpenForWritingKeepsTheEdit() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/d && printf base > mnt/d/e2.txt").status, 0)
        eventually("B has d/e2.txt") { contents(b.mnt + "/d/e2.txt") == "base" }
        try waitForQuiet(r, b)

        let holder = try Holder(r, b.mnt + "/d/e2.txt", "B's edit")
        // A deletes the file and its folder.
        XCTAssertEqual(r.fx.sh("rm -r mnt/d").status, 0)
        try waitForQuiet(r, b)
        XCTAssertEqual(try serverRow(r, "e2.txt")?.last ?? nil, "t", "deleted on the server")
        holder.close()

        try waitForQuiet(r, b)
        XCTAssertEqual(contents(b.mnt + "/d/e2.txt"), "B's edit", "the edit wins on B")
        eventually("the file comes back on A with B's bytes") { contents(r.mnt + "/d/e2.txt") == "B's edit" }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }

    func testADeleteOfAFileHeldOpenButNotWrittenAppliesAtItsClose() throws {
        let (r, b) = try twoReplicasSharing("e3.txt")

        let holder = try Holder(r, b.mnt + "/e3.txt", "", truncating: false)
        XCTAssertEqual(unlink(r.mnt + "/e3.txt"), 0)
        try waitForQuiet(r, b)
        XCTAssertTrue(exists(b.mnt + "/e3.txt"), "kept while B's writer holds it")
        holder.close()
        eventually("the delete applies on B once its writer let go") { !exists(b.mnt + "/e3.txt") }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }

    func testARenameWhileAnotherReplicaWritesKeepsBothTheNameAndTheBytes() throws {
        let (r, b) = try twoReplicasSharing("e4.txt")

        let holder = try Holder(r, b.mnt + "/e4.txt", "B's edit")
        XCTAssertEqual(rename(r.mnt + "/e4.txt", r.mnt + "/e4-renamed.txt"), 0)
        try waitForQuiet(r, b)
        holder.close()

        eventually("both replicas show A's name with B's bytes") {
            contents(r.mnt + "/e4-renamed.txt") == "B's edit" && contents(b.mnt + "/e4-renamed.txt") == "B's edit"
        }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(names(r.mnt).filter { $0.hasPrefix("e4") }, ["e4-renamed.txt"])
    }

    // MARK: closed edits

    /// Both replicas online save one file at the same moment: both versions stay, one under the
    /// name, the other beside it as a conflicted copy, on both replicas.
    func testNearSimultaneousClosedEditsKeepBoth() throws {
        let (r, b) = try twoReplicasSharing("s.txt")
        XCTAssertEqual(r.fx.sh("printf 'from A' > mnt/s.txt & printf 'from B' > '\(b.mnt)/s.txt' & wait").status, 0)
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        if r.fx.sh("diff -r mnt '\(b.mnt)'").status != 0 {
            XCTFail("log A:\n\(r.fx.log)\nlog B:\n" + ((try? String(contentsOfFile: r.fx.dir + "/second/docfs.log", encoding: .utf8)) ?? ""))
        }
        let files = names(r.mnt).filter { $0.hasPrefix("s") }
        let all = Set(files.compactMap { contents(r.mnt + "/" + $0) })
        XCTAssert(all.isSuperset(of: ["from A", "from B"]), "both edits kept: \(files) \(all)")
    }

    /// A replica killed (-9) before its edit went up, while the other replica saves the same file:
    /// after the remount the edit still goes up, beside the other's version.
    func testAnEditKilledBeforeItsUploadSurvivesAnotherReplicasVersion() throws {
        let (r, b) = try twoReplicasSharing("k.txt")
        // A's edit cannot reach the server (stopped) when A dies; B's does, once it is back.
        try r.servers.stopPostgres()
        XCTAssertEqual(r.fx.sh("printf 'A before the kill' > mnt/k.txt").status, 0)
        r.fx.kill9()
        try r.servers.startPostgres()
        XCTAssertEqual(r.fx.sh("printf 'B meanwhile' > '\(b.mnt)/k.txt'").status, 0)
        eventually("B's version is on the server", timeout: 60) { (statusFields(r, b.mnt)?["pending"] as? Int) == 0 }
        try r.fx.mount()
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        let files = names(r.mnt).filter { $0.hasPrefix("k") }
        let all = Set(files.compactMap { contents(r.mnt + "/" + $0) })
        XCTAssertEqual(all, ["A before the kill", "B meanwhile"], "both kept: \(files)")
        XCTAssertEqual(contents(r.mnt + "/k.txt"), "B meanwhile", "the version that reached the server first keeps the name")
    }

    // MARK: an item the server refuses

    /// A server trigger refuses one name: that file is set aside (its error on the item, counted
    /// in docfs status) and everything made after it still reaches the other replica; `docfs
    /// unmount` from a script does not wait for it; once the server takes it again, `docfs sync
    /// --retry` sends it.
    func testAnItemTheServerRefusesIsSetAsideAndTheRestGoesOn() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        _ = try r.servers.psql(
            r.databaseURL,
            """
            CREATE FUNCTION docfs_test_poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.name = 'poison.txt' THEN RAISE EXCEPTION 'poison.txt is not welcome here'; END IF; RETURN NEW; END $$;
            CREATE TRIGGER docfs_test_poison BEFORE INSERT OR UPDATE ON docfs_items FOR EACH ROW EXECUTE FUNCTION docfs_test_poison();
            """)
        XCTAssertEqual(
            r.fx.sh(
                """
                printf one > mnt/before.txt && printf bad > mnt/poison.txt && printf more >> mnt/poison.txt && \
                printf two > mnt/after.txt && mkdir mnt/later && printf three > mnt/later/inside.txt
                """
            ).status, 0)
        eventually("B has everything but the refused file", timeout: 60) {
            contents(b.mnt + "/after.txt") == "two" && contents(b.mnt + "/later/inside.txt") == "three"
        }
        XCTAssertFalse(exists(b.mnt + "/poison.txt"))
        var fields: [String: Any] = [:]
        eventually("A's status counts the item set aside") {
            fields = statusFields(r, r.mnt) ?? [:]
            return (fields["setAside"] as? Int) == 1 && (fields["pending"] as? Int) == (fields["setAsideChanges"] as? Int)
        }
        XCTAssertEqual(fields["state"] as? String, "idle", "\(fields)")
        let state = r.xattr(r.mnt + "/poison.txt", "user.docfs.sync") ?? "none"
        XCTAssert(state.hasPrefix("error:") && state.contains("not welcome"), "user.docfs.sync of the refused file: \(state)")
        XCTAssertEqual(r.fx.logLines { $0.contains("poison.txt") && $0.contains("set aside") }.count, 1, "one log line:\n\(r.logTail())")

        // From a script (no terminal): the unmount does not wait for what the server refuses.
        let unmount = r.fx.docfs(["unmount", r.fx.mnt], timeout: 60)
        XCTAssertEqual(unmount.status, 0, "\(unmount)")
        XCTAssert(unmount.stderr.contains("set aside"), "docfs unmount says what stays: \(unmount)")
        _ = r.fx.waitForDaemonExit(seconds: 30)

        // Mounted again, it is still refused; the server mended, --retry sends it.
        try r.fx.mount()
        eventually("set aside again after the remount") { (statusFields(r, r.mnt)?["setAside"] as? Int) == 1 }
        _ = try r.servers.psql(r.databaseURL, "DROP TRIGGER docfs_test_poison ON docfs_items")
        let retry = r.fx.docfs(["sync", "--retry", r.fx.m("poison.txt")])
        XCTAssertEqual(retry.status, 0, "\(retry)")
        eventually("B gets the file once the server takes it", timeout: 60) { contents(b.mnt + "/poison.txt") == "badmore" }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(r.xattr(r.mnt + "/poison.txt", "user.docfs.sync"), "uploaded")
    }

    // MARK: gc against an upload in flight

    /// An upload whose versions wait (held at a fault point, its objects in the bucket, nothing
    /// on PostgreSQL names them) while `docfs remote gc --grace 0` runs: age alone would call
    /// them left-overs; the upload intents keep them, and the version reads back whole.
    /// A replica stalled between recording its manifest and committing the version, for longer
    /// than its upload intents live (dated back here): gc drops the manifest, its blocks and
    /// its pack. The commit that follows is refused by the server, and the replica sends the file
    /// again: the stall costs a re-send, never a version nobody can read.
    func testAStallLongerThanTheIntentsCostsAResendNotAnUnreadableVersion() throws {
        let r = try makeRemote(mount: false)
        let release = try stallAfterTheUploadOf("held.bin", r)
        _ = try r.gc(["--grace", "0", "--keep-versions", "0"])
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_manifests"), 0, "gc dropped the manifest of the stalled upload")
        XCTAssertEqual(try r.objects().count, 0, "gc deleted its pack")

        FileManager.default.createFile(atPath: release, contents: nil)
        try r.waitUntilUploaded(timeout: 120)
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["is not on the server"]).isEmpty, "the server refused the commit: \(r.logTail())")
        try r.assertServerMatchesMount()
        let b = try makeSecond(r)
        eventually("the second replica reads the file", timeout: 60) {
            r.fx.sh("cmp src/held.bin '\(b.mnt)/held.bin'").status == 0
        }
    }

    /// Mounts with the replica's uploads held at `upload-done` (the file to create at the
    /// returned path lets them go), copies `file` (300 kB) in, waits until its manifest is
    /// recorded and its versions wait, and dates its upload intents back past their life.
    func stallAfterTheUploadOf(_ file: String, _ r: RemoteMount) throws -> String {
        let release = r.fx.dir + "/release-upload"
        try r.fx.mount(env: ["DOCFS_FAULT": "upload-done:wait", "DOCFS_FAULT_RELEASE": release])
        XCTAssertEqual(r.fx.sh("mkdir -p src && head -c 300000 /dev/urandom > src/\(file) && cp src/\(file) mnt/").status, 0)
        eventually("the upload is recorded and held before its commit", timeout: 60) {
            r.fx.log.contains("DOCFS_FAULT: waiting at upload-done") && ((try? r.count("SELECT count(*) FROM docfs_manifests")) ?? 0) == 1
        }
        _ = try r.servers.psql(r.databaseURL, "UPDATE docfs_upload_intents SET created_ns = created_ns - 3600000000000")
        return release
    }

    /// gc racing a commit: a replica's chunk is held open in its one server call (`docfs_apply`),
    /// its version applied (the version's check holds the manifest's row) and not committed: the
    /// call's last step waits on a row a psql session holds (this replica's `docfs_replicas`
    /// row). Its upload intents are older than they live (dated back while it waited after its
    /// uploads: a stall that outlived them). `docfs remote gc --grace 0` runs meanwhile and sees a
    /// manifest no committed version names: it must wait for the commit and look again, not wait
    /// and delete it anyway (a row lock only delays a DELETE: it went on once the lock was let
    /// go, and the committed version named contents nobody could read). Released, the version
    /// commits and gc finishes; the file reads back byte-exact on a second replica.
    func testGcRacingACommitNeverLeavesAVersionWithoutItsContents() throws {
        let r = try makeRemote(mount: false)
        let uploaded = try stallAfterTheUploadOf("racing.bin", r)
        let name = "docfs-test-commit-holder-\(getpid())"
        let release = try r.holdInAPsqlSession(
            "BEGIN; SELECT 1 FROM docfs_replicas WHERE role = current_user FOR UPDATE; SELECT pg_sleep(300)", name: name)
        addTeardownBlock(release)
        eventually("the psql session holds the replica's row", timeout: 30) {
            ((try? r.count("SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(name)' AND query LIKE '%pg_sleep%'")) ?? 0) == 1
        }
        FileManager.default.createFile(atPath: uploaded, contents: nil)
        eventually("the version is applied and held before its commit", timeout: 60) {
            ((try? r.count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%docfs_apply%'")) ?? 0) == 1
        }
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_versions"), 0, "nothing committed yet")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_manifests"), 1, "the manifest is recorded")
        let out = r.fx.dir + "/gc.out"
        let gc = try Child(
            r.fx.bin, ["remote", "gc", r.fx.store, "--grace", "0", "--keep-versions", "0", "--json"], cwd: r.fx.dir,
            env: r.awsEnvironment(secret: r.servers.secretKey), stdout: out, stderr: out + ".err")
        defer { if !gc.hasExited { gc.signal(SIGKILL); gc.wait(seconds: nil) } }
        eventually("gc waits for the replica's transaction", timeout: 30) {
            ((try? r.count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")) ?? 0) > 1
        }
        release()
        XCTAssert(gc.wait(seconds: 120), "gc did not finish")
        let report = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        XCTAssertEqual(gc.status, 0, "gc: \(report) \((try? String(contentsOfFile: out + ".err", encoding: .utf8)) ?? "")")

        try r.waitUntilUploaded()
        XCTAssertEqual(
            try r.count(
                """
                SELECT count(*) FROM docfs_versions v WHERE NOT EXISTS (SELECT 1 FROM docfs_manifests m WHERE m.key = v.content_key)
                """), 0, "a committed version names a manifest gc dropped: \(report)")
        try r.assertServerMatchesMount()
        let b = try makeSecond(r)
        eventually("the second replica reads the file byte-exact", timeout: 60) {
            r.fx.sh("cmp src/racing.bin '\(b.mnt)/racing.bin'").status == 0
        }
    }

    func testGarbageCollectionSparesAnUploadWaitingForItsCommit() throws {
        let r = try makeRemote(mount: false)
        let release = r.fx.dir + "/release-upload"
        try r.fx.mount(env: ["DOCFS_FAULT": "upload-done:wait", "DOCFS_FAULT_RELEASE": release])
        XCTAssertEqual(r.fx.sh("mkdir -p src && head -c 300000 /dev/urandom > src/held.bin && cp src/held.bin mnt/").status, 0)
        eventually("the upload is in the bucket and held before its commit", timeout: 60) {
            (try? r.objects().count) == 1 && r.fx.log.contains("DOCFS_FAULT: waiting at upload-done")
        }
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_versions"), 0, "nothing names the object yet")
        let gc = r.fx.docfs(
            ["remote", "gc", r.fx.store, "--grace", "0", "--keep-versions", "0", "--json"], env: r.awsEnvironment(secret: r.servers.secretKey))
        XCTAssertEqual(gc.status, 0, "\(gc)")
        XCTAssertEqual(try r.objects().count, 1, "gc removed the object of an upload in flight: \(gc.stdout)")

        FileManager.default.createFile(atPath: release, contents: nil)
        try r.waitUntilUploaded()
        try r.assertServerMatchesMount()
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_upload_intents"), 0, "the intent is dropped once the version is in")
        // A replica of its own reads it back from the server.
        let b = try makeSecond(r)
        eventually("the second replica reads the file", timeout: 60) {
            r.fx.sh("cmp src/held.bin '\(b.mnt)/held.bin'").status == 0
        }
    }
}
