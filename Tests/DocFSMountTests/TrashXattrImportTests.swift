import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Issue 4 through shell tools: trash (rm → trash → mv back, rm in the trash, refusals, rm -r),
/// extended attributes, `docfs trash`, `docfs tag`, `touch -a`.
final class TrashMountTests: MountTestCase {
    override class var layout: String? {
        """
        trash: true
        folders:
          - path: Keep
            contents: [read, write, rename, reparent, delete]
          - path: Locked
            capabilities: [read, enumerate]
          - path: Docs
        """
    }

    func testTrashIsListedAtTheRoot() {
        XCTAssertEqual(fx.sh("ls -a mnt").stdout.split(separator: "\n"), [".", "..", ".Trash", "Docs", "Keep", "Locked"])
        XCTAssertEqual(fx.sh("getfattr --only-values -n user.docfs.identifier mnt/.Trash").stdout, "NSFileProviderTrashContainerItemIdentifier")
    }

    func testRmTrashesAndMvRestores() {
        var r = fx.sh("echo A > mnt/Docs/a.txt && rm mnt/Docs/a.txt && ls mnt/Docs && ls mnt/.Trash && cat mnt/.Trash/a.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "a.txt\nA\n")
        r = fx.docfs(["trash", "list", fx.mnt])
        XCTAssertEqual(r.stdout, "a.txt\t/Docs/a.txt\n", "\(r)")
        r = fx.sh("mv mnt/.Trash/a.txt mnt/Docs/ && cat mnt/Docs/a.txt && ls -A mnt/.Trash")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "A\n")
        // Restoring under another name, with `docfs trash restore`, and --to.
        r = fx.sh("rm mnt/Docs/a.txt && mv mnt/.Trash/a.txt mnt/Docs/b.txt && cat mnt/Docs/b.txt")
        XCTAssertEqual(r.stdout, "A\n", "\(r)")
        r = fx.sh("rm mnt/Docs/b.txt && $DOCFS trash restore mnt b.txt && cat mnt/Docs/b.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "restored b.txt to \(fx.mnt)/Docs/b.txt\nA\n")
    }

    /// rm -r with a trash: the folder lands in the trash as one tree and comes back whole.
    func testRmRecursiveTrashesTheFolderAsOneTree() throws {
        try fx.writeSource("tree/a.txt", Array("a\n".utf8))
        try fx.writeSource("tree/sub/b.txt", Array("b\n".utf8))
        try fx.writeSource("tree/sub/deeper/c.bin", testBytes(70_000, seed: 3))
        var r = fx.sh("cp -r src/tree mnt/Docs/ && rm -r mnt/Docs/tree && ls mnt/Docs && ls -R mnt/.Trash")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(
            r.stdout,
            """
            mnt/.Trash:
            tree

            mnt/.Trash/tree:
            a.txt
            sub

            mnt/.Trash/tree/sub:
            b.txt
            deeper

            mnt/.Trash/tree/sub/deeper:
            c.bin

            """)
        r = fx.docfs(["trash", "list", fx.mnt])
        XCTAssertEqual(r.stdout, "tree/\t/Docs/tree\n", "\(r)")
        r = fx.sh("$DOCFS trash restore mnt tree && diff -r src/tree mnt/Docs/tree && ls -A mnt/.Trash")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "restored tree to \(fx.mnt)/Docs/tree\n")
    }

