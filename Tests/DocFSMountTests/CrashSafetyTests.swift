import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// README.md, *Durability*: `kill -9` of the daemon at the worst moments, then a remount. What
/// close() acknowledged is there byte for byte, a half-copied file is absent or complete (never
/// torn), the next mount cleans (and logs) what the crash left, and `docfs check` agrees that
/// the store is consistent.
final class CrashSafetyTests: MountTestCase {

    // MARK: helpers

    /// Starts `script` (sh -c, in the fixture directory) without waiting for it.
    func background(_ script: String) throws -> Child {
        let out = fx.dir + "/bg-\(UInt32.random(in: 0...UInt32.max)).txt"
        return try Child("/bin/sh", ["-c", script], cwd: fx.dir, stdout: out, stderr: out)
    }

    /// Sizes of the files anywhere in the store's staging area (outside the mount: safe to look at).
    func stagedSizes() -> [Int64] {
        let staging = fx.store + "/staging"
        let names = (try? FileManager.default.subpathsOfDirectory(atPath: staging)) ?? []
        return names.compactMap { name in
            var st = Glibc.stat()
            return Glibc.lstat(staging + "/" + name, &st) == 0 && st.st_mode & S_IFMT == S_IFREG ? Int64(st.st_size) : nil
        }
    }

