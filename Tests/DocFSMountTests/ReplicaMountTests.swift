import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Two replicas of one tree, each a mounted store of its own: what one does appears on the other,
/// concurrent changes keep both sides (conflict rules as README's *Remote* gives them), and a
/// replica that was away catches up. Against the loopback servers of Tests/remote/servers.sh.
class ReplicaTestCase: RemoteMountTestCase {
    /// A second store of the same remote, mounted (`docfs mount` daemonizes; unmounted at teardown).
    struct Second {
        var store: String
        var mnt: String
    }

    func makeSecond(_ r: RemoteMount, env: [String: String] = [:], name: String = "second", extra: [String] = []) throws -> Second {
        let second = Second(store: r.fx.dir + "/" + name, mnt: r.fx.dir + (name == "second" ? "/mnt2" : "/mnt-" + name))
        XCTAssertEqual(mkdir(second.mnt, 0o755), 0)
        // `env` over the owner's S3 keys (a replica's own keys replace them).
        let environment = r.awsEnvironment(secret: r.servers.secretKey).merging(env) { _, given in given }
        // Each replica logs in as a role of its own (`docfs remote add-replica`).
        let initResult = r.fx.docfs(["init", second.store] + (try r.replicaArguments(role: name)), env: environment)
        guard initResult.status == 0 else { throw FixtureError("init of the second replica: \(initResult)") }
        try mountSecond(r, second, env: env, extra: extra)
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", second.mnt], timeout: 30)
            MountFixture.lazyUnmount(second.mnt)
        }
        return second
    }

    func mountSecond(_ r: RemoteMount, _ second: Second, env: [String: String] = [:], extra: [String] = []) throws {
        let environment = r.awsEnvironment(secret: r.servers.secretKey).merging(env) { _, given in given }
        let mount = r.fx.docfs(["mount", second.store, second.mnt] + extra, env: environment)
        guard mount.status == 0 else { throw FixtureError("mount of the second replica: \(mount)") }
    }

    /// The status JSON of a mount, as a dictionary.
    func statusFields(_ r: RemoteMount, _ mnt: String) -> [String: Any]? {
        let s = r.fx.docfs(["status", mnt, "--json"], timeout: 30)
        guard s.status == 0 else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(s.stdout.utf8))) as? [String: Any]
    }

    /// Every replica has nothing to send and nothing to apply, and all have applied the change
    /// log to the same position, three polls in a row half a second apart. (`incoming` counts
    /// only what a replica has heard of: one whose LISTEN is not back after PostgreSQL's restart
    /// reads 0 while it lags; its anchor shows it.)
    func waitForQuiet(_ r: RemoteMount, _ second: Second, others: [Second] = [], timeout: Double = 180) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var quietInARow = 0
        var last = ""
        while Date() < deadline {
            let a = statusFields(r, r.mnt), b = statusFields(r, second.mnt)
            let rest = others.map { statusFields(r, $0.mnt) }
            let all = [a, b] + rest
            let anchors = Set(all.map { ($0?["anchor"] as? NSNumber)?.int64Value })
            let quiet =
                anchors.count == 1 && !anchors.contains(nil)
                && all.allSatisfy { f in
                    (f?["pending"] as? NSNumber)?.intValue == 0 && (f?["incoming"] as? NSNumber)?.intValue == 0
                }
            last = "A: \(a ?? [:])\nB: \(b ?? [:])" + zip(others, rest).map { "\n\($0.0.store): \($0.1 ?? [:])" }.joined()
            quietInARow = quiet ? quietInARow + 1 : 0
            if quietInARow >= 3 { return }
            usleep(500_000)
        }
        throw FixtureError("the replicas did not settle in \(Int(timeout)) s:\n\(last)\nlog A (end):\n\(r.logTail())")
    }

    /// Polls until `condition` holds (every 0.1 s); fails with `what` after the timeout.
    func eventually(_ what: String, timeout: Double = 30, _ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return }
            usleep(100_000)
        }
        XCTFail("not within \(Int(timeout)) s: \(what)", file: file, line: line)
    }

    func contents(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }
    func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
    func names(_ folder: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted() }

    func assertSameTrees(_ r: RemoteMount, _ second: Second, file: StaticString = #filePath, line: UInt = #line) {
        let diff = r.fx.sh("diff -r --no-dereference mnt '\(second.mnt)'")
        XCTAssertEqual(diff.status, 0, "the replicas differ: \(diff)", file: file, line: line)
        let modes = r.fx.sh(
            "cd mnt && find . -printf '%p %m\\n' | sort > ../modes-a; cd '\(second.mnt)' && find . -printf '%p %m\\n' | sort > '\(r.fx.dir)/modes-b'; cmp '\(r.fx.dir)/modes-a' '\(r.fx.dir)/modes-b'"
        )
        XCTAssertEqual(modes.status, 0, "the replicas' modes differ: \(modes)", file: file, line: line)
    }

}