    /// Names a trashed folder gathers from the top of the trash leave the kernel's cache too:
    /// `ls -l` cached them, and after the folder is trashed they must no longer stat.
    func testGatheredNamesLeaveTheTrashListingAndCache() throws {
        var r = fx.sh(
            "mkdir mnt/Docs/g && echo x > mnt/Docs/g/x.txt && rm mnt/Docs/g/x.txt && ls -l mnt/.Trash >/dev/null && rmdir mnt/Docs/g && ls -A mnt/.Trash && ls -A mnt/.Trash/g"
        )
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stdout.hasSuffix("g\nx.txt\n"), "\(r)")
        // The kernel is told to forget .Trash/x.txt right after the rmdir answers.
        var gone = false
        for _ in 0..<100 where !gone {
            gone = fx.sh("stat mnt/.Trash/x.txt").status != 0
            if !gone { usleep(20_000) }
        }
        XCTAssertTrue(gone, "a gathered name still stats in .Trash")
        r = fx.sh("cat mnt/.Trash/g/x.txt")
        XCTAssertEqual(r.stdout, "x\n", "\(r)")
    }

    func testRmInsideTheTrashDeletesForGood() throws {
        try fx.writeSource("t/x.txt", Array("x\n".utf8))
        var r = fx.sh("echo A > mnt/a.txt && cp -r src/t mnt/Docs/ && rm mnt/a.txt && rm -r mnt/Docs/t && ls mnt/.Trash")
        XCTAssertEqual(r.stdout, "a.txt\nt\n", "\(r)")
        r = fx.sh("rm mnt/.Trash/a.txt && ls -A mnt/.Trash")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "t\n")
        r = fx.docfs(["trash", "empty", fx.mnt])
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "deleted 1 item(s) from the trash\n")
        XCTAssertEqual(fx.list(fx.m(".Trash")), [])
        // Gone for good: not back after a remount either.
        try fx.remount()
        XCTAssertEqual(fx.list(fx.m(".Trash")), [])
        XCTAssertEqual(fx.list(fx.m("Docs")), [])
    }

    func testTrashWithoutAllowsTrashingIsEPERM() throws {
        XCTAssertEqual(fx.sh("echo K > mnt/Keep/k.txt").status, 0)
        let r = fx.sh("rm mnt/Keep/k.txt")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertErrno(fx.unlinkErrno(fx.m("Keep/k.txt")), EPERM)
        XCTAssertErrno(fx.renameErrno(fx.m("Keep/k.txt"), fx.m(".Trash/k.txt")), EPERM)
        XCTAssertEqual(fx.readFile(fx.m("Keep/k.txt")).bytes, Array("K\n".utf8))
        XCTAssertEqual(fx.list(fx.m(".Trash")), [])
        XCTAssertFalse(fx.logLines { $0.contains("/Keep/k.txt") && $0.contains("allowsTrashing") && $0.contains("EPERM") }.isEmpty, fx.log)
    }

    func testRestoreIntoFolderWithoutAddIsEACCESAndCollisionsAreEEXIST() throws {
        XCTAssertEqual(fx.sh("echo A > mnt/Docs/a.txt && rm mnt/Docs/a.txt").status, 0)
        let r = fx.sh("mv mnt/.Trash/a.txt mnt/Locked/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Permission denied"), "\(r)")
        XCTAssertErrno(fx.renameErrno(fx.m(".Trash/a.txt"), fx.m("Locked/a.txt")), EACCES)
        XCTAssertEqual(fx.list(fx.m("Locked")), [])
        XCTAssertEqual(fx.list(fx.m(".Trash")), ["a.txt"])
        // A name taken at the destination is reported, never overwritten.
        XCTAssertEqual(fx.sh("echo NEW > mnt/Docs/a.txt").status, 0)
        XCTAssertErrno(fx.renameErrno(fx.m(".Trash/a.txt"), fx.m("Docs/a.txt")), EEXIST)
        let cli = fx.docfs(["trash", "restore", fx.mnt, "a.txt"])
        XCTAssertEqual(cli.status, 1, "\(cli)")
        XCTAssert(cli.stderr.contains("already exists"), "\(cli)")
        XCTAssertEqual(fx.readFile(fx.m("Docs/a.txt")).bytes, Array("NEW\n".utf8))
        XCTAssertEqual(fx.readFile(fx.m(".Trash/a.txt")).bytes, Array("A\n".utf8))
    }

    func testNothingIsCreatedInsideTheTrash() {
        XCTAssertErrno(fx.openErrno(fx.m(".Trash/new.txt"), O_WRONLY | O_CREAT | O_EXCL), EACCES)
        XCTAssertErrno(fx.mkdirErrno(fx.m(".Trash/dir")), EACCES)
        XCTAssertErrno(fx.mkdirErrno(fx.m(".Trash")), EEXIST)
        XCTAssertEqual(fx.list(fx.m(".Trash")), [])
    }
}

