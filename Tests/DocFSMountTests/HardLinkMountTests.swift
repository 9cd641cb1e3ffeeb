import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// What the hard-link tests look at: the inode and link count of names.
extension MountTestCase {
    /// `stat -c '%i %h'` of each path, one line each.
    func inodesAndLinks(_ paths: [String]) -> [String] {
        let r = fx.sh("stat -c '%i %h' " + paths.map { "'\($0)'" }.joined(separator: " "))
        XCTAssertEqual(r.status, 0, "\(r)")
        return r.stdout.split(separator: "\n").map(String.init)
    }

    func assertLinked(_ paths: [String], count: Int, file: StaticString = #filePath, line: UInt = #line) {
        let lines = inodesAndLinks(paths)
        XCTAssertEqual(Set(lines).count, 1, "one inode under \(paths): \(lines)", file: file, line: line)
        XCTAssertEqual(lines.first?.split(separator: " ").last.map(String.init), String(count), "\(paths): \(lines)", file: file, line: line)
    }
}

/// Hard links through the mount (issue 39): the copy tools keep them, both names are one file,
/// each name goes alone, the last takes the file, a crash inside a link leaves it complete or
/// absent. Runs with the store and with the memory provider (the remounts: store only).
final class HardLinkMountTests: MountTestCase {
    func makeLinkedSource() {
        let r = fx.sh(
            """
            mkdir -p src/sub && printf alpha > src/a && ln src/a src/b && ln src/a src/sub/c \
            && printf lone > src/x && printf pair > src/sub/p && ln src/sub/p src/q
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
    }

    func testCopyToolsKeepHardLinks() throws {
        makeLinkedSource()
        let tools: [(String, String)] = [
            ("cp", "cp -a src mnt/cp"),
            ("tar", "tar -cf t.tar -C src . && mkdir mnt/tar && tar -xf t.tar -C mnt/tar"),
            ("rsync", "mkdir mnt/rsync && rsync -aH src/ mnt/rsync/"),
        ]
        for (name, command) in tools {
            let r = fx.sh(command)
            XCTAssertEqual(r.status, 0, "\(name): \(r)\nlog:\n\(fx.log)")
            let root = "mnt/\(name)"
            assertLinked(["\(root)/a", "\(root)/b", "\(root)/sub/c"], count: 3)
            assertLinked(["\(root)/sub/p", "\(root)/q"], count: 2)
            assertLinked(["\(root)/x"], count: 1)
            let diff = fx.sh("diff -r src \(root)")
            XCTAssertEqual(diff.status, 0, "\(name): \(diff)")
        }
        if !MountFixture.usesMemoryProvider {
            XCTAssertTrue(try fx.remount())
            assertLinked(["mnt/rsync/a", "mnt/rsync/b", "mnt/rsync/sub/c"], count: 3)
            XCTAssertEqual(fx.sh("diff -r src mnt/cp && diff -r src mnt/tar").status, 0)
            assertStoreConsistent()
        }
    }

    func testBothNamesAreOneFile() throws {
        let r = fx.sh(
            """
            printf alpha > mnt/a && mkdir mnt/d && ln mnt/a mnt/d/b && printf ' more' >> mnt/d/b && cat mnt/a && echo \
            && chmod 600 mnt/a && stat -c %a mnt/d/b && touch -d @1000000000 mnt/d/b && stat -c %Y mnt/a
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "alpha more\n600\n1000000000\n")
        assertLinked(["mnt/a", "mnt/d/b"], count: 2)
        // One descriptor per name, written and read across.
        let py = fx.sh(
            """
            python3 - <<'PY'
            import os
            w = os.open("mnt/d/b", os.O_WRONLY)
            os.pwrite(w, b"ALPHA", 0)
            os.close(w)
            print(open("mnt/a").read())
            PY
            """)
        XCTAssertEqual(py.stdout, "ALPHA more\n", "\(py)")
        // A file still being written (created, not closed) is linked too, and keeps being written.
        let open = fx.sh(
            """
            python3 - <<'PY'
            import os
            fd = os.open("mnt/w", os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"one ")
            os.link("mnt/w", "mnt/w2")
            os.write(fd, b"two")
            os.close(fd)
            a, b = os.stat("mnt/w"), os.stat("mnt/w2")
            print(open("mnt/w2").read(), a.st_ino == b.st_ino, b.st_nlink)
            PY
            """)
        XCTAssertEqual(open.stdout, "one two True 2\n", "\(open)\nlog:\n\(fx.log)")
    }

