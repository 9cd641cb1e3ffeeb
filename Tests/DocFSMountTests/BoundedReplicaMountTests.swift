import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Every argument a replica sends is bounded and checked (schema 15, docs/REMOTE.md "Bounds and
/// quotas"), notifications are hints only, and nothing set-ID arrives from the wire: each bad
/// value is sent with one replica role's own credentials (psql as that role) and refused, while
/// another replica's files stay byte-exact and its writes keep landing.
final class BoundedReplicaMountTests: ReplicaTestCase {
    static let layout = """
        folders:
          - path: Pictures
            allowedContentTypes: [image/png]
        """

    /// Runs `sql` as `url`'s role: the server must refuse it with a message holding `words`
    /// (looked for in psql's message only, not in the statement the error repeats).
    func assertRefused(
        _ r: RemoteMount, url: String, _ what: String, _ sql: String, _ words: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let rows = try r.servers.psql(url, sql, timeout: 120)
            XCTFail("\(what): the server accepted it: \(rows.prefix(3))", file: file, line: line)
        } catch {
            let message = "\(error)".components(separatedBy: sql).last ?? "\(error)"
            XCTAssert(message.contains(words), "\(what): expected \"\(words)\", got \(message)", file: file, line: line)
        }
    }

    /// A file written on `writer` reaches `reader` byte-exact: the honest replicas' writes land.
    func assertWritesLand(
        _ r: RemoteMount, from writer: String, to reader: String, name: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let text = "\(name) \(UUID())"
        XCTAssertEqual(r.fx.sh("printf '\(text)' > '\(writer)/\(name)'").status, 0, file: file, line: line)
        eventually("\(name) reaches \(reader)", timeout: 90, { contents(reader + "/" + name) == text }, file: file, line: line)
    }

    func newKey(_ folder: String) -> String { "replica/\(folder)/" + UUID().uuidString.lowercased() }

    // MARK: the layout's MIME words

    func testTheLayoutsMIMEWordsAreTheOwnersAndChecked() throws {
        let layoutFile = NSTemporaryDirectory() + "docfs-layout-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml"
        try Self.layout.write(toFile: layoutFile, atomically: true, encoding: .utf8)
        defer { unlink(layoutFile) }
        let r = try makeRemote(extraInitArguments: ["--layout", layoutFile])
        let png = ContentTypeMountTests.png.map { String(format: "\\%03o", $0) }.joined()
        XCTAssertEqual(r.fx.sh("printf '\(png)' > mnt/Pictures/a.png && head -c 200000 /dev/urandom > mnt/keep.bin").status, 0)
        try r.waitUntilUploaded()
        let honest = try makeSecond(r, name: "honest")
        _ = try r.replicaArguments(role: "hostile")
        let hostile = r.roleURL(r.roleName("hostile"))
        let mimeNow = { try r.servers.psql(r.databaseURL, "SELECT value FROM docfs_meta WHERE key = 'layout_mime'").first?.first ?? nil }
        // The owner's init gave the server the words as its own table resolves them.
        let given = try mimeNow()
        XCTAssertEqual(given.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] }, ["image/png": "public.png"])

        // A replica role may not set them at all: neither a widening word nor broken JSON.
        assertRefused(
            r, url: hostile, "text let into the image folder", #"SELECT docfs_set_layout_mime('{"image/png": "public.plain-text"}')"#,
            "permission denied")
        assertRefused(r, url: hostile, "words that are not JSON", "SELECT docfs_set_layout_mime('not json')", "permission denied")
        // Nor the owner anything but a bounded object of the layout's MIME words, each a concrete type.
        for (what, json, words) in [
            ("not JSON", "not json", "are not JSON"),
            ("not an object", "[1, 2]", "a JSON object of at most"),
            ("a word every item conforms to", #"{"image/png": "public.data"}"#, "names no concrete content type"),
            ("a value that is no identifier", #"{"image/png": "x y"}"#, "names no concrete content type"),
            ("a word the layout does not name", #"{"text/plain": "public.plain-text"}"#, "is not a MIME type the layout names"),
            (
                "a huge object", "{" + (0..<2000).map { #""image/x\#($0)":"public.png""# }.joined(separator: ",") + "}",
                "a JSON object of at most"
            ),
        ] {
            assertRefused(r, url: r.databaseURL, what, "SELECT docfs_set_layout_mime('\(json)')", words)
        }
        XCTAssertEqual(try mimeNow(), given, "the words are as the owner gave them")

        // The server still refuses text in the image folder, from the hostile role's own call.
        let pictures = try XCTUnwrap(r.identifier(r.mnt + "/Pictures"))
        try assertOperationRefused(
            r, r.roleName("hostile"), "a text file into Pictures",
            #"{"op":"\#(UUID())","kind":"create","parent":\#(pictures),"name":"notes.txt","item_kind":"file","types":["public.plain-text","public.text","public.data"]}"#,
            "takes only public.png")
        // and every create into a typed folder still works for the honest ones.
        XCTAssertEqual(r.fx.sh("printf '\(png)' > '\(honest.mnt)/Pictures/b.png'").status, 0)
        eventually("B's PNG reaches A", timeout: 90) { r.fx.sh("cmp '\(honest.mnt)/Pictures/b.png' mnt/Pictures/b.png").status == 0 }
        assertWritesLand(r, from: honest.mnt, to: r.mnt, name: "from-b.txt")
        XCTAssertEqual(r.fx.sh("cmp mnt/keep.bin '\(honest.mnt)/keep.bin'").status, 0, "A's file reads byte-exact on B")
    }

    // MARK: calls, manifests and quotas

    func testCallsAndManifestsAreBoundedAndQuotasHold() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && head -c 300000 /dev/urandom > mnt/shared/big.bin").status, 0)
        try r.waitUntilUploaded()
        let honest = try makeSecond(r, name: "honest")
        _ = try r.replicaArguments(role: "hostile")
        let hostileRole = r.roleName("hostile")
        let hostile = r.roleURL(hostileRole)
        let shared = try XCTUnwrap(r.identifier(r.mnt + "/shared"))
        let before = try r.serverTree()

        // Calls: operations, tags and bytes per call (the list built by the server from a short statement).
        let ops = { (count: Int, extra: String) in
            """
            SELECT docfs_apply((SELECT jsonb_agg(jsonb_build_object('op', gen_random_uuid(), 'kind', 'create', 'parent', \(shared),
                'name', 'n' || i, 'item_kind', 'directory'\(extra))) FROM generate_series(1, \(count)) i))::text
            """
        }
        assertRefused(r, url: hostile, "1025 operations in one call", ops(1025, ""), "at most 1024 operations")
        assertRefused(
            r, url: hostile, "200 items of 200 tags each",
            ops(200, ", 'tags', (SELECT jsonb_agg('t' || j || '-' || i) FROM generate_series(1, 200) j)"),
            "at most 32768 tags")
        assertRefused(r, url: hostile, "20 MB of operations", ops(100, ", 'pad', repeat('x', 200000)"), "at most 16777216 bytes")
        try assertOperationRefused(
            r, hostileRole, "257 tags on one item",
            #"{"op":"\#(UUID())","kind":"create","parent":\#(shared),"name":"tagged","item_kind":"directory","tags":[\#((0...256).map { "\"t\($0)\"" }.joined(separator: ","))]}"#,
            "at most 256 words")
        assertRefused(r, url: hostile, "the unbounded call behind it", "SELECT docfs_apply_unbounded('[]')", "permission denied")
        assertRefused(
            r, url: hostile, "10001 intents in one call",
            "SELECT docfs_record_intents(ARRAY(SELECT 'replica/packs/' || gen_random_uuid() FROM generate_series(1, 10001)))",
            "at most 10000 intents")
        assertRefused(
            r, url: hostile, "4097 manifests in one call",
            """
            SELECT docfs_record_manifests((SELECT jsonb_agg(jsonb_build_object('key', 'replica/manifests/' || gen_random_uuid() || '-0123456789abcdef',
                'size', 0, 'hashes', '[]'::jsonb)) FROM generate_series(1, 4097)), '{}')
            """, "at most 4096 manifests")

        // Manifests: one block per 64 KiB of the size (plus 16), one hash at most 262144 times.
        let pack = newKey("packs/\(hostileRole)")
        _ = try r.servers.psql(hostile, "SELECT docfs_record_intents(ARRAY['\(pack)'])")
        let small = String(repeating: "c", count: 64), large = String(repeating: "d", count: 64)
        _ = try r.servers.psql(
            hostile,
            """
            SELECT docfs_record_pack('\(pack)', 65546, ARRAY['\(small)', '\(large)'], ARRAY[0::bigint, 10::bigint], ARRAY[10::bigint, 65536::bigint], 'v1')
            """)
        let manifest = { (hash: String, count: Int, length: Int) in
            """
            SELECT docfs_record_manifests(jsonb_build_array(jsonb_build_object('key', 'replica/manifests/' || gen_random_uuid() || '-0123456789abcdef',
                'size', \(count) * \(length)::bigint, 'hashes', (SELECT jsonb_agg('\(hash)'::text) FROM generate_series(1, \(count))))), '{}')
            """
        }
        assertRefused(r, url: hostile, "a 10-byte block listed 1000 times", manifest(small, 1000, 10), "more blocks than its size allows")
        assertRefused(r, url: hostile, "a block listed 262145 times", manifest(large, 262_145, 65536), "more than 262144 times")
        XCTAssertEqual(try r.servers.psql(hostile, manifest(small, 3, 10)).first?.first, "{}", "a manifest within the bounds is taken")

        // Quotas: the owner sets them, `docfs remote replicas` shows them, a call past one is refused.
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let set = r.fx.docfs(["remote", "quota", hostileRole, "--live-intents", "3", "--bytes-per-day", "100K"] + r.remoteArguments, env: env)
        XCTAssertEqual(set.status, 0, "\(set)")
        let held = try r.count("SELECT count(*) FROM docfs_upload_intents WHERE role = '\(hostileRole)'")
        let room = max(0, 3 - held)
        if room > 0 {
            _ = try r.servers.psql(
                hostile, "SELECT docfs_record_intents(ARRAY[\((0..<room).map { _ in "'\(newKey("packs/\(hostileRole)"))'" }.joined(separator: ","))])"
            )
        }
        assertRefused(
            r, url: hostile, "one intent past the quota", "SELECT docfs_record_intents(ARRAY['\(newKey("packs/\(hostileRole)"))'])",
            "over its quota of 3")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_upload_intents WHERE role = '\(hostileRole)'"), max(held, 3))
        _ = try r.servers.psql(r.databaseURL, "DELETE FROM docfs_upload_intents WHERE role = '\(hostileRole)'")
        let bigPack = newKey("packs/\(hostileRole)")
        _ = try r.servers.psql(hostile, "SELECT docfs_record_intents(ARRAY['\(bigPack)'])")
        assertRefused(
            r, url: hostile, "a pack past the bytes per day",
            """
            SELECT docfs_record_pack('\(bigPack)', 200000, ARRAY[repeat('e', 64)], ARRAY[0::bigint], ARRAY[1000::bigint])
            """, "over its quota of 102400")
        let list = r.fx.docfs(["remote", "replicas", "--json"] + r.remoteArguments, env: env)
        XCTAssertEqual(list.status, 0, "\(list)")
        let entries = (try? JSONSerialization.jsonObject(with: Data(list.stdout.utf8))) as? [[String: Any]] ?? []
        let quota = entries.first { $0["name"] as? String == hostileRole }?["quota"] as? [String: Any]
        XCTAssertEqual((quota?["liveIntents"] as? NSNumber)?.intValue, 3, list.stdout)
        XCTAssertEqual((quota?["bytesPerDay"] as? NSNumber)?.intValue, 102_400, list.stdout)
        XCTAssertEqual((quota?["bytesToday"] as? NSNumber)?.intValue, 65546, "the pack recorded earlier counts: \(list.stdout)")
        let honestQuota = entries.first { $0["name"] as? String == r.roleName("honest") }?["quota"] as? [String: Any]
        XCTAssertEqual(honestQuota?["own"] as? Bool, false, "the honest replica has the default's: \(list.stdout)")
        let table = r.fx.docfs(["remote", "replicas"] + r.remoteArguments, env: env)
        XCTAssertTrue(table.stdout.contains("default quotas"), table.stdout)

        // Nothing of that reached the tree; the honest replica's writes land, A's file reads byte-exact.
        XCTAssertEqual(Set(try r.serverTree().keys), Set(before.keys))
        assertWritesLand(r, from: honest.mnt, to: r.mnt, name: "shared/from-b.txt")
        assertWritesLand(r, from: r.mnt, to: honest.mnt, name: "shared/from-a.txt")
        XCTAssertEqual(r.fx.sh("cmp mnt/shared/big.bin '\(honest.mnt)/shared/big.bin'").status, 0)
    }

    // MARK: notifications

    func testForgedNotificationsChangeNothing() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        let honest = try makeSecond(r, name: "honest")
        try waitForQuiet(r, honest)
        _ = try r.replicaArguments(role: "hostile")
        let hostile = r.roleURL(r.roleName("hostile"))
        for payload in ["9223372036854775807", "-9223372036854775808", "not a number", "99999999999999999999999"] {
            _ = try r.servers.psql(hostile, "NOTIFY \(Self.channel), '\(payload)'")
        }
        // A change after the forged ones: once it is applied, the notifications were seen too.
        assertWritesLand(r, from: honest.mnt, to: r.mnt, name: "shared/after.txt")
        try waitForQuiet(r, honest)
        for mnt in [r.mnt, honest.mnt] {
            let fields = statusFields(r, mnt)
            XCTAssertEqual((fields?["incoming"] as? NSNumber)?.int64Value, 0, "\(mnt): \(fields ?? [:])")
        }
        let metrics = r.fx.docfs(["status", r.mnt, "--json"], timeout: 30)
        XCTAssertFalse(metrics.stdout.contains("922337203685477"), metrics.stdout)
        XCTAssertEqual(contents(honest.mnt + "/shared/a.txt"), "from A")
    }

    static let channel = "docfs_changes"

    // MARK: set-ID bits

    func testMountsAreNosuidAndSetIDBitsFromTheServerAreCleared() throws {
        let r = try makeRemote()
        XCTAssertTrue(mountOptions(r.mnt).contains("nosuid"), "a docfs mount is nosuid by default: \(mountOptions(r.mnt))")
        XCTAssertEqual(r.fx.sh("mkdir mnt/bin && printf 'from A' > mnt/bin/a.txt").status, 0)
        try r.waitUntilUploaded()
        let honest = try makeSecond(r, name: "honest")
        XCTAssertTrue(mountOptions(honest.mnt).contains("nosuid"), mountOptions(honest.mnt))
        let trusting = try makeSecond(r, name: "trusting", extra: ["-o", "suid"])
        XCTAssertFalse(mountOptions(trusting.mnt).contains("nosuid"), "-o suid asked for explicitly: \(mountOptions(trusting.mnt))")
        _ = try r.replicaArguments(role: "hostile")
        let binFolder = try XCTUnwrap(r.identifier(r.mnt + "/bin"))

        // A setuid-root program and a setgid folder, planted through the server by another replica.
        let plant = { (name: String, kind: String, mode: Int) in
            let sql = """
                SELECT docfs_apply('[{"op":"\(UUID())","kind":"create","parent":\(binFolder),"name":"\(name)","item_kind":"\(kind)","mode":\(mode),"uid":0,"gid":0}]'::jsonb)::text
                """
            let answer = try r.servers.psql(r.roleURL(r.roleName("hostile")), sql).first?.first ?? nil
            XCTAssert(answer?.contains("\"ok\": true") == true, "planted \(name): \(answer ?? "nil")")
        }
        try plant("rootshell", "file", 0o4755)
        try plant("shared-group", "directory", 0o2775)
        for mnt in [r.mnt, honest.mnt] {
            eventually("rootshell reaches \(mnt)", timeout: 90) { exists(mnt + "/bin/rootshell") }
            var st = stat()
            XCTAssertEqual(stat(mnt + "/bin/rootshell", &st), 0)
            XCTAssertEqual(st.st_mode & 0o7777, 0o755, "\(mnt): the set-ID bits were cleared on apply")
            eventually("shared-group reaches \(mnt)", timeout: 90) { exists(mnt + "/bin/shared-group") }
            XCTAssertEqual(stat(mnt + "/bin/shared-group", &st), 0)
            XCTAssertEqual(st.st_mode & 0o7777, 0o2775, "\(mnt): a folder keeps its set-group-ID bit (no privilege)")
        }
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["cleared the set-user-ID"]).isEmpty, "A's log says so: \(r.logTail())")
        // The replica whose owner allowed them (-o suid) keeps them.
        eventually("rootshell reaches the suid mount", timeout: 90) { exists(trusting.mnt + "/bin/rootshell") }
        var st = stat()
        XCTAssertEqual(stat(trusting.mnt + "/bin/rootshell", &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o4755, "kept on a mount with -o suid")

        // mount.fuse3's own `dev,suid` (an fstab line without the docfs helper) does not count.
        XCTAssertEqual(r.fx.docfs(["unmount", honest.mnt], timeout: 60).status, 0)
        let helperForm = r.fx.docfs([honest.store, honest.mnt, "-o", "rw,dev,suid"], env: r.awsEnvironment(secret: r.servers.secretKey))
        XCTAssertEqual(helperForm.status, 0, "\(helperForm)")
        XCTAssertTrue(mountOptions(honest.mnt).contains("nosuid"), "mount.fuse3's implicit suid: \(mountOptions(honest.mnt))")
        assertWritesLand(r, from: honest.mnt, to: r.mnt, name: "bin/after.txt")
        XCTAssertEqual(contents(honest.mnt + "/bin/a.txt"), "from A")
    }

    /// The options /proc/self/mounts shows for the mount at `mnt` ("" when not mounted).
    func mountOptions(_ mnt: String) -> String {
        let text = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count > 3, Mounts.unescape(String(fields[1])) == mnt { return String(fields[3]) }
        }
        return ""
    }

    /// A mounted replica past its bytes-per-day quota keeps its file here, says so in its status
    /// (the server's words, naming the quota), and sends it once the owner raises the quota.
    func testAReplicaPastItsQuotaSaysSoAndSendsOnceRaised() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let role = r.roleName("second")
        let set = r.fx.docfs(["remote", "quota", role, "--bytes-per-day", "100K"] + r.remoteArguments, env: env)
        XCTAssertEqual(set.status, 0, "\(set)")
        XCTAssertEqual(r.fx.sh("head -c 300000 /dev/urandom > big.bin && cp big.bin '\(b.mnt)/big.bin'").status, 0)
        var last: [String: Any]?
        let deadline = Date().addingTimeInterval(90)
        repeat {
            last = statusFields(r, b.mnt)
            if (last?["lastError"] as? String)?.contains("over its quota of 102400") == true { break }
            usleep(200_000) // the poll interval, within the deadline
        } while Date() < deadline
        XCTAssert(
            (last?["lastError"] as? String)?.contains("over its quota of 102400") == true,
            "the second replica's status names the quota: \(last ?? [:])\n\((try? String(contentsOfFile: b.store + "/docfs.log", encoding: .utf8))?.suffix(3000) ?? "")"
        )
        XCTAssertGreaterThan((last?["pending"] as? NSNumber)?.intValue ?? 0, 0, "kept here, waiting: \(last ?? [:])")
        XCTAssertEqual(r.fx.sh("cmp big.bin '\(b.mnt)/big.bin'").status, 0, "readable here meanwhile")
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.mnt + "/big.bin"), "nothing past the quota reached the server")

        let raise = r.fx.docfs(["remote", "quota", role, "--bytes-per-day", "100M"] + r.remoteArguments, env: env)
        XCTAssertEqual(raise.status, 0, "\(raise)")
        eventually(
            "big.bin reaches the first replica once the quota is raised", timeout: 180,
            {
                r.fx.sh("cmp big.bin mnt/big.bin").status == 0
            })
    }
}