/// Without a trash, rm deletes; `docfs mount --trash` gives a store without one in its layout a trash.
final class TrashOptionTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    func testRmDeletesWithoutATrashAndTrashesWithTheFlag() throws {
        try fx.mount()
        var r = fx.sh("echo A > mnt/a.txt && rm mnt/a.txt && ls -A mnt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "", "no .Trash without a trash")
        XCTAssertErrno(fx.stat(fx.m(".Trash")).errno, ENOENT)
        XCTAssertNotEqual(fx.docfs(["trash", "list", fx.mnt]).status, 0)
        fx.stopDaemon()
        try fx.mount(extra: ["--trash"])
        XCTAssertEqual(fx.list(fx.mnt), [".Trash"], "the deleted file is gone for good")
        r = fx.sh("echo B > mnt/b.txt && rm mnt/b.txt && ls -A mnt/.Trash")
        XCTAssertEqual(r.stdout, "b.txt\n", "\(r)")
    }
}

final class XattrMountTests: MountTestCase {
    func testUserAttributesRoundTripAndPersist() throws {
        var r = fx.sh(
            """
            echo hi > mnt/f.txt && setfattr -n user.color -v blue mnt/f.txt && setfattr -n user.note -v 'two words' mnt/f.txt \
            && getfattr --only-values -n user.color mnt/f.txt && echo && getfattr -d mnt/f.txt
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.hasPrefix("blue\n"), "\(r)")
        XCTAssert(r.stdout.contains("user.color=\"blue\""), "\(r)")
        XCTAssert(r.stdout.contains("user.note=\"two words\""), "\(r)")
        XCTAssert(r.stdout.contains("user.docfs.identifier="), "\(r)")
        try fx.remount()
        r = fx.sh("getfattr --only-values -n user.note mnt/f.txt && setfattr -x user.note mnt/f.txt && getfattr -d mnt/f.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.hasPrefix("two words"), "\(r)")
        XCTAssertFalse(r.stdout.contains("user.note"), "\(r)")
        r = fx.sh("getfattr -n user.note mnt/f.txt")
        XCTAssertNotEqual(r.status, 0)
        XCTAssert(r.stderr.contains("No such attribute"), "\(r)")
        r = fx.sh("setfattr -x user.note mnt/f.txt")
        XCTAssert(r.stderr.contains("No such attribute"), "\(r)")
        // Folders take them too.
        r = fx.sh("mkdir mnt/d && setfattr -n user.k -v v mnt/d && getfattr --only-values -n user.k mnt/d")
        XCTAssertEqual(r.stdout, "v", "\(r)")
    }

    /// `-o noxattr`: the calls are not served (EOPNOTSUPP), files work as before, and what was
    /// stored is there again on a mount that serves attributes.
    func testNoxattrTurnsAttributesOffForThatMountOnly() throws {
        XCTAssertEqual(fx.sh("echo hi > mnt/f.txt && setfattr -n user.color -v blue mnt/f.txt").status, 0)
        fx.stopDaemon()
        try fx.mount(extra: ["-o", "noxattr"])
        var r = fx.sh("setfattr -n user.size -v big mnt/f.txt")
        XCTAssertNotEqual(r.status, 0)
        XCTAssert(r.stderr.contains("Operation not supported"), "\(r)")
        r = fx.sh("getfattr -n user.color mnt/f.txt")
        XCTAssertNotEqual(r.status, 0)
        XCTAssert(r.stderr.contains("Operation not supported"), "\(r)")
        r = fx.sh("echo more >> mnt/f.txt && cp mnt/f.txt mnt/g.txt && cat mnt/g.txt && ls -l mnt/g.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.hasPrefix("hi\nmore\n"), "\(r)")
        XCTAssertTrue(try fx.remount(), "clean stop")
        r = fx.sh("getfattr --only-values -n user.color mnt/f.txt")
        XCTAssertEqual(r.stdout, "blue", "\(r)")
    }

    /// XATTR_CREATE / XATTR_REPLACE, ERANGE for a small buffer, E2BIG and ENOSPC past the limits.
    func testFlagsBuffersAndLimits() throws {
        XCTAssertEqual(fx.sh("echo hi > mnt/f.txt").status, 0)
        let script = """
            import ctypes, errno, os, sys
            p = sys.argv[1]
            def err(f):
                try: f(); return "OK"
                except OSError as e: return errno.errorcode[e.errno]
            print(err(lambda: os.setxattr(p, "user.x", b"1", os.XATTR_REPLACE)))
            print(err(lambda: os.setxattr(p, "user.x", b"1", os.XATTR_CREATE)))
            print(err(lambda: os.setxattr(p, "user.x", b"2", os.XATTR_CREATE)))
            print(err(lambda: os.setxattr(p, "user.x", b"3", os.XATTR_REPLACE)))
            print(os.getxattr(p, "user.x").decode())
            libc = ctypes.CDLL(None, use_errno=True)
            buf = ctypes.create_string_buffer(1)
            os.setxattr(p, "user.long", b"0123456789")
            n = libc.getxattr(p.encode(), b"user.long", buf, 1)
            print(n, errno.errorcode[ctypes.get_errno()])
            print(libc.getxattr(p.encode(), b"user.long", None, 0))
            print(err(lambda: os.setxattr(p, "user.big", b"x" * 20000)))
            for i in range(3): os.setxattr(p, "user.chunk%d" % i, b"y" * 16384)
            print(err(lambda: os.setxattr(p, "user.chunk3", b"y" * 16384)))
            print(err(lambda: os.setxattr(p, "security.test", b"v")))
            print(err(lambda: os.setxattr(p, "trusted.test", b"v")))
            print(err(lambda: os.removexattr(p, "security.test")))
            print(err(lambda: os.setxattr(p, "user.docfs.identifier", b"v")))
            print(err(lambda: os.getxattr(p, "user.absent")))
            """
        try script.write(toFile: fx.dir + "/x.py", atomically: true, encoding: .utf8)
        let r = fx.sh("python3 x.py mnt/f.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(
            r.stdout.split(separator: "\n"),
            [
                "ENODATA", "OK", "EEXIST", "OK", "3", "-1 ERANGE", "10", "E2BIG", "ENOSPC",
                "ENOTSUP", "ENOTSUP", "ENOTSUP", "EPERM", "ENODATA", // Python names EOPNOTSUPP ENOTSUP
            ])
        XCTAssertFalse(fx.logLines { $0.contains("security.test") && $0.contains("EOPNOTSUPP") }.isEmpty, fx.log)
    }

    func testSecurityNamespaceRefusedBySetfattr() {
        let r = fx.sh("echo hi > mnt/f.txt && setfattr -n security.label -v x mnt/f.txt")
        XCTAssertNotEqual(r.status, 0)
        XCTAssert(r.stderr.contains("Operation not supported"), "\(r)")
    }

    func testCpPreservesUserAttributes() throws {
        try fx.writeSource("f.txt", Array("data\n".utf8))
        let r = fx.sh(
            "setfattr -n user.origin -v laptop src/f.txt && cp --preserve=xattr src/f.txt mnt/f.txt && getfattr --only-values -n user.origin mnt/f.txt"
        )
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "laptop")
    }

    func testTagsRankAndLastUsedDate() throws {
        var r = fx.sh(
            """
            echo hi > mnt/f.txt && setfattr -n user.docfs.tags -v 'red,work' mnt/f.txt \
            && setfattr -n user.docfs.favorite-rank -v 7 mnt/f.txt && touch -a -d '2021-03-04 05:06:07Z' mnt/f.txt \
            && $DOCFS info mnt/f.txt
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.contains("tags          red,work"), "\(r)")
        XCTAssert(r.stdout.contains("favorite rank 7"), "\(r)")
        XCTAssert(r.stdout.contains("last used     2021-03-04T05:06:07"), "\(r)")
        XCTAssertEqual(fx.stat(fx.m("f.txt")).st.st_atim.tv_sec, 1_614_834_367)
        r = fx.sh("setfattr -n user.docfs.favorite-rank -v high mnt/f.txt")
        XCTAssert(r.stderr.contains("Invalid argument"), "\(r)")
        // docfs tag: list, add, remove, set, clear.
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt")]).stdout, "red\nwork\n")
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt"), "--add", "urgent", "--remove", "red"]).status, 0)
        XCTAssertEqual(fx.sh("getfattr --only-values -n user.docfs.tags mnt/f.txt").stdout, "work,urgent")
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt"), "blue"]).status, 0)
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt")]).stdout, "blue\n")
        try fx.remount()
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt")]).stdout, "blue\n")
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt"), "--clear"]).status, 0)
        XCTAssertEqual(fx.docfs(["tag", fx.m("f.txt")]).stdout, "")
        XCTAssertFalse(fx.docfs(["info", fx.m("f.txt")]).stdout.contains("tags"))
    }
}

