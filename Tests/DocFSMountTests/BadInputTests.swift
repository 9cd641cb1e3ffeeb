import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Names at and past the limits, bytes that are not UTF-8, `.`/`..`, newlines, Unicode
/// normalization, a full disk under the store, and stores and mountpoints that cannot be used.
final class BadInputTests: MountTestCase {

    /// Runs a python3 script in the fixture directory; its stdout lines are the result.
    func py(_ script: String, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        let r = fx.sh("python3 -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'")
        XCTAssertEqual(r.status, 0, "python: \(r)", file: file, line: line)
        return r.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    /// errno names of a set of calls, on the mount and on a plain directory beside it.
    static let errnoProbe = """
        import os, sys, errno
        def probe(base, ops):
            out = []
            for name, call in ops:
                try:
                    call(base); out.append(name + "=OK")
                except OSError as e:
                    out.append(name + "=" + errno.errorcode[e.errno])
            return " ".join(out)
        """

    // MARK: name length

    func testNameLengthLimitForEveryWayToMakeAName() {
        let lines = py(
            Self.errnoProbe + """

                def touch(p):
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
                ok, long = "n" * 255, "n" * 256
                euro_ok, euro_long = "\\u20ac" * 85, "\\u20ac" * 85 + "x"   # 255 and 256 bytes of UTF-8
                ops = [
                    ("create255", lambda b: touch(b + "/" + ok)),
                    ("create256", lambda b: touch(b + "/" + long)),
                    ("createEuro255", lambda b: touch(b + "/" + euro_ok)),
                    ("createEuro256", lambda b: touch(b + "/" + euro_long)),
                    ("mkdir256", lambda b: os.mkdir(b + "/" + long)),
                    ("symlink256", lambda b: os.symlink("t", b + "/" + long)),
                    ("rename256", lambda b: os.rename(b + "/" + ok, b + "/" + long)),
                    ("mkdir255", lambda b: os.mkdir(b + "/d" + "n" * 254)),
                    ("rename255", lambda b: os.rename(b + "/d" + "n" * 254, b + "/e" + "n" * 254)),
                ]
                os.makedirs("plain", exist_ok=True)
                print(probe("mnt", ops))
                print(probe("plain", ops))
                print(sorted(os.listdir("mnt")) == sorted(os.listdir("plain")))
                """)
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(
            lines.first,
            "create255=OK create256=ENAMETOOLONG createEuro255=OK createEuro256=ENAMETOOLONG mkdir256=ENAMETOOLONG symlink256=ENAMETOOLONG rename256=ENAMETOOLONG mkdir255=OK rename255=OK"
        )
        XCTAssertEqual(lines.first, lines.dropFirst().first, "the same answers as a local filesystem")
        XCTAssertEqual(lines.last, "True", "the same names as a local filesystem")
    }

    // MARK: non-UTF-8

    func testNonUTF8IsRefusedWithEILSEQEverywhereAndNothingIsMangled() {
        XCTAssertErrno(fx.writeFile(fx.m("ok.txt"), [1]), 0)
        XCTAssertErrno(fx.mkdirErrno(fx.m("dir")), 0)
        let lines = py(
            Self.errnoProbe + """

                bad = b"bad\\xff\\xfe.txt"
                def touch(p):
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
                ops = [
                    ("create", lambda b: touch(b + b"/" + bad)),
                    ("mkdir", lambda b: os.mkdir(b + b"/" + bad)),
                    ("mknod", lambda b: os.mknod(b + b"/" + bad, 0o644 | 0o100000)),
                    ("symlinkName", lambda b: os.symlink(b"target", b + b"/" + bad)),
                    ("symlinkTarget", lambda b: os.symlink(bad, b + b"/link")),
                    ("renameFile", lambda b: os.rename(b + b"/ok.txt", b + b"/" + bad)),
                    ("renameDir", lambda b: os.rename(b + b"/dir", b + b"/dir/../" + bad)),
                    ("lookup", lambda b: os.stat(b + b"/" + bad)),
                ]
                print(probe(b"mnt", ops))
                print(sorted(os.listdir(b"mnt")))
                """)
        XCTAssertEqual(
            lines.first,
            "create=EILSEQ mkdir=EILSEQ mknod=EILSEQ symlinkName=EILSEQ symlinkTarget=EILSEQ renameFile=EILSEQ renameDir=EILSEQ lookup=EILSEQ")
        XCTAssertEqual(lines.last, "[b'dir', b'ok.txt']", "nothing was created or renamed")
        XCTAssertFalse(fx.logLines { $0.contains("refused") && $0.contains("EILSEQ") }.isEmpty, "refusals are logged")
    }

    // MARK: . and ..

    func testDotAndDotDotBehaveAsOnALocalFilesystem() {
        let lines = py(
            Self.errnoProbe + """

                def setup(b):
                    os.mkdir(b + "/d"); os.mkdir(b + "/d/e")
                    with open(b + "/d/f", "w") as f: f.write("f")
                def touch(p):
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT, 0o644))
                ops = [
                    ("setup", setup),
                    ("mkdirDot", lambda b: os.mkdir(b + "/d/.")),
                    ("mkdirDotDot", lambda b: os.mkdir(b + "/d/..")),
                    ("rmdirDot", lambda b: os.rmdir(b + "/d/.")),
                    ("rmdirDotDot", lambda b: os.rmdir(b + "/d/e/..")),
                    ("unlinkDot", lambda b: os.unlink(b + "/d/.")),
                    ("renameDot", lambda b: os.rename(b + "/d/.", b + "/x")),
                    ("renameToDotDot", lambda b: os.rename(b + "/d/f", b + "/d/e/..")),
                    ("createViaDotDot", lambda b: touch(b + "/d/e/../g")),
                    ("readViaDots", lambda b: open(b + "/d/./e/../f").read()),
                ]
                os.makedirs("plain", exist_ok=True)
                print(probe("mnt", ops))
                print(probe("plain", ops))
                print(sorted(os.listdir("mnt/d")), sorted(os.listdir("plain/d")))
                """)
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(lines.first, lines.dropFirst().first, "the same answers as a local filesystem")
        XCTAssertEqual(lines.last, "['e', 'f', 'g'] ['e', 'f', 'g']")
    }

    // MARK: newlines and Unicode normalization

    /// Names are bytes: a newline is kept, and NFC `café` and NFD `café` are two different
    /// names (as on ext4), each with its own contents, also after a remount.
    func testNewlinesAndNormalizationFormsRoundTrip() throws {
        let script = """
            import os, unicodedata
            nfc = unicodedata.normalize("NFC", "caf\\u00e9").encode()
            nfd = unicodedata.normalize("NFD", "caf\\u00e9").encode()
            assert nfc != nfd
            names = [nfc, nfd, b"line1\\nline2", b"\\ntrailing\\n", b" spaced  ", b"tab\\there", b"-dash", b"\\\\back"]
            if os.environ.get("WRITE") == "1":
                for i, n in enumerate(names):
                    with open(b"mnt/" + n, "wb") as f: f.write(b"#%d" % i)
                os.mkdir(b"mnt/dir\\nname")
                os.rename(b"mnt/-dash", b"mnt/dir\\nname/new\\nline")
            got = sorted(os.listdir(b"mnt"))
            print(len(got), len(set(got)))
            for i, n in enumerate(names):
                p = b"mnt/" + n if n != b"-dash" else b"mnt/dir\\nname/new\\nline"
                print(open(p, "rb").read().decode())
            """
        let write = fx.sh("WRITE=1 python3 -c '\(script)'")
        XCTAssertEqual(write.status, 0, "\(write)")
        let expected = "8 8\n" + (0..<8).map { "#\($0)\n" }.joined()
        XCTAssertEqual(write.stdout, expected)
        try fx.remount()
        let again = fx.sh("python3 -c '\(script)'")
        XCTAssertEqual(again.stdout, expected, "after a remount: \(again)")
        let ls = fx.sh("ls mnt | od -c | head -3")
        XCTAssertEqual(ls.status, 0)
    }

    // MARK: a full disk under the store

    func testFullDiskGivesENOSPCAndLeavesTheStoreConsistent() throws {
        fx.stopDaemon()
        // The store on an 8 MiB tmpfs (root only; skipped otherwise).
        let orig = fx.dir + "/store.orig"
        try FileManager.default.moveItem(atPath: fx.store, toPath: orig)
        try FileManager.default.createDirectory(atPath: fx.store, withIntermediateDirectories: false)
        let tmpfs = fx.sh("mount -t tmpfs -o size=8m docfs-test-tmpfs store")
        guard tmpfs.status == 0 else { throw XCTSkip("cannot mount a tmpfs here: \(tmpfs)") }
        defer {
            fx.stopDaemon()
            _ = fx.sh("umount store || umount -l store")
        }
        XCTAssertEqual(fx.sh("cp -a store.orig/. store/").status, 0)
        try fx.mount()

        // Write 1 MiB files until the disk is full; each line: name, bytes acknowledged by
        // write(), and the errno of the first failing write or close (OK when close returned 0).
        let fill = fx.sh(
            """
            python3 -c '
            import os, errno
            for i in range(20):
                name = "mnt/f%02d" % i
                data = bytes([65 + i]) * (1 << 20)
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                done, err = 0, "OK"
                try:
                    while done < len(data):
                        done += os.write(fd, data[done:done + 65536])
                except OSError as e:
                    err = errno.errorcode[e.errno]
                try:
                    os.close(fd)
                except OSError as e:
                    err = err if err != "OK" else "close:" + errno.errorcode[e.errno]
                print(name, done, err)
                if err != "OK":
                    break
            '
            """)
        XCTAssertEqual(fill.status, 0, "\(fill)")
        let rows = fill.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        XCTAssertGreaterThan(rows.count, 1, "\(fill)")
        guard let last = rows.last, last.count == 3 else { return XCTFail("\(fill)") }
        XCTAssertTrue(last[2] == "ENOSPC" || last[2] == "close:ENOSPC", "the writer gets ENOSPC at write or close: \(fill)\nlog:\n\(fx.log)")
        // Every file whose close returned 0 is complete; the one that hit ENOSPC is absent or
        // holds exactly the bytes write() acknowledged (as on a local filesystem).
        for row in rows {
            let name = String(row[0].dropFirst(4)), acknowledged = Int(row[1])!
            let index = Int(name.dropFirst())!
            let got = fx.readFile(fx.m(name))
            if row[2] == "OK" {
                XCTAssertBytes(got, [UInt8](repeating: UInt8(65 + index), count: 1 << 20), name)
            } else if got.errno == 0 {
                XCTAssertEqual(got.bytes?.count ?? -1, acknowledged, "\(name): only acknowledged bytes")
                XCTAssertTrue(got.bytes?.allSatisfy { $0 == UInt8(65 + index) } ?? false, name)
            } else {
                XCTAssertErrno(got.errno, ENOENT, name)
            }
        }
        // Space comes back after a delete, and the mount goes on working.
        XCTAssertEqual(fx.sh("rm mnt/f00 mnt/f01").status, 0)
        XCTAssertErrno(fx.writeFile(fx.m("after"), Array("fine".utf8)), 0)
        XCTAssertBytes(fx.readFile(fx.m("after")), Array("fine".utf8))
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "the store is consistent after ENOSPC: \(check)")
    }