final class ReplicaMountTests: ReplicaTestCase {
    // MARK: changes from elsewhere

    func testChangesOnEitherReplicaAppearOnTheOther() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        let a = r.mnt

        // A → B: a folder, a file, new contents.
        XCTAssertEqual(r.fx.sh("mkdir mnt/docs && printf 'first' > mnt/docs/note.txt").status, 0)
        eventually("B shows A's new file") { contents(b.mnt + "/docs/note.txt") == "first" }
        XCTAssertEqual(r.fx.sh("printf 'second version' > mnt/docs/note.txt").status, 0)
        eventually("B reads A's new contents") { contents(b.mnt + "/docs/note.txt") == "second version" }

        // B → A: rename, move, chmod, tags, delete.
        XCTAssertEqual(r.fx.sh("mkdir '\(b.mnt)/archive' && mv '\(b.mnt)/docs/note.txt' '\(b.mnt)/docs/renamed.txt'").status, 0)
        eventually("A shows B's rename") { exists(a + "/docs/renamed.txt") && !exists(a + "/docs/note.txt") }
        XCTAssertEqual(r.fx.sh("mv '\(b.mnt)/docs/renamed.txt' '\(b.mnt)/archive/' && chmod 600 '\(b.mnt)/archive/renamed.txt'").status, 0)
        eventually("A shows B's move and chmod") {
            var st = stat()
            return stat(a + "/archive/renamed.txt", &st) == 0 && st.st_mode & 0o777 == 0o600 && !exists(a + "/docs/renamed.txt")
        }
        XCTAssertEqual(r.fx.sh("setfattr -n user.docfs.tags -v 'red,blue' '\(b.mnt)/archive/renamed.txt'").status, 0)
        eventually("A shows B's tags") { r.xattr(a + "/archive/renamed.txt", "user.docfs.tags") == "red,blue" }
        XCTAssertEqual(r.fx.sh("printf y > '\(b.mnt)/docs/delete-me'").status, 0)
        eventually("A shows B's file") { exists(a + "/docs/delete-me") }
        XCTAssertEqual(unlink(b.mnt + "/docs/delete-me"), 0)
        eventually("A shows B's delete") { !exists(a + "/docs/delete-me") }
        XCTAssertEqual(rmdir(a + "/docs"), 0)
        eventually("B shows A's rmdir") { !exists(b.mnt + "/docs") }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
    }

    // MARK: conflicts

    /// Both replicas change things while the server is away; when it is back, the first to send
    /// wins where only one can, and nothing either did is lost.
    func testConcurrentChangesFollowTheConflictRules() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(
            r.fx.sh(
                """
                mkdir mnt/f mnt/x mnt/y && printf base > mnt/f/edit.txt && printf base > mnt/f/gone.txt && \
                printf base > mnt/f/ren.txt
                """
            ).status, 0)
        eventually("B has the base tree") { contents(b.mnt + "/f/ren.txt") == "base" && exists(b.mnt + "/y") }
        try waitForQuiet(r, b)

        try r.servers.stopPostgres()
        // On A: edits, renames, a new file, a folder moved into another.
        XCTAssertEqual(
            r.fx.sh(
                """
                printf 'from A' > mnt/f/edit.txt && printf 'edit A' > mnt/f/gone.txt && mv mnt/f/ren.txt mnt/f/renA.txt && \
                printf 'same A' > mnt/f/same.txt && mv mnt/x mnt/y/
                """
            ).status, 0)
        // On B: the same file edited, the edited one deleted, the same file renamed otherwise,
        // the same new name, and the other folder moved the other way round (a cycle).
        XCTAssertEqual(
            r.fx.sh(
                """
                printf 'from B' > '\(b.mnt)/f/edit.txt' && rm '\(b.mnt)/f/gone.txt' && mv '\(b.mnt)/f/ren.txt' '\(b.mnt)/f/renB.txt' && \
                printf 'same B' > '\(b.mnt)/f/same.txt' && mv '\(b.mnt)/y' '\(b.mnt)/x/'
                """
            ).status, 0)
        try r.servers.startPostgres()
        try waitForQuiet(r, b)
        assertSameTrees(r, b)

        let files = names(r.mnt + "/f")
        // Concurrent edits: both versions, one under the name, the other as a conflicted copy.
        let copies = files.filter { $0.hasPrefix("edit (conflicted copy from ") && $0.hasSuffix(").txt") }
        XCTAssertEqual(copies.count, 1, "one conflicted copy of edit.txt: \(files)")
        let versions = Set([contents(r.mnt + "/f/edit.txt"), copies.first.flatMap { contents(r.mnt + "/f/" + $0) }])
        XCTAssertEqual(versions, ["from A", "from B"], "both edits are kept")
        if let copy = copies.first {
            XCTAssertNotNil(
                r.xattr(r.mnt + "/f/" + copy, "user.docfs.conflict") ?? r.xattr(b.mnt + "/f/" + copy, "user.docfs.conflict"),
                "the copy is marked on the replica that made it")
        }
        // Edit against delete keeps the edit.
        XCTAssertEqual(contents(r.mnt + "/f/gone.txt"), "edit A")
        // Two renames: exactly one of them, on both replicas.
        XCTAssertEqual(files.filter { $0.hasPrefix("ren") }.count, 1, "one name wins: \(files)")
        XCTAssertFalse(files.contains("ren.txt"))
        // Same-name creates: both, one with a suffix.
        XCTAssertEqual(Set([contents(r.mnt + "/f/same.txt"), contents(r.mnt + "/f/same 2.txt")]), ["same A", "same B"], "\(files)")
        // The cycle: one folder inside the other, never both.
        let top = names(r.mnt)
        XCTAssert(
            (exists(r.mnt + "/y/x") && !top.contains("x")) || (exists(r.mnt + "/x/y") && !top.contains("y")),
            "one of the two moves, not a cycle: \(top)")
        let status = statusFields(r, r.mnt).flatMap { $0["conflicts"] as? Int } ?? 0
        let statusB = statusFields(r, b.mnt).flatMap { $0["conflicts"] as? Int } ?? 0
        XCTAssertGreaterThan(status + statusB, 0, "docfs status counts the conflicts")
    }

    // MARK: a replica away

    func testAReplicaThatWasAwayCatchesUp() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/keep && printf one > mnt/keep/a.txt && printf two > mnt/keep/b.txt").status, 0)
        eventually("B has the tree") { contents(b.mnt + "/keep/b.txt") == "two" }
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        XCTAssertEqual(
            r.fx.sh("printf changed > mnt/keep/a.txt && rm mnt/keep/b.txt && mkdir mnt/new && printf n > mnt/new/c.txt && mv mnt/keep mnt/kept")
                .status, 0)
        try r.waitUntilUploaded()
        try mountSecond(r, b)
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(contents(b.mnt + "/kept/a.txt"), "changed")
    }

    func testKillingAReplicaMidSyncLosesNothing() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        _ = try makeSourceTree(r.fx.src + "/t", folders: 3, subfolders: 2, filesPerFolder: 10)
        XCTAssertEqual(r.fx.sh("cp -r src/t mnt/ && printf b-side > '\(b.mnt)/b.txt'").status, 0)
        usleep(700_000)
        r.fx.kill9()
        try r.fx.mount()
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        let diff = r.fx.sh("diff -r src/t '\(b.mnt)/t'")
        XCTAssertEqual(diff.status, 0, "B has all of A's copy: \(diff)")
        XCTAssertEqual(contents(r.mnt + "/b.txt"), "b-side")
    }
}