/// `docfs import`, through a mount and straight into a store.
final class ImportCommandTests: MountTestCase {
    override class var layout: String? {
        """
        folders:
          - path: Archive
            capabilities: [read, enumerate]
          - path: Projects
        """
    }

    func testMixedAllowedAndRefusedFiles() throws {
        try fx.writeSource("a.txt", Array("a\n".utf8))
        try fx.writeSource("b.pdf", Array("%PDF-1.4\n%%EOF\n".utf8))
        try fx.writeSource("c.png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        XCTAssertEqual(fx.sh("echo old > mnt/Projects/d.txt && cp src/a.txt src/d.txt").status, 0)
        let r = fx.docfs([
            "import", "src/a.txt", "src/b.pdf", "src/c.png", "src/d.txt", "src/missing.txt",
            "--to", "mnt/Projects", "--types", "public.text,com.adobe.pdf",
        ])
        XCTAssertEqual(r.status, 1, "\(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 5, "\(r)")
        let idA = fx.sh("getfattr --only-values -n user.docfs.identifier mnt/Projects/a.txt").stdout
        let idB = fx.sh("getfattr --only-values -n user.docfs.identifier mnt/Projects/b.pdf").stdout
        XCTAssertEqual(lines[0], "imported a.txt as \(idA)")
        XCTAssertEqual(lines[1], "imported b.pdf as \(idB)")
        XCTAssert(lines[2].hasPrefix("refused c.png: its type public.png is not among the allowed types"), lines[2])
        XCTAssertEqual(lines[3], "refused d.txt: File exists")
        XCTAssertEqual(lines[4], "refused missing.txt: No such file or directory")
        XCTAssertEqual(fx.list(fx.m("Projects")), ["a.txt", "b.pdf", "d.txt"])
        XCTAssertEqual(fx.readFile(fx.m("Projects/d.txt")).bytes, Array("old\n".utf8), "never overwritten")
        XCTAssertEqual(r.stderr, "", "quiet when not on a terminal: \(r)")
        // The folder's own rules: Archive takes nothing.
        let refused = fx.docfs(["import", "src/a.txt", "--to", "mnt/Archive"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.stdout, "refused a.txt: Permission denied\n")
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
        // All imported: status 0.
        XCTAssertEqual(fx.docfs(["import", "src/c.png", "--to", "mnt/Projects", "--types", "public.image"]).status, 0)
    }

    func testDirectoriesAndPackagesAreOneResultEach() throws {
        try fx.writeSource("tree/x.txt", Array("x\n".utf8))
        try fx.writeSource("tree/sub/y.bin", testBytes(100_000, seed: 9))
        try fx.writeSource("talk.deck/slide1.txt", Array("one\n".utf8))
        try fx.writeSource("talk.deck/assets/logo.png", testBytes(5_000, seed: 2))
        let r = fx.docfs(["import", "src/tree", "src/talk.deck", "--to", "mnt/Projects"])
        XCTAssertEqual(r.status, 0, "\(r)")
        let lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, "\(r)")
        XCTAssert(lines[0].hasPrefix("imported tree as "), "\(r)")
        XCTAssert(lines[1].hasPrefix("imported talk.deck as "), "\(r)")
        XCTAssertEqual(fx.sh("diff -r src/tree mnt/Projects/tree && diff -r src/talk.deck mnt/Projects/talk.deck").status, 0)
    }

    func testProgressOnATerminalOnly() throws {
        for i in 0..<20 { try fx.writeSource("p/f\(i).bin", testBytes(50_000, seed: UInt64(i))) }
        let r = fx.sh("script -qec \"$DOCFS import src/p/f0.bin src/p/f1.bin src/p/f2.bin --to mnt/Projects\" /dev/null")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.contains("files]"), "progress line on a terminal: \(r)")
        XCTAssert(r.stdout.contains("imported f2.bin as"), "\(r)")
        XCTAssert(r.stdout.contains("3 imported, 0 refused"), "summary on a terminal: \(r)")
        let piped = fx.sh("$DOCFS import src/p/f3.bin --to mnt/Projects | cat")
        XCTAssertFalse(piped.stdout.contains("files]") || piped.stderr.contains("files]"), "\(piped)")
    }

    /// Ctrl-C mid-run: what was imported stays and is whole, the file in flight is not there.
    func testSigintCancelsWithoutHalfImports() throws {
        let count = 100
        for i in 0..<count { try fx.writeSource(String(format: "many/m%03d.bin", i), testBytes(3_000_000, seed: UInt64(i))) }
        XCTAssertEqual(fx.mkdirErrno(fx.m("Projects/many")), 0)
        let out = fx.dir + "/import.out", err = fx.dir + "/import.err"
        let files = (0..<count).map { String(format: "src/many/m%03d.bin", $0) }
        let child = try Child(fx.bin, ["import"] + files + ["--to", "mnt/Projects/many"], cwd: fx.dir, stdout: out, stderr: err)
        defer { if !child.hasExited { child.signal(SIGKILL); child.wait(seconds: 10) } }
        let deadline = Date().addingTimeInterval(60)
        while !child.hasExited, Date() < deadline,
            !((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("imported m001.bin")
        { usleep(10_000) }
        child.signal(SIGINT)
        XCTAssertTrue(child.wait(seconds: 60))
        let stdout = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
        XCTAssertEqual(child.status, 130, "stdout:\n\(stdout)\nstderr:\n\(stderr)")
        XCTAssert(stderr.contains("import cancelled"), stderr)
        let imported = stdout.split(separator: "\n").filter { $0.hasPrefix("imported ") }
        XCTAssertGreaterThanOrEqual(imported.count, 2)
        XCTAssertLessThan(imported.count, count)
        let names = try XCTUnwrap(fx.list(fx.m("Projects/many")))
        XCTAssertEqual(names, imported.map { String($0.split(separator: " ")[1]) }.sorted(), "only what was reported imported is there")
        for name in names {
            XCTAssertEqual(fx.sh("cmp src/many/\(name) mnt/Projects/many/\(name)").status, 0, "\(name) is whole")
        }
        XCTAssertEqual(fx.stagedLeftovers(), [])
    }

    func testImportStraightIntoAStoreThatIsNotMounted() throws {
        try fx.writeSource("a.txt", Array("a\n".utf8))
        try fx.writeSource("pics/p.png", testBytes(1_000, seed: 1))
        let busy = fx.docfs(["import", "src/a.txt", "--store", fx.store, "--to", "/Projects"])
        XCTAssertNotEqual(busy.status, 0)
        XCTAssert(busy.stderr.contains("already mounted"), "\(busy)")
        fx.stopDaemon()
        var r = fx.docfs(["import", "src/a.txt", "src/pics", "--store", fx.store, "--to", "/Projects"])
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.hasPrefix("imported a.txt as "), "\(r)")
        r = fx.docfs(["import", "src/a.txt", "--store", fx.store, "--to", "/Archive"])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssert(r.stdout.contains("refused a.txt: /Archive: folder does not allow adding items"), "\(r)")
        r = fx.docfs(["import", "src/a.txt", "--store", fx.store, "--to", "/Projects"])
        XCTAssert(r.stdout.contains("refused a.txt: a.txt already exists"), "\(r)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fx.store + "/staging"), [])
        try fx.mount()
        XCTAssertEqual(fx.sh("diff src/a.txt mnt/Projects/a.txt && diff -r src/pics mnt/Projects/pics").status, 0)
    }
}
