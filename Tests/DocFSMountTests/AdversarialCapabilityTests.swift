import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Every way in, out and through a capability is refused with the documented errno, logs one
/// line naming the path, and leaves nothing behind (no item, no staged file, no content file).
final class AdversarialCapabilityTests: MountTestCase {
    /// Closed: nothing may be added (its child Sub comes from the layout).
    /// Frozen: adding is allowed, but what lands there may only be read.
    /// Blind: what lands there may be written and deleted, never read.
    /// Hidden: may be added to, never listed.
    override class var layout: String? {
        """
        trash: false
        folders:
          - path: Closed
            capabilities: [read, enumerate]
            contents: [read]
          - path: Closed/Sub
            capabilities: [read, enumerate]
          - path: Frozen
            capabilities: [read, enumerate, add]
            contents: [read]
          - path: Blind
            capabilities: [read, enumerate, add]
            contents: [write, delete]
          - path: Hidden
            capabilities: [read, add]
          - path: Open
        """
    }

    let payload = testBytes(12_345, seed: 42)

    // MARK: helpers

    func refusalLines(_ path: String) -> [String] {
        fx.log.split(separator: "\n").map(String.init).filter { $0.contains("refused") && $0.contains(" \(path): ") }
    }

    /// Runs `call` (returns -1 and sets errno on failure), expects `expected`, and exactly one
    /// new log line naming `/path` (a path inside the mount) with the errno's name.
    func expectRefusal(
        _ what: String, _ path: String, _ expected: Int32, logged: Bool = true,
        file: StaticString = #filePath, line: UInt = #line, _ call: () -> Int32
    ) {
        let before = refusalLines(path).count
        let got = fx.errnoOf(what, call)
        XCTAssertErrno(got, expected, "\(what) \(path)", file: file, line: line)
        guard logged else { return }
        var lines = refusalLines(path)
        let deadline = Date().addingTimeInterval(5)
        while lines.count == before && Date() < deadline { usleep(20_000); lines = refusalLines(path) }
        let new = Array(lines.dropFirst(before))
        XCTAssertEqual(
            new.count, 1, "\(what) \(path): one refusal line expected, got:\n\(new.joined(separator: "\n"))",
            file: file, line: line)
        if let first = new.first {
            XCTAssert(
                first.contains("(\(errnoName(expected)))"), "\(what): log line names the errno: \(first)",
                file: file, line: line)
        }
    }

    /// Nothing was left: the listing is `names`, no staged data, no new content file.
    func assertNothingLeft(
        _ folder: String, _ names: [String], contents: Int? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertEqual(fx.list(fx.m(folder)), names, "\(folder) must be unchanged", file: file, line: line)
        XCTAssertEqual(fx.stagedLeftovers(), [], "no staged file may be left", file: file, line: line)
        if let contents {
            let count = ((try? FileManager.default.contentsOfDirectory(atPath: fx.store + "/contents")) ?? []).count
            XCTAssertEqual(count, contents, "content files in the store", file: file, line: line)
        }
    }

