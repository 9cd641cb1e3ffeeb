import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Issue 15, the remote replica, through the mount: what `cp`, `dd`, `kill -9` and a server that
/// goes away do, checked on the server with second clients (psql and boto3, RemoteMountFixture)
/// after `docfs status --json` says the outbox is empty. Each test has a database and a bucket of
/// its own on the servers Tests/remote/servers.sh starts; without them the tests are skipped.
///
/// Timeouts only keep a broken engine from hanging the run; nothing here asserts a duration.
final class RemoteMountTests: RemoteMountTestCase {
    /// A temporary identifier is at least 2^40; the server's are small.
    static let firstTemporaryIdentifier: Int64 = 1 << 40

    // MARK: 1. a copied tree arrives, bytes and all

    func testCopiedTreeArrivesOnTheServerWithTheSameBytes() throws {
        let r = try makeRemote()
        let source = r.fx.src + "/tree"
        // 6 × 5 × 10 = 300 small files in 36 folders, an empty file, a link, a 1 MiB and a
        // 5 MiB + 1 file (past a 5 MiB part: multipart, if the engine splits there).
        try makeSourceTree(
            source, folders: 6, subfolders: 5, filesPerFolder: 10,
            bigFiles: [1 << 20, 5 * (1 << 20) + 1])
        let cp = r.fx.sh("cp -r src/tree mnt/")
        XCTAssertEqual(cp.status, 0, "cp -r into the mount: \(cp)")
        try r.assertMountHolds(source, under: "tree")

        try r.waitUntilUploaded()
        try r.assertServerMatchesMount()
        XCTAssertEqual(r.xattr(r.fx.m("tree/big-1.bin"), "user.docfs.sync"), "uploaded")
        XCTAssertEqual(r.xattr(r.fx.m("tree/dossier 0 é"), "user.docfs.sync"), "uploaded")
    }

    /// `docfs init --remote` of a server that has a tree already makes a replica holding all of
    /// it: the second store, mounted, shows the same tree with the same bytes and the server's
    /// identifiers, and adds nothing to the outbox.
    func testInitOfAServerWithATreeTakesItsMetadataAndReadsItsFiles() throws {
        let r = try makeRemote()
        try makeSourceTree(r.fx.src + "/shared", folders: 2, subfolders: 2, filesPerFolder: 3, bigFiles: [300_000])
        XCTAssertEqual(r.fx.sh("cp -r src/shared mnt/ && ln -s shared mnt/alias").status, 0)
        try r.waitUntilUploaded()

        let second = r.fx.dir + "/second"
        let mnt2 = r.fx.dir + "/mnt2"
        XCTAssertEqual(mkdir(mnt2, 0o755), 0)
        addTeardownBlock { MountFixture.lazyUnmount(mnt2) }
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let initResult = r.fx.docfs(["init", second] + r.remoteArguments, env: env)
        XCTAssertEqual(initResult.status, 0, "\(initResult)")
        XCTAssert(initResult.stderr.contains("took the metadata of"), "init says what it took: \(initResult.stderr)")
        let mount = r.fx.docfs(["mount", second, mnt2], env: env)
        XCTAssertEqual(mount.status, 0, "\(mount)")
        defer { _ = r.fx.docfs(["unmount", mnt2]) }
        let diff = r.fx.sh("diff -r --no-dereference mnt '\(mnt2)'")
        XCTAssertEqual(diff.status, 0, "the second replica differs: \(diff)")
        XCTAssertEqual(
            r.xattr(mnt2 + "/shared", "user.docfs.identifier"), r.xattr(r.fx.m("shared"), "user.docfs.identifier"),
            "both replicas name the folder by the server's identifier")
        let status = r.fx.docfs(["status", mnt2, "--json"])
        XCTAssert(status.stdout.contains("\"pending\":0"), "nothing to send back: \(status)")
    }

    // MARK: 2. temporary identifiers become permanent, inodes stay