/// `docfs remote gc`: the objects of replaced and deleted versions and left-over uploads go, what
/// any replica still needs stays (a replica away while the log was trimmed rebuilds from it).
final class RemoteGCTests: ReplicaTestCase {
    func gc(_ r: RemoteMount, _ arguments: [String]) throws -> [String: Any] {
        try r.gc(["--keep-versions", "0"] + arguments)
    }

    func number(_ report: [String: Any], _ key: String) -> Int { (report[key] as? NSNumber)?.intValue ?? -1 }

    func testGarbageCollectionRemovesWhatNoReplicaNeeds() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(
            r.fx.sh("mkdir mnt/d && printf one > mnt/d/edited.txt && printf keep > mnt/d/kept.txt && printf bye > mnt/d/gone.txt").status, 0)
        eventually("B has the tree") { contents(b.mnt + "/d/gone.txt") == "bye" }
        try waitForQuiet(r, b)
        // B is away while A replaces one version and deletes a file.
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        XCTAssertEqual(r.fx.sh("printf two > mnt/d/edited.txt && rm mnt/d/gone.txt && printf new > mnt/d/new.txt").status, 0)
        try r.waitUntilUploaded()
        // An upload whose change never reached the server, and an object outside the tree's folder.
        let leftover = "\(r.prefix)/objects/left-over-upload"
        _ = try r.servers.s3check(["put", r.bucket, leftover, "partial"])
        _ = try r.servers.s3check(["put", r.bucket, "elsewhere/not-ours", "x"])
        // A multipart upload a replica started and never finished (and one outside the tree's folder).
        _ = try r.servers.s3check(["start-upload", r.bucket, "\(r.prefix)/objects/abandoned"])
        _ = try r.servers.s3check(["start-upload", r.bucket, "elsewhere/upload"])
        let before = Set(try r.objects().map(\.key))
        // Objects of versions that are not the current one of a live file (a new file's create
        // and content version sent together name one object, which stays while it is current).
        let garbage = try r.count(
            """
            SELECT count(DISTINCT v.content_key) FROM docfs_versions v JOIN docfs_items i ON i.id = v.item_id
            WHERE v.content_key IS NOT NULL AND (i.deleted OR v.content_version < i.content_version)
              AND NOT EXISTS (SELECT 1 FROM docfs_items l WHERE l.content_key = v.content_key AND NOT l.deleted)
            """)
        XCTAssertGreaterThanOrEqual(garbage, 2, "edited.txt's first version and gone.txt at least")