    func contentFileCount() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: fx.store + "/contents")) ?? []).count
    }

    /// Bytes in the store's segments (small files, on by default): grows with each small import.
    func segmentBytes() -> Int64 {
        let dir = fx.store + "/segments"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).reduce(0) { total, name in
            var st = Glibc.stat()
            return total + (Glibc.lstat(dir + "/" + name, &st) == 0 ? Int64(st.st_size) : 0)
        }
    }

    /// Stops the daemon cleanly and runs `docfs check` on the store: it must say consistent.
    func assertStoreConsistent(_ when: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(fx.stopDaemon(), "clean stop \(when); log:\n\(fx.log)", file: file, line: line)
        let r = fx.docfs(["check", fx.store])
        XCTAssertEqual(r.status, 0, "docfs check \(when): \(r)", file: file, line: line)
        XCTAssert(r.stdout.contains("is consistent"), "\(r)", file: file, line: line)
        XCTAssertEqual(stagedSizes().filter { $0 > 0 }, [], "no staged data may be left \(when)", file: file, line: line)
    }

    // MARK: (a) in the middle of a large copy

    func testKill9InTheMiddleOfALargeCopyLeavesNoTornFile() throws {
        let done = testBytes(3 << 20, seed: 11)
        XCTAssertErrno(fx.writeFile(fx.m("done.bin"), done), 0)
        // 200 MiB in 1 MiB writes, each chunk a known pattern, slowed just enough to be caught.
        let writer = try background(
            """
            exec python3 -c '
            import time
            with open("mnt/big.bin", "wb", buffering=0) as f:
                for i in range(200):
                    f.write(bytes([i % 251]) * (1 << 20))
                    time.sleep(0.005)
            '
            """)
        defer { writer.signalGroup(SIGKILL); writer.wait(seconds: 10) }
        let caught = waitUntil(60) { (stagedSizes().max() ?? 0) >= 16 << 20 || writer.hasExited }
        XCTAssertTrue(caught, "the copy never got going")
        let midway = !writer.hasExited
        fx.kill9()
        XCTAssertTrue(writer.wait(seconds: 30), "the writer must not hang once the daemon is gone")
        if midway { XCTAssertNotEqual(writer.status, 0, "the writer saw the daemon die") }
        XCTAssertFalse(fx.isMounted)

        try fx.mount()
        XCTAssertBytes(fx.readFile(fx.m("done.bin")), done, "a file closed before the crash")
        let big = fx.stat(fx.m("big.bin"))
        if big.errno == 0 {
            // Complete or nothing: if it is there, every byte is right.
            XCTAssertEqual(big.st.st_size, 200 << 20, "a torn big.bin is in the tree")
            let r = fx.sh(
                "python3 -c 'import sys\nd=open(\"mnt/big.bin\",\"rb\").read()\nsys.exit(0 if all(d[i<<20:(i+1)<<20]==bytes([i%251])*(1<<20) for i in range(200)) else 1)'"
            )
            XCTAssertEqual(r.status, 0, "big.bin contents: \(r)")
        } else {
            XCTAssertErrno(big.errno, ENOENT)
        }
        if midway {
            XCTAssertEqual(fx.list(fx.mnt), ["done.bin"])
            let cleaned = fx.logLines { $0.contains("leftover staged file") }
            XCTAssertFalse(cleaned.isEmpty, "the next mount must log the staged leftovers it removed; log:\n\(fx.log)")
        }
        assertStoreConsistent("after kill -9 during a large copy")
    }

    /// cp -r of many files killed half way: each file there is complete, and the rest is absent.
    /// The files (20–49 KB) go to segments by default: what segments promise is the same.
    func testKill9DuringTreeCopyLeavesOnlyCompleteFiles() throws {
        for i in 0..<300 {
            try fx.writeSource("tree/d\(i % 7)/f\(i).bin", testBytes(20_000 + i * 97, seed: UInt64(1000 + i)))
        }
        let copier = try background("exec cp -r src/tree mnt/tree")
        defer { copier.signalGroup(SIGKILL); copier.wait(seconds: 10) }
        // At least 60 imports, in content files or segments (watched from outside the mount).
        waitUntil(60) { contentFileCount() >= 60 || segmentBytes() >= 60 * 50_000 || copier.hasExited }
        fx.kill9()
        XCTAssertTrue(copier.wait(seconds: 30), "cp must not hang once the daemon is gone")
        try fx.mount()
        var present = 0
        for i in 0..<300 {
            let path = fx.m("tree/d\(i % 7)/f\(i).bin")
            let got = fx.readFile(path)
            if got.errno == ENOENT { continue }
            present += 1
            XCTAssertBytes(got, testBytes(20_000 + i * 97, seed: UInt64(1000 + i)), "tree/d\(i % 7)/f\(i).bin")
        }
        XCTAssertGreaterThanOrEqual(present, 50, "the copy was killed after at least 60 imports")
        // Nothing else appeared: only names of the source.
        let r = fx.sh(
            "cd mnt && find . -type f | sed 's|^./||' | sort > ../found.txt && cd ../src && find tree -type f | sort > ../all.txt && comm -23 ../found.txt ../all.txt"
        )
        XCTAssertEqual(r.stdout, "", "files in the tree that are not in the source: \(r)")
        assertStoreConsistent("after kill -9 during cp -r")
    }

    // MARK: (b) right after close() returned

    func testFilesWhoseCloseReturnedSurviveKill9RightAfter() throws {
        var expected: [String: [UInt8]] = [:]
        for round in 0..<3 {
            // New files, an overwrite (O_TRUNC) of an existing one, an append, an empty file.
            for i in 0..<25 {
                let bytes = testBytes((i * 7919 + round * 131) % 300_000, seed: UInt64(round * 100 + i))
                XCTAssertErrno(fx.writeFile(fx.m("r\(round)-\(i).bin"), bytes), 0)
                expected["r\(round)-\(i).bin"] = bytes
            }
            let over = testBytes(50_000 + round, seed: UInt64(999 + round))
            XCTAssertErrno(fx.writeFile(fx.m("r0-1.bin"), over), 0)
            expected["r0-1.bin"] = over
            let more = Array("appended in round \(round)\n".utf8)
            XCTAssertErrno(fx.writeFile(fx.m("r0-2.bin"), more, flags: O_WRONLY | O_APPEND), 0)
            expected["r0-2.bin"]! += more
            XCTAssertErrno(fx.writeFile(fx.m("empty-\(round)"), []), 0)
            expected["empty-\(round)"] = []
            fx.kill9() // at once: no sync, no clean shutdown
            try fx.mount()
            XCTAssertEqual(fx.list(fx.mnt), expected.keys.sorted(), "after round \(round)")
            for (name, bytes) in expected.sorted(by: { $0.key < $1.key }) {
                XCTAssertBytes(fx.readFile(fx.m(name)), bytes, "\(name) after kill -9 in round \(round)")
            }
        }
        assertStoreConsistent("after three kill -9 rounds")
    }

    // MARK: (c) in the middle of renames of many items

    func testKill9DuringManyRenamesLosesNothing() throws {
        let count = 2000
        for i in 0..<count { try fx.writeSource("many/f\(i)", Array("file \(i)\n".utf8)) }
        let r = fx.sh("cp -r src/many mnt/a && mkdir mnt/b", timeout: 180)
        XCTAssertEqual(r.status, 0, "\(r)")
        // One process renaming the files one by one from a/ to b/, killed half way.
        let mover = try background(
            """
            exec python3 -c '
            import os
            for i in range(\(count)):
                os.rename("mnt/a/f%d" % i, "mnt/b/f%d" % i)
            '
            """)
        defer { mover.signalGroup(SIGKILL); mover.wait(seconds: 10) }
        waitUntil(60) { (fx.list(fx.m("b"))?.count ?? 0) >= 300 || mover.hasExited }
        fx.kill9()
        XCTAssertTrue(mover.wait(seconds: 30))
        try fx.mount()
        let a = Set(fx.list(fx.m("a")) ?? []), b = Set(fx.list(fx.m("b")) ?? [])
        XCTAssertTrue(a.isDisjoint(with: b), "an item is in both folders: \(a.intersection(b).prefix(5))")
        XCTAssertEqual(a.union(b), Set((0..<count).map { "f\($0)" }), "every file is in a/ or b/")
        XCTAssertGreaterThan(b.count, 0)

        // Then a folder with 2,000 children renamed back and forth, killed mid-loop.
        let flipper = try background(
            """
            exec python3 -c '
            import os
            os.rename("mnt/b", "mnt/x")
            for i in range(100000):
                os.rename("mnt/x", "mnt/y"); os.rename("mnt/y", "mnt/x")
            '
            """)
        defer { flipper.signalGroup(SIGKILL); flipper.wait(seconds: 10) }
        waitUntil(1.0) { flipper.hasExited } // let it flip for a moment (not an assertion)
        fx.kill9()
        XCTAssertTrue(flipper.wait(seconds: 30))
        try fx.mount()
        let top = Set(fx.list(fx.mnt) ?? [])
        XCTAssertTrue(top == ["a", "x"] || top == ["a", "y"], "exactly one of x and y: \(top)")
        let moved = top.contains("x") ? "x" : "y"
        XCTAssertEqual(Set(fx.list(fx.m(moved)) ?? []), b, "the renamed folder kept its children")
        // Contents of every file, wherever it ended up.
        let check = fx.sh(
            "cd mnt && for d in a \(moved); do for f in $d/*; do n=${f#$d/f}; [ \"$(cat $f)\" = \"file $n\" ] || echo bad $f; done; done",
            timeout: 120)
        XCTAssertEqual(check.stdout, "", "\(check)")
        assertStoreConsistent("after kill -9 during renames")
    }

    // MARK: (d) during an import's metadata commit (fault injection)

    /// Files past the segments' bound (256 KiB): the content-file path. (A small file's crash
    /// between its append and the journal: SegmentMountTests.)
    func testCrashBetweenContentMoveAndCommitLeavesNoTrace() throws {
        fx.stopDaemon()
        try fx.mount(env: ["DOCFS_FAULT": "import-commit:abort@3"])
        XCTAssertFalse(fx.logLines { $0.contains("DOCFS_FAULT arms a crash at import-commit") }.isEmpty, "log:\n\(fx.log)")
        let one = testBytes(300_000, seed: 1), two = testBytes(310_000, seed: 2), three = testBytes(320_000, seed: 3)
        XCTAssertErrno(fx.writeFile(fx.m("one.bin"), one), 0)
        XCTAssertErrno(fx.writeFile(fx.m("two.bin"), two), 0)
        let third = fx.writeFile(fx.m("three.bin"), three)
        XCTAssertNotEqual(third, 0, "close() of the import that crashed the daemon cannot return 0")
        XCTAssertEqual(fx.waitForDaemonExit(seconds: 20), 134, "the fault hook ends the daemon with _exit(134); log:\n\(fx.log)")

        // The crash left the content file without its row; check finds it and changes nothing.
        let before = fx.docfs(["check", fx.store])
        XCTAssertNotEqual(before.status, 0, "\(before)")
        XCTAssert(before.stdout.contains("orphanContents"), "\(before)")
        XCTAssertEqual(contentFileCount(), 3)

        try fx.mount()
        XCTAssertEqual(fx.list(fx.mnt), ["one.bin", "two.bin"])
        XCTAssertBytes(fx.readFile(fx.m("one.bin")), one)
        XCTAssertBytes(fx.readFile(fx.m("two.bin")), two)
        XCTAssertFalse(fx.logLines { $0.contains("removed 1 content file(s) with no item") }.isEmpty, "log:\n\(fx.log)")
        XCTAssertTrue(waitUntil(10) { contentFileCount() == 2 }, "the orphan content file is removed: \(contentFileCount())")
        // The name is free again, and a copy now lands.
        XCTAssertErrno(fx.writeFile(fx.m("three.bin"), three), 0)
        XCTAssertBytes(fx.readFile(fx.m("three.bin")), three)
        assertStoreConsistent("after a crash inside an import")
    }

    func testCrashBetweenContentReplaceAndCommitGivesOldOrNewNeverTorn() throws {
        let old = testBytes(40_000, seed: 7), new = testBytes(90_000, seed: 8)
        XCTAssertErrno(fx.writeFile(fx.m("doc.bin"), old), 0)
        fx.stopDaemon()
        try fx.mount(env: ["DOCFS_FAULT": "modify-commit:abort"])
        XCTAssertNotEqual(fx.writeFile(fx.m("doc.bin"), new), 0, "close() of the crashed modify cannot return 0")
        XCTAssertEqual(fx.waitForDaemonExit(seconds: 20), 134, "log:\n\(fx.log)")
        try fx.mount()
        let got = fx.readFile(fx.m("doc.bin"))
        XCTAssertTrue(
            got.bytes == old || got.bytes == new,
            "doc.bin must be the old or the new version, got \(got.bytes?.count ?? -1) bytes (errno \(got.errno))")
        XCTAssertEqual(Int(fx.stat(fx.m("doc.bin")).st.st_size), got.bytes?.count ?? -1, "stat size matches the contents")
        assertStoreConsistent("after a crash inside a modify")
    }

    // MARK: fsync

    /// fsync and fdatasync go through to the provider's synchronize (which fsyncs the content
    /// file and checkpoints SQLite); what they acknowledged is there after kill -9.
    func testFsyncAndFdatasyncSucceedAndPersist() throws {
        let r = fx.sh(
            """
            python3 -c '
            import os
            for name, sync in (("f1", os.fsync), ("f2", os.fdatasync)):
                fd = os.open("mnt/" + name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, name.encode() * 1000)
                sync(fd)
                os.write(fd, b"tail")
                sync(fd)
                os.close(fd)
            d = os.open("mnt", os.O_RDONLY)
            os.mkdir("mnt/dir")
            os.fsync(d)
            os.close(d)
            '
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        fx.kill9()
        try fx.mount()
        XCTAssertBytes(fx.readFile(fx.m("f1")), Array((String(repeating: "f1", count: 1000) + "tail").utf8))
        XCTAssertBytes(fx.readFile(fx.m("f2")), Array((String(repeating: "f2", count: 1000) + "tail").utf8))
        XCTAssertEqual(fx.list(fx.mnt), ["dir", "f1", "f2"])
        assertStoreConsistent("after fsync and kill -9")
    }
}