    func testTemporaryIdentifiersBecomePermanentWithTheSameInode() throws {
        let r = try makeRemote()
        let bytes = testBytes(10_000, seed: 42)
        // A folder and a file inside it made at once: the file's outbox entry names the folder by
        // its temporary identifier, which must be rewritten when the folder gets its permanent one.
        XCTAssertErrno(r.fx.mkdirErrno(r.fx.m("folder")), 0)
        XCTAssertErrno(r.fx.writeFile(r.fx.m("folder/note.txt"), bytes), 0)
        var before = [String: (identifier: Int64, inode: UInt64)]()
        for path in ["folder", "folder/note.txt"] {
            guard let id = r.identifier(r.fx.m(path)), let ino = r.inode(r.fx.m(path)) else {
                return XCTFail(
                    "\(path): no identifier or inode (identifier xattr: \(String(describing: r.xattr(r.fx.m(path), "user.docfs.identifier"))))")
            }
            XCTAssertGreaterThanOrEqual(id, Self.firstTemporaryIdentifier, "\(path) before upload")
            before[path] = (id, ino)
        }

        try r.waitUntilUploaded()
        let server = try r.assertServerMatchesMount()
        for path in ["folder", "folder/note.txt"] {
            let id = r.identifier(r.fx.m(path))
            XCTAssertNotNil(server["/" + path], "\(path) on the server")
            XCTAssertEqual(id, server["/" + path]?.id, "\(path): the identifier after upload is the server's id")
            XCTAssertLessThan(id ?? Int64.max, Self.firstTemporaryIdentifier, "\(path) after upload")
            XCTAssertNotEqual(id, before[path]?.identifier)
            XCTAssertEqual(r.inode(r.fx.m(path)), before[path]?.inode, "\(path): inode number after upload")
            XCTAssertEqual(r.xattr(r.fx.m(path), "user.docfs.sync"), "uploaded", path)
        }
        XCTAssertBytes(r.fx.readFile(r.fx.m("folder/note.txt")), bytes)
        // docfs info shows the permanent identifier too.
        let info = r.fx.docfs(["info", r.fx.m("folder/note.txt")])
        XCTAssertEqual(info.status, 0, "\(info)")
        if let id = server["/folder/note.txt"]?.id {
            XCTAssert(info.stdout.contains("\(id)"), "docfs info does not show the permanent identifier \(id): \(info.stdout)")
        }
    }

    /// A file's create and its close (where the import happens) can straddle the moment its
    /// folder's temporary identifier is replaced by the permanent one: the import must land in
    /// the folder all the same. An idle engine sends a new folder at once, so each round makes a
    /// folder while the engine is idle and copies files into it straight away.
    func testFilesCopiedIntoAFolderWhileItBecomesPermanentAreAllImported() throws {
        let r = try makeRemote()
        for i in 0..<30 { try r.fx.writeSource("flat/f\(i).txt", testBytes(3000, seed: UInt64(100 + i))) }
        var failed = [String]()
        for round in 0..<8 {
            try r.waitUntilUploaded(timeout: 60)
            let cp = r.fx.sh("mkdir mnt/round-\(round) && cp src/flat/* mnt/round-\(round)/")
            if cp.status != 0 { failed.append("round \(round): \(cp.stderr.trimmingCharacters(in: .newlines))") }
        }
        let refusals = r.fx.log.split(separator: "\n").filter { $0.contains("refused import") }
        XCTAssertEqual(
            failed, [], "cp into a folder that got its permanent identifier meanwhile; the log says:\n\(refusals.prefix(5).joined(separator: "\n"))")
        try r.waitUntilUploaded()
        try r.assertServerMatchesMount()
    }

    /// A new content version is a new object (the old one is never overwritten in place), and
    /// a chmod reaches the server's row.
    func testNewVersionIsANewObjectAndTheModeFollows() throws {
        let r = try makeRemote()
        let first = testBytes(4000, seed: 30), second = testBytes(6000, seed: 31)
        XCTAssertErrno(r.fx.writeFile(r.fx.m("doc.txt"), first), 0)
        try r.waitUntilUploaded()
        let firstKey = try XCTUnwrap(try r.serverTree()["/doc.txt"]?.contentKey, "doc.txt has no object")

        XCTAssertErrno(r.fx.writeFile(r.fx.m("doc.txt"), second), 0)
        XCTAssertErrno(r.fx.errnoOf("chmod") { chmod(r.fx.m("doc.txt"), 0o600) }, 0)
        try r.waitUntilUploaded()
        let server = try r.assertServerMatchesMount()
        let item = try XCTUnwrap(server["/doc.txt"])
        XCTAssertNotEqual(item.contentKey, firstKey, "the new version reused the old object's key")
        XCTAssertEqual(try r.digests([firstKey])[firstKey]?.size, Int64(first.count), "the first version's object changed")
        let mode = try r.servers.psql(r.databaseURL, "SELECT mode FROM docfs_items WHERE id = \(item.id)").first?.first ?? nil
        XCTAssertEqual(mode.flatMap { Int($0) }.map { $0 & 0o7777 }, 0o600, "mode on the server")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_versions WHERE item_id = \(item.id)"), 2, "versions of doc.txt")
    }