    // MARK: stores and mountpoints that cannot be used

    /// sha256 of every file under the store, to prove a refused mount changed nothing.
    func storeDigest() -> String {
        fx.sh("cd store && find . -type f ! -name docfs.log -print0 | sort -z | xargs -0 sha256sum").stdout
    }

    func testUnusableStoresGetAClearMessageAndNoDamage() throws {
        let other = fx.dir + "/mnt2"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        // Locked by the fixture's mount.
        let locked = fx.docfs(["mount", fx.store, other, "-f"], timeout: 20)
        XCTAssertNotEqual(locked.status, 0, "\(locked)")
        XCTAssert(locked.stderr.contains("already mounted"), "\(locked)")
        XCTAssertFalse(Mounts.isMounted(other))
        let checkWhileMounted = fx.docfs(["check", fx.store])
        XCTAssertNotEqual(checkWhileMounted.status, 0)
        XCTAssert(checkWhileMounted.stderr.contains("is mounted"), "\(checkWhileMounted)")
        XCTAssertErrno(fx.writeFile(fx.m("kept.txt"), Array("kept".utf8)), 0)
        XCTAssertTrue(fx.stopDaemon())

        // Missing.
        let missing = fx.docfs(["mount", fx.dir + "/no-such-store", other, "-f"], timeout: 20)
        XCTAssertNotEqual(missing.status, 0)
        XCTAssert(missing.stderr.contains("does not exist"), "\(missing)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: fx.dir + "/no-such-store"), "nothing is created")

        // Corrupt: store.sqlite cut to half its size.
        let db = fx.store + "/store.sqlite"
        let size = (try FileManager.default.attributesOfItem(atPath: db)[.size] as? Int) ?? 0
        XCTAssertGreaterThan(size, 0)
        XCTAssertEqual(truncate(db, off_t(size / 2)), 0)
        let before = storeDigest()
        for args in [["mount", fx.store, other, "-f"], ["mount", fx.store, other], ["check", fx.store], ["check", "--repair", fx.store]] {
            let r = fx.docfs(args, timeout: 20)
            XCTAssertNotEqual(r.status, 0, "docfs \(args.joined(separator: " ")): \(r)")
            XCTAssert(r.stderr.hasPrefix("docfs: "), "one clear line: \(r)")
            XCTAssert(r.stderr.contains(fx.store) || r.stderr.contains("store"), "\(r)")
            XCTAssertFalse(Mounts.isMounted(other))
        }
        XCTAssertEqual(storeDigest(), before, "a refused store is not changed")
    }

    func testUnusableMountpointsGetAClearMessage() throws {
        let notDir = fx.dir + "/file"
        _ = FileManager.default.createFile(atPath: notDir, contents: Data("x".utf8))
        let notEmpty = fx.dir + "/full"
        try FileManager.default.createDirectory(atPath: notEmpty, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: notEmpty + "/inside", contents: Data())
        try LocalStore2.make(fx)
        let cases: [(String, String)] = [
            (fx.mnt, "already a mountpoint"),
            (notDir, "not a directory"),
            (notEmpty, "not empty"),
            (fx.dir + "/missing", "does not exist"),
        ]
        for (mountpoint, message) in cases {
            let r = fx.docfs(["mount", fx.dir + "/store2", mountpoint], timeout: 20)
            XCTAssertNotEqual(r.status, 0, "\(mountpoint): \(r)")
            XCTAssert(r.stderr.contains(message), "\(mountpoint): expected '\(message)': \(r)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: notEmpty), ["inside"])
        XCTAssertTrue(fx.isMounted, "the busy mountpoint's own mount is untouched")
        XCTAssertErrno(fx.writeFile(fx.m("still.txt"), [1]), 0)
    }
}

/// A second, unmounted store beside the fixture's.
private enum LocalStore2 {
    static func make(_ fx: MountFixture) throws {
        let r = fx.docfs(["init", fx.dir + "/store2"])
        if r.status != 0 { throw FixtureError("docfs init store2: \(r)") }
    }
}