    func testEachNameGoesAloneAndTheLastTakesTheFile() throws {
        let r = fx.sh(
            """
            printf alpha > mnt/a && printf other > mnt/o && mkdir mnt/d && ln mnt/a mnt/d/b && ln mnt/a mnt/c \
            && rm mnt/a && stat -c %h mnt/c && mv mnt/d/b mnt/e && stat -c %h mnt/e \
            && mv mnt/c mnt/o && stat -c %h mnt/o && cat mnt/o && echo && ls mnt && ls mnt/d
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "2\n2\n2\nalpha\nd\ne\no\n")
        assertLinked(["mnt/e", "mnt/o"], count: 2)
        // rename(2) between two names of one file leaves both.
        XCTAssertEqual(fx.sh("python3 -c 'import os; os.rename(\"mnt/e\", \"mnt/o\")' && ls mnt").stdout, "d\ne\no\n")
        if !MountFixture.usesMemoryProvider {
            XCTAssertTrue(try fx.remount())
            assertLinked(["mnt/e", "mnt/o"], count: 2)
        }
        // A descriptor keeps the contents once the last name is gone.
        let py = fx.sh(
            """
            python3 - <<'PY'
            import os
            fd = os.open("mnt/o", os.O_RDONLY)
            os.unlink("mnt/e")
            os.unlink("mnt/o")
            print(os.fstat(fd).st_nlink, os.read(fd, 100).decode(), sorted(os.listdir("mnt")))
            os.close(fd)
            PY
            """)
        XCTAssertEqual(py.stdout, "0 alpha ['d']\n", "\(py)\nlog:\n\(fx.log)")
        if !MountFixture.usesMemoryProvider { assertStoreConsistent() }
    }

    func testFoldersAndTakenNamesAreRefusedAsOnExt4() throws {
        let r = fx.sh(
            """
            python3 - <<'PY'
            import errno, os
            os.mkdir("mnt/d")
            open("mnt/a", "w").close()
            for src, dst in (("mnt/d", "mnt/d2"), ("mnt/a", "mnt/d"), ("mnt/missing", "mnt/x"), ("mnt/a", "mnt/a/x")):
                try:
                    os.link(src, dst)
                    print("OK")
                except OSError as e:
                    print(errno.errorcode[e.errno])
            PY
            """)
        XCTAssertEqual(r.stdout, "EPERM\nEEXIST\nENOENT\nENOTDIR\n", "\(r)")
    }

    /// The daemon dies inside the second link, before its journal entry: after the remount the
    /// first link is whole, the second absent, and `docfs check` finds nothing.
    func testCrashInsideALinkLeavesItCompleteOrAbsent() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("the memory provider keeps nothing across mounts") }
        XCTAssertEqual(fx.sh("printf alpha > mnt/a").status, 0)
        fx.stopDaemon()
        try fx.mount(env: ["DOCFS_FAULT": "link-commit:abort@2"])
        XCTAssertEqual(fx.sh("ln mnt/a mnt/b").status, 0)
        XCTAssertNotEqual(fx.sh("ln mnt/a mnt/c").status, 0, "the link that crashed the daemon cannot succeed")
        XCTAssertEqual(fx.waitForDaemonExit(seconds: 20), 134, "log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        try fx.mount()
        XCTAssertEqual(fx.list(fx.mnt), ["a", "b"])
        assertLinked(["mnt/a", "mnt/b"], count: 2)
        XCTAssertEqual(fx.sh("cat mnt/b").stdout, "alpha")
        assertStoreConsistent()
    }

    /// kill -9 while a loop makes and removes links: every name left counts right.
    func testKillNineDuringLinksLeavesConsistentCounts() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("the memory provider keeps nothing across mounts") }
        XCTAssertEqual(fx.sh("printf alpha > mnt/a && mkdir mnt/d").status, 0)
        let loop = try Child(
            "/bin/sh", ["-c", "i=0; while [ $i -lt 2000 ]; do ln mnt/a mnt/d/l$i || exit 1; [ $((i % 3)) = 0 ] && rm mnt/d/l$i; i=$((i+1)); done"],
            cwd: fx.dir, env: [:], stdout: "/dev/null", stderr: "/dev/null")
        defer { loop.signal(SIGKILL); _ = loop.wait(seconds: 10) }
        XCTAssertTrue(waitUntil(20) { (fx.list(fx.m("d"))?.count ?? 0) >= 50 }, "links are being made")
        fx.kill9()
        _ = loop.wait(seconds: 20)
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        try fx.mount()
        let names = fx.list(fx.m("d")) ?? []
        XCTAssertFalse(names.isEmpty)
        assertLinked(["mnt/a"] + names.map { "mnt/d/\($0)" }, count: names.count + 1)
        assertStoreConsistent()
    }

    func assertStoreConsistent(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log)", file: file, line: line)
        let r = fx.docfs(["check", fx.store])
        XCTAssertEqual(r.status, 0, "docfs check: \(r)", file: file, line: line)
    }
}

/// What a folder's capabilities and ext4's rules refuse, device nodes, and Tests/posix/links.sh
/// run on an ext4 directory and on the mount side by side.
final class HardLinkRulesMountTests: MountTestCase {
    override class var layout: String? {
        """
        trash: false
        folders:
          - path: Sealed
            capabilities: [read, enumerate]
        """
    }
    override class var mountsInSetUp: Bool { false }

    override func setUpWithError() throws {
        try super.setUpWithError()
        do { try fx.mount(extra: ["--allow-other"]) } catch { fx.teardown(); throw error }
    }

    func testALinkIntoAFolderWithoutAddIsRefused() throws {
        XCTAssertEqual(fx.sh("printf alpha > mnt/a").status, 0)
        let r = fx.sh("ln mnt/a mnt/Sealed/b")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("Permission denied"), "\(r)")
        XCTAssertFalse(
            fx.logLines { $0.contains("link") && $0.contains("Sealed/b") && $0.contains("allowsAddingSubItems") }.isEmpty,
            "one log line naming the path and the rule; log:\n\(fx.log)")
        XCTAssertEqual(fx.list(fx.m("Sealed")), [])
        XCTAssertEqual(fx.sh("stat -c %h mnt/a").stdout, "1\n")
    }

    func testDeviceNodesAreInertItems() throws {
        let r = fx.sh(
            """
            mknod mnt/null c 1 3 && mknod mnt/loop b 7 0 && stat -c '%F %t:%T' mnt/null mnt/loop \
            && { cat mnt/null; echo "cat $?"; } 2>&1 | sed 's/.*Permission denied/EACCES/'
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "character special file 1:3\nblock special file 7:0\nEACCES\ncat 1\n", "\(r)")
        let mounts = fx.sh("grep ' \(fx.mnt) ' /proc/self/mounts").stdout
        XCTAssertTrue(mounts.contains("nodev"), "the mount is nodev: \(mounts)")
        let other = fx.sh("chmod 1777 mnt && setpriv --reuid=65534 --regid=65534 --clear-groups mknod mnt/n c 1 3")
        XCTAssertNotEqual(other.status, 0, "\(other)")
        XCTAssertTrue(other.stderr.contains("Operation not permitted"), "\(other)")
        if MountFixture.usesMemoryProvider { return }
        fx.stopDaemon()
        try fx.mount(extra: ["--allow-other"])
        XCTAssertEqual(fx.sh("stat -c '%F %t:%T' mnt/null mnt/loop").stdout, "character special file 1:3\nblock special file 7:0\n")
        XCTAssertTrue(fx.stopDaemon())
        XCTAssertEqual(fx.docfs(["check", fx.store]).status, 0)
    }

