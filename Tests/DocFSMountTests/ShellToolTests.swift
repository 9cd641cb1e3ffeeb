import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Everyday shell tools on a mount where everything is allowed.
final class ShellToolTests: MountTestCase {

    /// A generated tree under src/tree: nested dirs, ~50 files, a 3 MiB file and an empty file.
    func makeTree(at rel: String = "tree") throws {
        var n: UInt64 = 0
        for d in ["", "a", "a/b", "a/b/c", "docs", "docs/deep/er"] {
            for i in 0..<8 {
                n += 1
                let size = Int((n * 7919) % 20_000)
                let prefix = d.isEmpty ? "" : d + "/"
                try fx.writeSource("\(rel)/\(prefix)file-\(i).dat", testBytes(size, seed: n))
            }
        }
        try fx.writeSource("\(rel)/notes.txt", Array("hello, docfs\n".utf8))
        try fx.writeSource("\(rel)/big/three-mib.bin", testBytes(3 << 20, seed: 42))
        try fx.writeSource("\(rel)/empty", [])
        try FileManager.default.createDirectory(atPath: fx.src + "/\(rel)/empty-dir", withIntermediateDirectories: true)
    }

    func testCopyFileInAndReadBackByteExact() throws {
        let bytes = testBytes(200_003, seed: 1)
        try fx.writeSource("report.pdf", bytes)
        let r = fx.sh("cp src/report.pdf mnt/")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("report.pdf")), bytes)
        XCTAssertEqual(fx.list(fx.mnt), ["report.pdf"])
    }

    func testCopyTreeRecursivelyThenDiff() throws {
        try makeTree()
        let r = fx.sh("cp -r src/tree mnt/tree && diff -r src/tree mnt/tree")
        XCTAssertEqual(r.status, 0, "\(r)")
        let listing = fx.sh(
            "cd src/tree && find . | sort > ../../want.txt && cd ../../mnt/tree && find . | sort > ../../got.txt && cd ../.. && diff want.txt got.txt"
        )
        XCTAssertEqual(listing.status, 0, "listings differ: \(listing)")
        XCTAssertEqual(fx.stat(fx.m("tree/big/three-mib.bin")).st.st_size, 3 << 20)
        XCTAssertEqual(fx.stat(fx.m("tree/empty")).st.st_size, 0)
    }

    func testMkdirPMoveAndRemoveTree() throws {
        var r = fx.sh("mkdir -p mnt/a/b && echo x > mnt/a/b/f.txt && mv mnt/a mnt/b")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(fx.list(fx.mnt), ["b"])
        XCTAssertEqual(fx.list(fx.m("b")), ["b"])
        XCTAssertBytes(fx.readFile(fx.m("b/b/f.txt")), Array("x\n".utf8))
        XCTAssertErrno(fx.stat(fx.m("a")).errno, ENOENT)
        r = fx.sh("rm -rf mnt/b")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(fx.list(fx.mnt), [])
    }

    func testLsLongShowsFilesWithTheirSizes() throws {
        let sizes = ["zero": 0, "one": 1, "page": 4096, "big": 100_000]
        for (name, size) in sizes {
            XCTAssertErrno(fx.writeFile(fx.m(name), testBytes(size, seed: UInt64(size))), 0, name)
        }
        let r = fx.sh("ls -l mnt")
        XCTAssertEqual(r.status, 0, "\(r)")
        var seen: [String: Int] = [:]
        for line in r.stdout.split(separator: "\n") where !line.hasPrefix("total") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 9 else { continue }
            XCTAssert(f[0].hasPrefix("-"), "not a regular file: \(line)")
            seen[String(f[8])] = Int(f[4])
        }
        XCTAssertEqual(seen, sizes, r.stdout)
    }

    func testTarExtractIntoMountThenDiff() throws {
        try makeTree()
        var r = fx.sh("tar -cf src/tree.tar -C src tree")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = fx.sh("mkdir mnt/x && tar -xf src/tree.tar -C mnt/x && diff -r src/tree mnt/x/tree")
        XCTAssertEqual(r.status, 0, "\(r)")
    }

    func testEditorSaveWriteTempThenRenameGivesNewContent() throws {
        XCTAssertErrno(fx.writeFile(fx.m("doc.txt"), Array("old contents\n".utf8)), 0)
        XCTAssertErrno(fx.writeFile(fx.m(".doc.txt.swp"), Array("new contents, longer than before\n".utf8)), 0)
        XCTAssertErrno(fx.renameErrno(fx.m(".doc.txt.swp"), fx.m("doc.txt")), 0)
        XCTAssertBytes(fx.readFile(fx.m("doc.txt")), Array("new contents, longer than before\n".utf8))
        XCTAssertEqual(fx.list(fx.mnt), ["doc.txt"])
    }

    func testShellRedirectOverwrites() throws {
        let r = fx.sh("printf 'first version' > mnt/f.txt && printf 'v2' > mnt/f.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("f.txt")), Array("v2".utf8))
        XCTAssertEqual(fx.stat(fx.m("f.txt")).st.st_size, 2)
    }

    func testShellAppend() throws {
        let r = fx.sh("printf 'hello' > mnt/f.txt && printf ', world' >> mnt/f.txt && printf '!' >> mnt/f.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("f.txt")), Array("hello, world!".utf8))
    }

    func testTruncateGrowsAndShrinks() throws {
        var r = fx.sh("printf 'abcdef' > mnt/f && truncate -s 10 mnt/f")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("f")), Array("abcdef".utf8) + [0, 0, 0, 0])
        r = fx.sh("truncate -s 3 mnt/f")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("f")), Array("abc".utf8))
        r = fx.sh("truncate -s 0 mnt/f")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("f")), [])
        XCTAssertEqual(fx.stat(fx.m("f")).st.st_size, 0)
    }

    func testRenameOverExistingFileReplacesIt() throws {
        XCTAssertErrno(fx.writeFile(fx.m("a"), Array("AAA".utf8)), 0)
        XCTAssertErrno(fx.writeFile(fx.m("b"), Array("B".utf8)), 0)
        XCTAssertErrno(fx.renameErrno(fx.m("a"), fx.m("b")), 0)
        XCTAssertEqual(fx.list(fx.mnt), ["b"])
        XCTAssertBytes(fx.readFile(fx.m("b")), Array("AAA".utf8))
    }

    func testCpOverExistingFile() throws {
        try fx.writeSource("new.txt", Array("the new one\n".utf8))
        XCTAssertErrno(fx.writeFile(fx.m("t.txt"), testBytes(50_000, seed: 9)), 0)
        let r = fx.sh("cp src/new.txt mnt/t.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("t.txt")), Array("the new one\n".utf8))
    }

    func testSymlinkAndReadlink() throws {
        XCTAssertErrno(fx.writeFile(fx.m("target.txt"), Array("through the link".utf8)), 0)
        let r = fx.sh("ln -s target.txt mnt/link && readlink mnt/link && cat mnt/link")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "target.txt\nthrough the link")
        let st = fx.stat(fx.m("link"))
        XCTAssertErrno(st.errno, 0)
        XCTAssertEqual(st.st.st_mode & S_IFMT, S_IFLNK)
        XCTAssertEqual(st.st.st_size, off_t("target.txt".utf8.count))
        var buf = [CChar](repeating: 0, count: 256)
        let n = fx.guarded { readlink(fx.m("link"), &buf, buf.count) }
        XCTAssertEqual(n, 10)
        XCTAssertEqual(String(decoding: buf[0..<max(n, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self), "target.txt")
    }

    func testFileBeingWrittenIsVisibleBeforeClose() throws {
        let path = fx.m("growing.bin")
        let fd = fx.guarded { open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0, "open: \(errnoName(errno))")
        guard fd >= 0 else { return }
        let bytes = testBytes(12_345, seed: 3)
        let n = fx.guarded { bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        XCTAssertEqual(n, 12_345)
        var fst = Glibc.stat()
        XCTAssertEqual(fx.guarded { fstat(fd, &fst) }, 0)
        XCTAssertEqual(fst.st_size, 12_345, "fstat before close")
        let st = fx.stat(path)
        XCTAssertErrno(st.errno, 0, "stat before close")
        XCTAssertEqual(st.st.st_size, 12_345, "stat before close")
        let other = fx.sh("stat -c %s mnt/growing.bin && ls mnt")
        XCTAssertEqual(other.stdout, "12345\ngrowing.bin\n", "another process before close: \(other)")
        XCTAssertEqual(fx.guarded { close(fd) }, 0)
        XCTAssertBytes(fx.readFile(path), bytes)
    }

    func testRmRfOfACopiedTreeLeavesNothing() throws {
        try makeTree()
        var r = fx.sh("cp -r src/tree mnt/tree && find mnt/tree -type d | wc -l")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = fx.sh("rm -rf mnt/tree")
        XCTAssertEqual(r.status, 0, "rm -rf (fts relies on directory nlink): \(r)")
        XCTAssertEqual(fx.list(fx.mnt), [])
    }

    func testTouchSetsModificationTime() {
        XCTAssertErrno(fx.writeFile(fx.m("t.txt"), Array("x".utf8)), 0)
        let r = fx.sh("touch -m -d '2020-01-02 03:04:05 UTC' mnt/t.txt && TZ=UTC stat -c %y mnt/t.txt")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.hasPrefix("2020-01-02 03:04:05"), "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("t.txt")), Array("x".utf8))
    }

    /// Write requests as large as the kernel sends (max_write), at offsets that are not page
    /// aligned, over earlier bytes and past the end (a hole), in a new file and in one opened
    /// again: every byte lands where it was written.
    func testLargeWritesAtAnyOffsetLandWhole() throws {
        largeWritesAtOffsets()
    }

    /// The same with `-o splice`: the bytes go from the FUSE device through a pipe into the
    /// staged file, never through the daemon's memory.
    func testSplicedLargeWritesAtAnyOffsetLandWhole() throws {
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.mount(extra: ["-o", "splice"])
        largeWritesAtOffsets()
        XCTAssert(fx.log.contains("splice of requests on"), "log:\n\(fx.log)")
        // Workers wait for requests in splice(2): SIGTERM must still end the session at once.
        XCTAssert(fx.stopDaemon(), "SIGTERM ends a spliced session cleanly within 5 s; log:\n\(fx.log)")
    }

    private func largeWritesAtOffsets() {
        let path = fx.m("large.bin")
        var model: [UInt8] = []
        func put(_ fd: Int32, _ bytes: [UInt8], at offset: Int) {
            let n = fx.guarded("pwrite") { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) } }
            XCTAssertEqual(n, bytes.count, "pwrite of \(bytes.count) at \(offset): \(errnoName(errno))")
            if model.count < offset + bytes.count { model += [UInt8](repeating: 0, count: offset + bytes.count - model.count) }
            model.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        }
        var fd = fx.guarded { open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0, "open: \(errnoName(errno))")
        guard fd >= 0 else { return }
        put(fd, testBytes(1 << 20, seed: 1), at: 0)
        put(fd, testBytes((1 << 20) + 123, seed: 2), at: 3000)
        put(fd, testBytes(2 << 20, seed: 3), at: 5 << 20)
        XCTAssertEqual(fx.guarded { close(fd) }, 0)
        XCTAssertBytes(fx.readFile(path), model, "new file")
        fd = fx.guarded { open(path, O_RDWR) }
        XCTAssertGreaterThanOrEqual(fd, 0, "open again: \(errnoName(errno))")
        guard fd >= 0 else { return }
        put(fd, testBytes((3 << 20) + 7, seed: 4), at: 777)
        XCTAssertEqual(fx.guarded { close(fd) }, 0)
        XCTAssertBytes(fx.readFile(path), model, "opened again")
    }

    func testFsyncSucceedsAndDataIsThere() {
        let path = fx.m("synced.bin")
        let bytes = testBytes(100_000, seed: 11)
        let fd = fx.guarded { open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        guard fd >= 0 else { return }
        XCTAssertEqual(fx.guarded { bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }, bytes.count)
        XCTAssertErrno(fx.errnoOf("fsync") { fsync(fd) }, 0)
        XCTAssertErrno(fx.errnoOf("close") { close(fd) }, 0)
        XCTAssertBytes(fx.readFile(path), bytes)
    }
}