    /// Trash, delete for good and tags are changes like any other: the server's rows follow.
    func testTrashDeleteAndTagsReachTheServer() throws {
        let r = try makeRemote(mount: false)
        try r.fx.mount(extra: ["--trash"])
        for (i, name) in ["trashed", "deleted", "tagged"].enumerated() {
            XCTAssertErrno(r.fx.writeFile(r.fx.m(name), testBytes(1000, seed: UInt64(40 + i))), 0)
        }
        try r.waitUntilUploaded()
        let ids = try r.serverTree().mapValues(\.id)
        let work = r.fx.sh("set -e; rm mnt/trashed; rm mnt/deleted; rm mnt/.Trash/deleted; \"$DOCFS\" tag mnt/tagged --add red")
        XCTAssertEqual(work.status, 0, "\(work)")
        try r.waitUntilUploaded()

        func row(_ name: String) throws -> [String?] {
            let id = try XCTUnwrap(ids["/" + name], "\(name) was never on the server")
            return try r.servers.psql(
                r.databaseURL,
                """
                SELECT deleted, trashed_ns IS NOT NULL, array_to_string(tags, ',') FROM docfs_items WHERE id = \(id)
                """
            ).first ?? []
        }
        XCTAssertEqual(try row("trashed"), ["f", "t", ""], "trashed: (deleted, trashed, tags)")
        XCTAssertEqual(try row("deleted").first, "t", "deleted for good")
        XCTAssertEqual(try row("tagged"), ["f", "f", "red"], "tagged: (deleted, trashed, tags)")
    }

    // MARK: 3. kill -9 during the uploads: nothing lost, nothing doubled

    func testKill9DuringUploadsThenRemountLosesAndDoublesNothing() throws {
        let r = try makeRemote()
        let source = r.fx.src + "/tree"
        // Enough objects that moto (~100 requests/s) is still busy when the daemon dies, and a
        // 12 MiB file so a multipart upload can be cut in the middle.
        let items = try makeSourceTree(source, folders: 4, subfolders: 4, filesPerFolder: 12, bigFiles: [12 << 20])
        let cp = r.fx.sh("cp -r src/tree mnt/")
        XCTAssertEqual(cp.status, 0, "cp -r into the mount: \(cp)")

        // Kill once the engine has started: some of the outbox is on the server, some is not.
        let started = try r.waitForStatus("pending > 0", timeout: 30) { ($0.pending ?? 0) > 0 }
        let during = try r.waitForStatus("the first uploads", timeout: 60) { ($0.pending ?? 0) < (started.pending ?? 0) }
        if during.pending == 0 { warn("testKill9DuringUploads: the outbox was empty before the kill; nothing was cut") }
        r.fx.kill9()

        try r.fx.mount()
        try r.assertMountHolds(source, under: "tree")
        try r.waitUntilUploaded()
        try r.assertServerMatchesMount()
        let left = try r.collectPacksLeftByAKill()
        if left > 0 { warn("testKill9DuringUploads: the kill left \(left) pack(s) for gc") }
        try r.assertNothingDoubled(expectedItems: items + 1) // + the folder `tree`
    }

    /// A replica mounted with `DOCFS_FAULT=fault`, a random file of `mebibytes` copied in as
    /// `big.bin` (also kept as `src/big.bin`), and the daemon dead at the fault point.
    func copyABigFileUntilTheFault(_ fault: String, mebibytes: Int, file: StaticString = #filePath, line: UInt = #line) throws -> RemoteMount {
        let r = try makeRemote(mount: false)
        try r.fx.mount(env: ["DOCFS_FAULT": fault])
        let dd = r.fx.sh(
            "mkdir -p src && dd if=/dev/urandom of=src/big.bin bs=1M count=\(mebibytes) status=none && cp src/big.bin mnt/big.bin", timeout: 120)
        XCTAssertEqual(dd.status, 0, "cp into the mount: \(dd)", file: file, line: line)
        XCTAssertEqual(r.fx.waitForDaemonExit(seconds: 60), 134, "the daemon did not stop at \(fault); log:\n\(r.fx.log)", file: file, line: line)
        return r
    }