    /// The same script on an ext4 directory (a nodev loop mount when one can be made, else the
    /// fixture's own directory) and on the mount: the same lines, but for `open` of a device
    /// node where the ext4 directory is not nodev.
    func testTheLinkScriptAgreesWithExt4() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("posix/links.sh").path
        XCTAssertEqual(fx.sh("chmod 755 . mnt").status, 0)
        let ext4 = fx.sh(
            """
            mkdir -p ext4 && truncate -s 32M ext4.img && mkfs.ext4 -q -F ext4.img && mount -o loop,nodev ext4.img ext4 \
            && chmod 755 ext4 && sh '\(script)' ext4/run; s=$?; umount ext4 2>/dev/null; exit $s
            """, timeout: 120)
        var reference = ext4
        var nodev = true
        if ext4.status != 0 || ext4.stdout.isEmpty {
            reference = fx.sh("sh '\(script)' native/run")
            nodev = false
        }
        XCTAssertEqual(reference.status, 0, "\(reference)")
        let docfs = fx.sh("sh '\(script)' mnt/run", timeout: 120)
        XCTAssertEqual(docfs.status, 0, "\(docfs)\nlog:\n\(fx.log)")
        var expected = reference.stdout.split(separator: "\n").map(String.init)
        if !nodev { expected = expected.map { $0.hasPrefix("open ") ? $0.replacingOccurrences(of: "OK", with: "EACCES") : $0 } }
        XCTAssertEqual(docfs.stdout.split(separator: "\n").map(String.init), expected)
    }
}