        // Within the grace period nothing goes.
        let dry = try gc(r, ["--grace", "1h"])
        XCTAssertEqual(number(dry, "versions"), 0, "\(dry)")
        XCTAssertEqual(number(dry, "leftovers"), 0, "\(dry)")
        XCTAssertEqual(number(dry, "abandonedUploads"), 0, "\(dry)")
        XCTAssertGreaterThanOrEqual(number(dry, "recentKept"), 1, "the left-over upload is recent: \(dry)")
        XCTAssertEqual(Set(try r.objects().map(\.key)), before, "gc within the grace period removed objects")

        // Past it (grace 0), with the whole change log trimmed: the replaced and the deleted
        // versions and the left-over go; every live item's object and the foreign object stay.
        let report = try gc(r, ["--grace", "0", "--keep-log", "0"])
        XCTAssertEqual(number(report, "versions"), garbage, "\(report)")
        XCTAssertEqual(number(report, "leftovers"), 1, "\(report)")
        XCTAssertEqual(number(report, "abandonedUploads"), 1, "\(report)")
        let uploads = "\(try r.servers.s3check(["uploads", r.bucket]))"
        XCTAssertFalse(uploads.contains("objects/abandoned"), "the abandoned upload is aborted: \(uploads)")
        XCTAssertTrue(uploads.contains("elsewhere/upload"), "an upload outside the tree's folder stays: \(uploads)")
        XCTAssertGreaterThan(number(report, "logEntries"), 0, "\(report)")
        XCTAssertGreaterThan(number(report, "operations"), 0, "applied operation ids trimmed: \(report)")
        let live = Set(try r.serverTree().values.compactMap(\.contentKey))
        XCTAssertEqual(live.count, 3, "edited, kept, new")
        // Their blocks stay (a pack mostly dead rewritten into a new one), the others went.
        let manifests = try r.manifests()
        XCTAssertEqual(Set(manifests.keys), live, "the manifests of collected versions went")
        let livePacks = Set(live.flatMap { manifests[$0]!.compactMap { $0.first as? String } })
        XCTAssertEqual(Set(try r.objects().map(\.key)), livePacks.union(["elsewhere/not-ours"]), "what is left in the bucket")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_blocks"), 3, "one block per live file")
        XCTAssertEqual(try r.count("SELECT count(DISTINCT content_key) FROM docfs_versions WHERE collected_ns IS NOT NULL"), garbage)
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_changes"), 1, "the log keeps its newest entry only")