    /// A replica that dies once the first pack of a file is in the bucket (DOCFS_FAULT stops it
    /// right after that pack's blocks are recorded: the file's create not yet on PostgreSQL,
    /// whatever the machine's speed): after the remount the blocks already in are not sent
    /// again, and the file reads back whole.
    func testKill9InTheMiddleOfAnUploadSendsOnlyWhatIsMissing() throws {
        // 40 MiB: five packs of about 8 MiB; the daemon dies once the first is in.
        let r = try copyABigFileUntilTheFault("upload-part:abort", mebibytes: 40)
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_items WHERE parent_id IS NOT NULL"), 0,
            "the file reached PostgreSQL before its blocks were all in")
        let recorded = try r.count("SELECT count(*) FROM docfs_blocks")
        XCTAssertGreaterThan(recorded, 0, "the first pack's blocks are recorded")
        XCTAssertEqual(try r.unfinishedUploads(), [], "packs go up in one request each")

        try r.fx.mount()
        let status = try r.waitUntilUploaded()
        let sent = (try JSONSerialization.jsonObject(with: Data(status.raw.utf8)) as? [String: Any])?["uploadedBytes"] as? NSNumber
        XCTAssertLessThan(sent?.int64Value ?? Int64.max, 40 << 20, "the remount sent only the blocks missing: \(status.raw)")
        try r.assertServerMatchesMount()
        XCTAssertEqual(r.fx.sh("cmp src/big.bin mnt/big.bin").status, 0, "big.bin after the remount")
    }

    /// A replica that dies with a pack in the bucket whose blocks it never recorded: the remount
    /// sends the file again, the pack is named by nothing but its upload intent, and
    /// `docfs remote gc` deletes it once the intent has expired; nothing else is doubled.
    func testAPackLeftByAKillIsCollected() throws {
        let r = try copyABigFileUntilTheFault("pack-put:abort", mebibytes: 20)
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks"), 0, "no block was recorded before the kill")

        try r.fx.mount()
        try r.waitUntilUploaded()
        try r.assertServerMatchesMount()
        XCTAssertEqual(r.fx.sh("cmp src/big.bin mnt/big.bin").status, 0, "big.bin after the remount")
        XCTAssertGreaterThan(try r.collectPacksLeftByAKill(), 0, "the pack put before the kill")
        try r.assertNothingDoubled(expectedItems: 1)
    }

    // MARK: 4. the server goes away mid-copy and comes back

    func testPendingChangesGoUpWithinSecondsOfPostgresComingBack() throws {
        let r = try makeRemote()
        try servers.stopPostgres()
        XCTAssertEqual(r.fx.sh("for i in 1 2 3; do echo $i > mnt/p$i.txt; done").status, 0)
        _ = try r.waitForStatus("offline with changes waiting", timeout: 60) { $0.online == false && ($0.pending ?? 0) > 0 }
        // The outage's length is the point: a doubling backoff reaches tens of seconds by its end.
        sleep(20)
        try servers.startPostgres()
        let back = Date()
        _ = try r.waitForStatus("everything on the server", timeout: 120) { $0.pending == 0 && $0.online == true }
        let took = Date().timeIntervalSince(back)
        print("RemoteMountTests: the changes were on the server \(String(format: "%.1f", took)) s after PostgreSQL came back")
        XCTAssertLessThan(took, 15, "PostgreSQL was back; the replica took \(took) s to send what waited")
        XCTAssertEqual(Set(try r.serverTree().keys).intersection(["/p1.txt", "/p2.txt", "/p3.txt"]).count, 3)
    }

    func testWorkGoesOnWhilePostgresIsDownAndEverythingArrivesWhenItIsBack() throws {
        let r = try makeRemote()
        // Something already on the server, changed while it is away.
        XCTAssertErrno(r.fx.mkdirErrno(r.fx.m("before")), 0)
        for i in 0..<3 { XCTAssertErrno(r.fx.writeFile(r.fx.m("before/f\(i)"), testBytes(500, seed: UInt64(i))), 0) }
        try r.waitUntilUploaded()

        try servers.stopPostgres()
        // All of this must answer at once (the shell's timeout is only a hang guard): a tree, and
        // changes whose order matters — a folder made, filled, renamed, filled again; a delete.
        let source = r.fx.src + "/tree"
        try makeSourceTree(source, folders: 2, subfolders: 3, filesPerFolder: 8)
        let work = r.fx.sh(
            """
            set -e
            cp -r src/tree mnt/
            mkdir mnt/made
            echo one > mnt/made/one.txt
            mv mnt/made mnt/renamed
            echo two > mnt/renamed/two.txt
            mv mnt/before/f0 mnt/renamed/moved.txt
            rm mnt/before/f1
            """)
        XCTAssertEqual(work.status, 0, "local work with PostgreSQL down: \(work)")
        try r.assertMountHolds(source, under: "tree")

        let offline = try r.waitForStatus("online == false with a lastError", timeout: 60) {
            $0.online == false && $0.lastError != nil
        }
        XCTAssertGreaterThan(offline.pending ?? 0, 0, "pending while PostgreSQL is down: \(offline)")
        let human = r.fx.docfs(["status", r.fx.mnt])
        XCTAssert(
            human.status == 0 && human.stdout.contains("offline") && human.stdout.contains(offline.lastError ?? "?"),
            "docfs status (human) while PostgreSQL is down: \(human)")
        // Offline is normal: the item waits (pending, or an error saying why), never "uploaded".
        let state = r.xattr(r.fx.m("renamed/two.txt"), "user.docfs.sync") ?? "none"
        XCTAssert(state == "pending" || state.hasPrefix("error:"), "user.docfs.sync of renamed/two.txt: \(state)")

        try servers.startPostgres()
        try r.waitUntilUploaded()
        let server = try r.assertServerMatchesMount()
        XCTAssertNil(server["/before/f1"], "deleted while the server was down")
        XCTAssertNotNil(server["/renamed/moved.txt"])
        XCTAssertEqual(try r.status().online, true)
    }

    /// A file made and written while the server is away goes up once: its create and its
    /// content versions, sent together, name one object.
    func testAFileWrittenWhileTheServerIsAwayIsUploadedOnce() throws {
        let r = try makeRemote()
        try servers.stopPostgres()
        XCTAssertEqual(r.fx.sh("printf hello > mnt/once.txt && printf ' again' >> mnt/once.txt").status, 0)
        // And ten more, each in a folder of its own: the outbox's chunks of eight would part
        // some file's create from its contents (a folder, a create, a content version: threes).
        XCTAssertEqual(r.fx.sh("for i in 0 1 2 3 4 5 6 7 8 9; do mkdir mnt/d$i && printf \"file $i\" > mnt/d$i/f.txt; done").status, 0)
        try servers.startPostgres()
        try r.waitUntilUploaded()
        let id = try XCTUnwrap(r.identifier(r.fx.m("once.txt")))
        let versions = try r.count("SELECT count(*) FROM docfs_versions WHERE item_id = \(id)")
        XCTAssertGreaterThanOrEqual(versions, 2, "the create and at least one content version")
        XCTAssertEqual(try r.count("SELECT count(DISTINCT content_key) FROM docfs_versions WHERE item_id = \(id)"), 1)
        // One manifest per file; each file's one block sent once, packed together.
        XCTAssertEqual(try r.manifests().count, 11)
        let packed = try r.objects()
        XCTAssertEqual(packed.reduce(Int64(0)) { $0 + $1.size }, 10 * 6 + 11, "every block once, with its bytes: \(packed)")
        XCTAssertLessThanOrEqual(packed.count, 3, "small files share packs: \(packed)")
        // gc keeps the packs a live item's blocks are in, whichever versions name them too.
        XCTAssertEqual(r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0"], env: r.awsEnvironment(secret: r.servers.secretKey)).status, 0)
        XCTAssertEqual(try r.objects().map(\.key).sorted(), packed.map(\.key).sorted())
        XCTAssertEqual(try String(contentsOfFile: r.fx.m("once.txt"), encoding: .utf8), "hello again")
    }

    // MARK: 5. a 200 MiB file goes up in packs with bounded memory

    /// What an upload may hold by design (`BlockUploader.memoryBound`): the chunker's buffer
    /// (8 MiB), the batch waiting for the server (8 MiB + a 4 MiB block), the pack being sealed and
    /// the two in flight (3 × (8 + 4) MiB).
    static let uploadMemoryBound = 56 << 20

    func testLargeFileGoesUpInPacksWithBoundedMemory() throws {
        let r = try makeRemote()
        // The daemon's own working set first (threads, connections, caches): a file of a few
        // blocks goes up, and the peak is measured from there.
        XCTAssertEqual(r.fx.sh("head -c 3000000 /dev/urandom > mnt/warm.bin").status, 0)
        try r.waitUntilUploaded(timeout: 60)
        guard r.resetDaemonPeakMemory(), let before = r.daemonMemory("VmRSS") else {
            throw XCTSkip("cannot reset the daemon's peak resident memory (/proc/PID/clear_refs)")
        }

        let size = 200 << 20
        let dd = r.fx.sh("dd if=/dev/urandom of=mnt/big.bin bs=1M count=200 status=none", timeout: 120)
        XCTAssertEqual(dd.status, 0, "dd into the mount: \(dd)")
        try r.waitUntilUploaded(timeout: 180)

        let server = try r.assertServerMatchesMount() // size and sha256 of its blocks via boto3
        let key = try XCTUnwrap(server["/big.bin"]?.contentKey, "big.bin has no contents")
        let blocks = try XCTUnwrap(try r.manifests()[key], "big.bin's version names no manifest")
        XCTAssertGreaterThan(blocks.count, 20, "cut into blocks of about 1 MiB: \(blocks.count)")
        // Random bytes: every block goes up (a retried PUT may leave a pack or two behind for gc).
        let packed = try r.objects().reduce(Int64(0)) { $0 + $1.size }
        XCTAssertGreaterThanOrEqual(packed, Int64(size) + 3_000_000, "every block sent")
        XCTAssertLessThanOrEqual(packed, Int64(size) + 3_000_000 + 3 * (12 << 20), "no block sent twice but by a retry")
        XCTAssertTrue(try r.objects().allSatisfy { $0.size <= 16 << 20 }, "packs of about 8 MiB")
        XCTAssertEqual(try r.unfinishedUploads(), [])

        // The design's bound with room for what the daemon's other work allocates meanwhile
        // (the FUSE writes of dd, allocator slack): growth, not an absolute figure.
        let peak = try XCTUnwrap(r.daemonMemory("VmHWM"), "no VmHWM for the daemon")
        print("RemoteMountTests: a 200 MiB upload raised the daemon's peak RSS from \(before >> 20) to \(peak >> 20) MiB")
        XCTAssertLessThan(
            peak - before, Self.uploadMemoryBound + (40 << 20),
            "the daemon's peak resident memory grew by \((peak - before) >> 20) MiB (from \(before >> 20) MiB) for a 200 MiB upload")
    }

    // MARK: 6. refusals are reported once, clearly

    func testWrongCredentialsAreReportedOnceAndLocalWorkGoesOn() throws {
        let r = try makeRemote(mountEnv: nil, mount: false)
        try r.fx.mount(env: r.awsEnvironment(secret: "wrong-secret-0123456789abcdefghijklmnopqrstu"))
        let bytes = testBytes(3000, seed: 6)
        XCTAssertErrno(r.fx.writeFile(r.fx.m("local.txt"), bytes), 0)
        XCTAssertBytes(r.fx.readFile(r.fx.m("local.txt")), bytes)

        let words = ["SignatureDoesNotMatch", "signature", "credential", "InvalidAccessKeyId"]
        let refused = try r.waitForStatus("a lastError about the credentials", timeout: 30) { s in
            words.contains { s.lastError?.range(of: $0, options: .caseInsensitive) != nil }
        }
        XCTAssertGreaterThan(refused.pending ?? 0, 0, "nothing can have been uploaded: \(refused)")
        let state = r.xattr(r.fx.m("local.txt"), "user.docfs.sync") ?? "none"
        XCTAssert(state == "pending" || state.hasPrefix("error:"), "user.docfs.sync of local.txt: \(state)")

        // Authentication errors are reported, not retried in a flood: watch the log for 10 s.
        sleep(10)
        let lines = r.logLines(mentioningAnyOf: words)
        XCTAssert(
            (1...3).contains(lines.count), "log lines about the credentials in 10 s: \(lines.count)\n\(lines.prefix(10).joined(separator: "\n"))")
        XCTAssertFalse(r.fx.log.contains(servers.secretKey), "the log holds the secret")
    }

    func testMissingBucketIsNamedInTheStatusAndTheLog() throws {
        let r = try makeRemote()
        _ = try servers.s3check(["delete-bucket", r.bucket])
        XCTAssertErrno(r.fx.writeFile(r.fx.m("after.txt"), testBytes(2000, seed: 7)), 0)
        let status = try r.waitForStatus("a lastError naming the bucket", timeout: 30) {
            $0.lastError?.contains(r.bucket) == true
        }
        XCTAssertGreaterThan(status.pending ?? 0, 0, "\(status)")
        XCTAssertFalse(r.logLines(mentioningAnyOf: [r.bucket]).isEmpty, "no log line names the bucket \(r.bucket):\n\(r.logTail())")
    }

    // MARK: 7. unmount waits for the outbox, or leaves it for the next mount

    func testUnmountReturnsOnceEverythingIsOnTheServer() throws {
        let r = try makeRemote()
        let source = r.fx.src + "/tree"
        try makeSourceTree(source, folders: 2, subfolders: 2, filesPerFolder: 10, bigFiles: [2 << 20])
        let cp = r.fx.sh("cp -r src/tree mnt/")
        XCTAssertEqual(cp.status, 0, "cp -r into the mount: \(cp)")

        let unmount = try r.unmount()
        XCTAssertEqual(unmount.status, 0, "docfs unmount: \(unmount)")
        XCTAssertFalse(r.fx.isMounted)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15), "the daemon is still running after docfs unmount")
        // No waiting here: unmount's return is the promise that it is all on the server.
        var expected = [String: LocalEntry]()
        for (path, entry) in try r.localTree(source) {
            var e = entry
            e.path = "/tree" + path
            expected[e.path] = e
        }
        expected["/tree"] = LocalEntry(path: "/tree", kind: "directory", size: 0, sha256: nil, target: nil)
        try r.assertServerMatches(expected)
    }

    func testUnmountNoWaitKeepsTheOutboxForTheNextMount() throws {
        let r = try makeRemote()
        try servers.stopPostgres()
        XCTAssertErrno(r.fx.mkdirErrno(r.fx.m("kept")), 0)
        for i in 0..<5 { XCTAssertErrno(r.fx.writeFile(r.fx.m("kept/f\(i)"), testBytes(1000 + i, seed: UInt64(20 + i))), 0) }
        let pending = try r.waitForStatus("pending > 0", timeout: 10) { ($0.pending ?? 0) > 0 }
        let unmount = try r.unmount(["--no-wait"], timeout: 60)
        XCTAssertEqual(unmount.status, 0, "docfs unmount --no-wait with PostgreSQL down (pending \(pending.pending ?? -1)): \(unmount)")
        XCTAssertFalse(r.fx.isMounted)
        guard r.fx.waitForDaemonExit(seconds: 15) != nil else {
            return XCTFail("the daemon is still running after docfs unmount --no-wait; its log ends:\n\(r.logTail(60))")
        }

        try servers.startPostgres()
        try r.fx.mount()
        try r.waitUntilUploaded()
        let server = try r.assertServerMatchesMount()
        XCTAssertNotNil(server["/kept/f4"])
    }

    // MARK: configuration

    func testInitRefusesAServerOrABucketItCannotUse() throws {
        let servers = self.servers!
        let database = "docfs_init_\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(database)")
        addTeardownBlock { _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(database) WITH (FORCE)") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-init-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        let bin = try DocFSBinary.path()
        let env = ["AWS_ACCESS_KEY_ID": servers.accessKey, "AWS_SECRET_ACCESS_KEY": servers.secretKey, "AWS_REGION": "us-east-1"]
        func initStore(_ name: String, remote: String, bucket: String, secret: String? = nil) -> ShellResult {
            runProcess(
                bin,
                [
                    "init", "\(dir)/\(name)", "--remote", remote, "--objects", "s3://\(bucket)/replica",
                    "--s3-endpoint", servers.s3Endpoint,
                ], cwd: dir,
                env: env.merging(["AWS_SECRET_ACCESS_KEY": secret ?? servers.secretKey]) { $1 }, timeout: 60, outDir: dir)
        }
        func assertOneClearMessage(_ r: ShellResult, naming word: String, _ what: String) {
            XCTAssertNotEqual(r.status, 0, "\(what): init succeeded: \(r)")
            let lines = r.stderr.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, "\(what): one message on stderr: \(r)")
            XCTAssert(
                r.stderr.hasPrefix("docfs: ") && r.stderr.range(of: word, options: .caseInsensitive) != nil,
                "\(what): the message says \(word): \(r)")
        }

        // A bucket that does not exist.
        let missing = "docfs-missing-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        assertOneClearMessage(
            initStore("no-bucket", remote: servers.databaseURL(database), bucket: missing),
            naming: missing, "a missing bucket")
        let bucket = "docfs-init-\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
        _ = try servers.s3check(["create-bucket", bucket])
        addTeardownBlock { _ = try? servers.s3check(["delete-bucket", bucket]) }
        // A wrong secret: S3 refuses the signature.
        assertOneClearMessage(
            initStore(
                "bad-secret", remote: servers.databaseURL(database), bucket: bucket,
                secret: "wrong-secret-0123456789abcdefghijklmnopqrstu"),
            naming: "AWS_SECRET_ACCESS_KEY", "a wrong secret key")
        // A database the server does not have: the server says so at once, and so must docfs
        // (not a timeout as if nobody had answered).
        assertOneClearMessage(
            initStore("no-database", remote: servers.databaseURL(database + "_missing"), bucket: bucket),
            naming: "does not exist", "a missing database")
        // A port nobody listens on (port 1 on loopback): the connection is refused at once.
        assertOneClearMessage(
            initStore("no-server", remote: "postgres://docfs@127.0.0.1:1/\(database)", bucket: bucket),
            naming: "refused", "an unreachable PostgreSQL")
        // A server whose TLS certificate another CA signed: refused by verify-full, nothing left.
        if let otherCA = ProcessInfo.processInfo.environment["DOCFS_TEST_PG_OTHER_CA"] {
            assertOneClearMessage(
                initStore(
                    "bad-cert", remote: servers.databaseURL(database) + "?sslmode=verify-full&sslrootcert=\(otherCA)",
                    bucket: bucket),
                naming: "certificate was not accepted", "a certificate from another CA")
            XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/bad-cert"), "a refused init leaves nothing behind")
        }
        // Both usable: init succeeds and migrates the server's schema.
        let good = initStore("good", remote: servers.databaseURL(database), bucket: bucket)
        XCTAssertEqual(good.status, 0, "init with a usable server and bucket: \(good)")
        let tables = try servers.psql(
            servers.databaseURL(database),
            "SELECT count(*) FROM docfs_items WHERE parent_id IS NULL")
        XCTAssertEqual(tables.first?.first, "1", "the root row after init")
        // A password in the URL still works, with a warning naming the alternatives.
        let withPassword = initStore(
            "with-password", remote: servers.databaseURL(database).replacingOccurrences(of: "://docfs@", with: "://docfs:pw@"),
            bucket: bucket)
        XCTAssertEqual(withPassword.status, 0, "\(withPassword)")
        XCTAssert(withPassword.stderr.contains("warning: a password in --remote") && withPassword.stderr.contains("PGPASSWORD"), "\(withPassword)")
    }

    func testCredentialsFileIsRememberedByPathAndNoSecretIsStored() throws {
        // The credentials in a 0600 file named at init, nothing in the environment at mount.
        let credentials = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-s3-\(UUID().uuidString)").path
        try "aws_access_key_id = \(servers.accessKey)\naws_secret_access_key = \(servers.secretKey)\n"
            .write(toFile: credentials, atomically: true, encoding: .utf8)
        chmod(credentials, 0o600)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: credentials) }
        // (The test environment has no AWS_* variables of its own: servers.sh exports DOCFS_TEST_*.)
        let r = try makeRemote(extraInitArguments: ["--s3-credentials", credentials], initEnv: [:], mountEnv: [:])

        let bytes = testBytes(5000, seed: 8)
        XCTAssertErrno(r.fx.writeFile(r.fx.m("via-file.txt"), bytes), 0)
        try r.waitUntilUploaded(timeout: 60)
        try r.assertServerMatchesMount()
        XCTAssertEqual(filesHolding(servers.secretKey, under: r.fx.store), [], "files in the store holding the secret")
        XCTAssertFalse(r.fx.log.contains(servers.secretKey), "the log holds the secret")
    }

    /// Regular files under `root` whose bytes contain `secret`.
    func filesHolding(_ secret: String, under root: String) -> [String] {
        let paths = (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []
        return paths.filter { path in
            var st = Glibc.stat()
            guard Glibc.lstat(root + "/" + path, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
                let data = FileManager.default.contents(atPath: root + "/" + path)
            else { return false }
            return data.range(of: Data(secret.utf8)) != nil
        }
    }
}