/// Hard links on a mount with a trash: `rm` of one of several names removes just that name, the
/// last name goes to the trash as any file, and `mv NAME .Trash/` trashes one name, which still
/// counts as a link (as in a trash folder on ext4), lists, restores and empties alone.
final class HardLinkTrashMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    func testOnlyTheLastNameGoesToTheTrash() throws {
        try fx.mount(extra: ["--trash"])
        var r = fx.sh("printf alpha > mnt/a && mkdir mnt/d && ln mnt/a mnt/d/b && rm mnt/a && stat -c %h mnt/d/b && ls -A mnt/.Trash")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "1\n", "one name left, nothing in the trash: \(r)")
        r = fx.sh("rm mnt/d/b && ls -A mnt/.Trash && cat mnt/.Trash/b")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "b\nalpha", "\(r)")
        r = fx.sh("mv mnt/.Trash/b mnt/restored && cat mnt/restored && stat -c %h mnt/restored")
        XCTAssertEqual(r.stdout, "alpha1\n", "\(r)\nlog:\n\(fx.log)")
        if MountFixture.usesMemoryProvider { return }
        XCTAssertTrue(fx.stopDaemon())
        XCTAssertEqual(fx.docfs(["check", fx.store]).status, 0)
    }

    func testANameGoesToTheTrashAndBack() throws {
        try fx.mount(extra: ["--trash"])
        var r = fx.sh("printf alpha > mnt/a && mkdir mnt/d && ln mnt/a mnt/d/b && mv mnt/d/b mnt/.Trash/ && ls -A mnt/.Trash mnt/d")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "mnt/.Trash:\nb\n\nmnt/d:\n", "\(r)")
        assertLinked(["mnt/a", "mnt/.Trash/b"], count: 2)
        r = fx.sh("printf ' more' >> mnt/a && cat mnt/.Trash/b && echo && getfattr --only-values -n user.docfs.trashed-from mnt/.Trash/b")
        XCTAssertEqual(r.stdout, "alpha more\n/d/b", "one file under both names; the name remembers where it was: \(r)")
        // Restored by the CLI (rename back to where it came from): the same file again.
        r = fx.docfs(["trash", "restore", fx.mnt, "b"])
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(fx.sh("ls -A mnt/.Trash").stdout, "")
        assertLinked(["mnt/a", "mnt/d/b"], count: 2)
        // The item's own (first) name goes to the trash: the file keeps its other name, takes new
        // ones, and emptying the trash removes just the trashed name.
        r = fx.sh("mv mnt/a mnt/.Trash/ && ln mnt/d/b mnt/e && cat mnt/e")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        assertLinked(["mnt/.Trash/a", "mnt/d/b", "mnt/e"], count: 3)
        r = fx.docfs(["trash", "empty", fx.mnt])
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        assertLinked(["mnt/d/b", "mnt/e"], count: 2)
        XCTAssertEqual(fx.sh("ls -A mnt/.Trash && cat mnt/e").stdout, "alpha more")
        // A trashed folder takes along the name trashed out of it, and comes back with it.
        r = fx.sh("mv mnt/d/b mnt/.Trash/ && rmdir mnt/d && ls -A mnt/.Trash mnt/.Trash/d")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "mnt/.Trash:\nd\n\nmnt/.Trash/d:\nb\n", "\(r)")
        r = fx.sh("mv mnt/.Trash/d mnt/d && cat mnt/d/b")
        XCTAssertEqual(r.stdout, "alpha more", "\(r)\nlog:\n\(fx.log)")
        assertLinked(["mnt/d/b", "mnt/e"], count: 2)
        // mv out of the trash never overwrites; a trashed name stays across a remount.
        r = fx.sh("mv mnt/e mnt/.Trash/ && touch mnt/e && mv mnt/.Trash/e mnt/e")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("File exists"), "\(r)")
        assertLinked(["mnt/d/b", "mnt/.Trash/e"], count: 2)
        if MountFixture.usesMemoryProvider { return }
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount(extra: ["--trash"])
        assertLinked(["mnt/d/b", "mnt/.Trash/e"], count: 2)
        XCTAssertEqual(fx.sh("getfattr --only-values -n user.docfs.trashed-from mnt/.Trash/e").stdout, "/e")
        XCTAssertTrue(fx.stopDaemon())
        XCTAssertEqual(fx.docfs(["check", fx.store]).status, 0)
    }
}