        // A second gc finds nothing; the mount still reads everything; B, whose anchor is now
        // older than the log, rebuilds from a full listing and downloads what it needs.
        let again = try gc(r, ["--grace", "0"])
        XCTAssertEqual([number(again, "versions"), number(again, "leftovers")], [0, 0], "\(again)")
        XCTAssertEqual(contents(r.mnt + "/d/edited.txt"), "two")
        // The tables that only grow are trimmed too: the rows of the versions collected above,
        // and gone.txt's tombstone once nothing names it (the operation ids went above).
        let collectedRows = try r.count("SELECT count(*) FROM docfs_versions WHERE collected_ns IS NOT NULL")
        let trimmed = try gc(r, ["--grace", "0", "--keep-log", "0"])
        XCTAssertEqual(number(trimmed, "versionRows"), collectedRows, "\(trimmed)")
        XCTAssertGreaterThanOrEqual(number(trimmed, "tombstones"), 1, "\(trimmed)")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE deleted AND name = 'gone.txt'"), 0, "gone.txt's tombstone")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_operations"), 0)
        try mountSecond(r, b)
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(contents(b.mnt + "/d/edited.txt"), "two")
        XCTAssertFalse(exists(b.mnt + "/d/gone.txt"))

        // After a trim, changes still flow both ways.
        XCTAssertEqual(r.fx.sh("printf later > '\(b.mnt)/d/later.txt'").status, 0)
        eventually("A shows B's file after the trim") { contents(r.mnt + "/d/later.txt") == "later" }
        let refused = r.fx.docfs(["remote", "gc", r.fx.dir + "/no-store"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("no-store"), "\(refused)")
    }
}

extension ReplicaTestCase {
    /// `docfs_apply` of one operation as `role`: the answer must be a refusal holding `words`.
    func assertOperationRefused(
        _ r: RemoteMount, _ role: String, _ what: String, _ operation: String, _ words: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let sql = "SELECT docfs_apply('[\(operation.replacingOccurrences(of: "'", with: "''"))]'::jsonb)::text"
        let answer = try r.servers.psql(r.roleURL(role), sql).first?.first ?? nil
        let text = answer ?? "no answer"
        XCTAssert(
            text.contains("\"ok\": false") && text.contains(words), "\(what): expected a refusal with \"\(words)\", got \(text)",
            file: file, line: line)
    }
}