    func contentCount() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: fx.store + "/contents")) ?? []).count
    }

    func assertStoreConsistent(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log)", file: file, line: line)
        let r = fx.docfs(["check", fx.store])
        XCTAssertEqual(r.status, 0, "docfs check: \(r)", file: file, line: line)
    }

    // MARK: a folder without allowsAddingSubItems

    func testEveryWayIntoAFolderWithoutAddIsRefused() throws {
        XCTAssertErrno(fx.writeFile(fx.m("Open/f.txt"), payload), 0)
        XCTAssertErrno(fx.mkdirErrno(fx.m("Open/d")), 0)
        XCTAssertErrno(fx.writeFile(fx.m("Open/d/inner.txt"), payload), 0)
        XCTAssertErrno(fx.mkdirErrno(fx.m("Open/empty")), 0)
        let contents = contentCount()
        let c = fx.m("Closed")

        expectRefusal("create", "/Closed/new.txt", EACCES) {
            let fd = open(c + "/new.txt", O_WRONLY | O_CREAT | O_TRUNC, 0o644); return fd < 0 ? -1 : close(fd)
        }
        expectRefusal("create excl", "/Closed/excl.txt", EACCES) {
            let fd = open(c + "/excl.txt", O_RDWR | O_CREAT | O_EXCL, 0o600); return fd < 0 ? -1 : close(fd)
        }
        expectRefusal("mkdir", "/Closed/dir", EACCES) { mkdir(c + "/dir", 0o755) }
        expectRefusal("mkfifo", "/Closed/fifo", EACCES) { mkfifo(c + "/fifo", 0o644) }
        expectRefusal("mknod regular", "/Closed/node", EACCES) { mknod(c + "/node", S_IFREG | 0o644, 0) }
        expectRefusal("symlink", "/Closed/link", EACCES) { symlink("../Open/f.txt", c + "/link") }
        expectRefusal("link into", "/Closed/hard", EACCES) { link(fx.m("Open/f.txt"), c + "/hard") }
        expectRefusal("rename file into", "/Open/f.txt", EACCES) { rename(fx.m("Open/f.txt"), c + "/f.txt") }
        expectRefusal("rename folder into", "/Open/d", EACCES) { rename(fx.m("Open/d"), c + "/d") }
        expectRefusal("rename over an existing child", "/Open/empty", EACCES) { rename(fx.m("Open/empty"), c + "/Sub") }
        expectRefusal("renameat2 noreplace into", "/Open/f.txt", EACCES) {
            fx.renameat2Errno(fx.m("Open/f.txt"), c + "/g.txt", flags: RENAME_NOREPLACE_FLAG) == 0 ? 0 : -1
        }
        assertNothingLeft("Closed", ["Sub"], contents: contents)

        // Where adding is allowed, a hard link is made (and goes again without a trace).
        XCTAssertErrno(fx.errnoOf("link") { link(fx.m("Open/f.txt"), fx.m("Open/hard")) }, 0)
        XCTAssertErrno(fx.errnoOf("unlink") { unlink(fx.m("Open/hard")) }, 0)

        // O_CREAT races: eight processes at once, on one name and on their own names.
        let race = fx.sh(
            """
            for i in 1 2 3 4 5 6 7 8; do
              python3 -c '
            import os, sys, errno
            out = []
            for name in ("race", "race-" + sys.argv[1]):
                try:
                    os.close(os.open("mnt/Closed/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)); out.append("OK")
                except OSError as e:
                    out.append(errno.errorcode[e.errno])
            os.write(1, (" ".join(out) + chr(10)).encode())  # one write: eight processes share the output
            ' $i &
            done
            wait
            """)
        XCTAssertEqual(race.stdout.split(separator: "\n").map(String.init), Array(repeating: "EACCES EACCES", count: 8), "\(race)")

        // Tools: cp (with reflink), tar x, rsync (its temp files included).
        try fx.writeSource("tool/a.txt", payload)
        try fx.writeSource("tool/sub/b.txt", payload)
        let cp = fx.sh("cp --reflink=auto src/tool/a.txt mnt/Closed/")
        XCTAssertNotEqual(cp.status, 0, "\(cp)")
        XCTAssert(cp.stderr.contains("Permission denied"), "\(cp)")
        let cpr = fx.sh("cp -r --reflink=auto src/tool mnt/Closed/")
        XCTAssertNotEqual(cpr.status, 0, "\(cpr)")
        let tar = fx.sh("tar -C src -cf tool.tar tool && tar -C mnt/Closed -xf tool.tar")
        XCTAssertNotEqual(tar.status, 0, "\(tar)")
        let rsync = fx.sh("rsync -a src/tool/ mnt/Closed/")
        XCTAssertNotEqual(rsync.status, 0, "\(rsync)")
        let rsyncInPlace = fx.sh("rsync -a --inplace src/tool/a.txt mnt/Closed/")
        XCTAssertNotEqual(rsyncInPlace.status, 0, "\(rsyncInPlace)")
        assertNothingLeft("Closed", ["Sub"], contents: contents)
        XCTAssertEqual(fx.list(fx.m("Open")), ["d", "empty", "f.txt"], "sources of refused moves stay")
        XCTAssertBytes(fx.readFile(fx.m("Open/f.txt")), payload)
        assertStoreConsistent()
    }

    // MARK: a file without allowsWriting

    func makeFrozen() throws {
        try fx.writeSource("a.pdf", payload)
        let r = fx.sh("cp src/a.pdf mnt/Frozen/a.pdf && cp src/a.pdf mnt/Frozen/c.pdf && mkdir mnt/Frozen/sub")
        XCTAssertEqual(r.status, 0, "setup: \(r)")
        if r.status != 0 { throw FixtureError("setup failed") }
    }

    func testEveryWayToChangeAFileWithoutWriteIsRefused() throws {
        try makeFrozen()
        let a = fx.m("Frozen/a.pdf")
        for (label, flags) in [
            ("O_WRONLY", O_WRONLY), ("O_RDWR", O_RDWR), ("O_TRUNC", O_WRONLY | O_TRUNC),
            ("O_APPEND", O_WRONLY | O_APPEND), ("O_CREAT on it", O_WRONLY | O_CREAT),
        ] {
            expectRefusal("open \(label)", "/Frozen/a.pdf", EACCES) {
                let fd = open(a, flags, 0o644); return fd < 0 ? -1 : close(fd)
            }
        }
        expectRefusal("truncate", "/Frozen/a.pdf", EACCES) { truncate(a, 0) }
        expectRefusal("truncate longer", "/Frozen/a.pdf", EACCES) { truncate(a, 1 << 20) }
        expectRefusal("utimes (mtime)", "/Frozen/a.pdf", EACCES) {
            var times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2 /* UTIME_OMIT */), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
            return utimensat(AT_FDCWD, a, &times, 0)
        }
        // ftruncate, fallocate and a writable shared mmap all need a writable descriptor, which
        // open refuses; with a read-only one the kernel refuses them itself (EINVAL/EBADF/EACCES).
        let py = fx.sh(
            """
            python3 -c '
            import os, mmap, errno
            fd = os.open("mnt/Frozen/a.pdf", os.O_RDONLY)
            res = []
            for name, call in (("ftruncate", lambda: os.ftruncate(fd, 0)),
                               ("mmap", lambda: mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE))):
                try:
                    call(); res.append(name + ":OK")
                except OSError as e:
                    res.append(name + ":" + errno.errorcode[e.errno])
            print(" ".join(res))
            '
            """)
        XCTAssertEqual(py.stdout, "ftruncate:EINVAL mmap:EACCES\n", "\(py)")
        let fallocate = fx.sh("fallocate -l 1M mnt/Frozen/a.pdf")
        XCTAssertNotEqual(fallocate.status, 0, "\(fallocate)")
        XCTAssert(fallocate.stderr.contains("Permission denied"), "fallocate opens for writing first: \(fallocate)")
        let tools = fx.sh(
            "truncate -s 0 mnt/Frozen/a.pdf; echo more >> mnt/Frozen/a.pdf; touch -m -d 2001-01-01 mnt/Frozen/a.pdf; cp src/a.pdf mnt/Frozen/a.pdf; exit 0"
        )
        XCTAssertEqual(tools.stderr.components(separatedBy: "Permission denied").count - 1, 4, "\(tools)")
        XCTAssertErrno(fx.writeFile(fx.m("Open/x.pdf"), Array("replacement".utf8)), 0)
        expectRefusal("rename over it", "/Open/x.pdf", EPERM) { rename(fx.m("Open/x.pdf"), a) }
        XCTAssertBytes(fx.readFile(a), payload, "contents unchanged")
        XCTAssertEqual(Int(fx.stat(a).st.st_size), payload.count)

        // fallocate on a writable file: the bridge has no fallocate, the kernel answers
        // EOPNOTSUPP, and the file is unchanged (tools then fall back to writing).
        let opened = fx.sh("fallocate -l 1M mnt/Open/x.pdf")
        XCTAssertNotEqual(opened.status, 0, "\(opened)")
        XCTAssert(opened.stderr.contains("not supported"), "\(opened)")
        XCTAssertBytes(fx.readFile(fx.m("Open/x.pdf")), Array("replacement".utf8))
        assertStoreConsistent()
    }

    // MARK: no delete, rename or reparent

    func testItemsWithoutDeleteRenameOrReparentStayPut() throws {
        try makeFrozen()
        let before = fx.list(fx.m("Frozen"))
        expectRefusal("unlink", "/Frozen/a.pdf", EPERM) { unlink(fx.m("Frozen/a.pdf")) }
        expectRefusal("rmdir", "/Frozen/sub", EPERM) { rmdir(fx.m("Frozen/sub")) }
        expectRefusal("rename in place", "/Frozen/a.pdf", EPERM) { rename(fx.m("Frozen/a.pdf"), fx.m("Frozen/b.pdf")) }
        expectRefusal("rename folder in place", "/Frozen/sub", EPERM) { rename(fx.m("Frozen/sub"), fx.m("Frozen/sub2")) }
        expectRefusal("move out", "/Frozen/a.pdf", EPERM) { rename(fx.m("Frozen/a.pdf"), fx.m("Open/a.pdf")) }
        expectRefusal("move folder out", "/Frozen/sub", EPERM) { rename(fx.m("Frozen/sub"), fx.m("Open/sub")) }
        expectRefusal("rename over a sibling", "/Frozen/a.pdf", EPERM) { rename(fx.m("Frozen/a.pdf"), fx.m("Frozen/c.pdf")) }
        expectRefusal("layout folder rename", "/Frozen", EPERM) { rename(fx.m("Frozen"), fx.m("Frozen2")) }
        expectRefusal("layout folder rmdir", "/Closed/Sub", EPERM) { rmdir(fx.m("Closed/Sub")) }
        expectRefusal("renameat2 exchange", "/Frozen/a.pdf", EINVAL) {
            fx.renameat2Errno(fx.m("Frozen/a.pdf"), fx.m("Frozen/c.pdf"), flags: RENAME_EXCHANGE_FLAG) == 0 ? 0 : -1
        }
        let rm = fx.sh("rm -rf mnt/Frozen/sub mnt/Frozen/a.pdf; mv mnt/Frozen/c.pdf mnt/Open/ ; exit 0")
        XCTAssert(rm.stderr.contains("Operation not permitted"), "\(rm)")
        XCTAssertEqual(fx.list(fx.m("Frozen")), before)
        XCTAssertEqual(fx.list(fx.m("Open")), [])
        XCTAssertBytes(fx.readFile(fx.m("Frozen/a.pdf")), payload)
        assertStoreConsistent()
    }

    // MARK: no read, no listing

    func testNothingReadsAFileWithoutRead() throws {
        try fx.writeSource("s.txt", payload)
        let setup = fx.sh("cp src/s.txt mnt/Blind/s.txt")
        XCTAssertEqual(setup.status, 0, "\(setup)")
        let s = fx.m("Blind/s.txt")
        expectRefusal("open O_RDONLY", "/Blind/s.txt", EACCES) {
            let fd = open(s, O_RDONLY); return fd < 0 ? -1 : close(fd)
        }
        expectRefusal("open O_RDWR", "/Blind/s.txt", EACCES) {
            let fd = open(s, O_RDWR); return fd < 0 ? -1 : close(fd)
        }
        // mmap, copy_file_range and sendfile need a readable descriptor: the open fails first.
        let py = fx.sh(
            """
            python3 -c '
            import os, errno
            try:
                fd = os.open("mnt/Blind/s.txt", os.O_RDONLY)
                print("opened")
            except OSError as e:
                print(errno.errorcode[e.errno])
            '
            cp mnt/Blind/s.txt copied.txt; cat mnt/Blind/s.txt > /dev/null; exit 0
            """)
        XCTAssertEqual(py.stdout, "EACCES\n", "\(py)")
        XCTAssertEqual(py.stderr.components(separatedBy: "Permission denied").count - 1, 2, "\(py)")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: fx.dir + "/copied.txt")
                && (try? Data(contentsOf: URL(fileURLWithPath: fx.dir + "/copied.txt")))?.isEmpty == false)
        // Writing (which it allows) still works: O_WRONLY.
        XCTAssertErrno(fx.writeFile(s, Array("new".utf8), flags: O_WRONLY | O_TRUNC), 0)
        let mode = fx.stat(s).st.st_mode
        XCTAssertEqual(mode & 0o444, 0, "no r bit: \(String(mode, radix: 8))")

        // A folder without allowsContentEnumerating cannot be listed, though its items can be reached.
        XCTAssertErrno(fx.writeFile(fx.m("Hidden/known.txt"), payload), 0)
        expectRefusal("opendir", "/Hidden", EACCES) {
            guard let d = opendir(fx.m("Hidden")) else { return -1 }
            closedir(d); return 0
        }
        let ls = fx.sh("ls mnt/Hidden")
        XCTAssertNotEqual(ls.status, 0, "\(ls)")
        XCTAssertBytes(fx.readFile(fx.m("Hidden/known.txt")), payload, "a known name is still reachable")
        assertStoreConsistent()
    }
}
