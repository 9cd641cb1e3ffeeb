import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// `-o passthrough_create`: a create is answered with its staged file as the backing file, so the
/// kernel writes a new file itself (no write request reaches the daemon); every close that
/// returned 0 imports it byte-exact, also across a kill -9; a second open while the first is
/// open joins the same backing file; refused contents are still refused at close.
final class PassthroughCreateMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    /// Skips where the kernel or the process offers no passthrough.
    func mountWithPassthroughCreate() throws {
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0,passthrough_create"])
        try fx.skipUnlessPassthrough()
    }

    func writes() throws -> Int { try MetricsScrape.requests("write", of: fx) }

    func testANewFileIsWrittenByTheKernelAndKeptByteExact() throws {
        try mountWithPassthroughCreate()
        let before = try writes()
        let big = testBytes(5 << 20, seed: 60), small = testBytes(3000, seed: 61)
        XCTAssertErrno(fx.writeFile(fx.m("big.bin"), big), 0)
        XCTAssertErrno(fx.writeFile(fx.m("small.txt"), small), 0)
        // One handle: pwrites growing the file; stat while it is open follows them, and close
        // keeps size and modification time.
        let r = fx.sh(
            """
            python3 -c '
            import os, random, sys
            ref = bytearray(); f = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)
            for i in range(200):
                data = os.urandom(random.randrange(1, 100000)); o = random.randrange(3 << 20)
                os.pwrite(f, data, o)
                if len(ref) < o + len(data): ref.extend(bytes(o + len(data) - len(ref)))
                ref[o:o + len(data)] = data
            st = os.stat(sys.argv[1]); fs = os.fstat(f)
            assert st.st_size == len(ref) and fs.st_size == len(ref), (st.st_size, fs.st_size, len(ref))
            assert st.st_mode & 0o7777 == 0o640, oct(st.st_mode)
            os.close(f)
            after = os.stat(sys.argv[1])
            assert after.st_size == len(ref) and after.st_mtime_ns == st.st_mtime_ns, (after, st)
            open(sys.argv[2], "wb").write(ref)
            ' \(fx.m("random.bin")) \(fx.dir)/random.ref
            """)
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        // An empty file created and closed carries its create's time as mtime and ctime.
        XCTAssertErrno(fx.writeFile(fx.m("empty"), []), 0)
        let empty = fx.stat(fx.m("empty"))
        XCTAssertEqual(empty.errno, 0)
        XCTAssertEqual(empty.st.st_size, 0)
        XCTAssertEqual(empty.st.st_mtim.tv_sec, empty.st.st_ctim.tv_sec)
        XCTAssertEqual(empty.st.st_mtim.tv_nsec, empty.st.st_ctim.tv_nsec)
        XCTAssertEqual(try writes() - before, 0, "the kernel wrote the new files itself; log:\n\(fx.log)")
        XCTAssertTrue(try fx.remount(), "remount; log:\n\(fx.log)")
        XCTAssertBytes(fx.readFile(fx.m("big.bin")), big)
        XCTAssertBytes(fx.readFile(fx.m("small.txt")), small)
        XCTAssertEqual(fx.sh("cmp \(fx.dir)/random.ref \(fx.m("random.bin"))").status, 0)
        let again = fx.stat(fx.m("empty"))
        XCTAssertEqual(again.st.st_mtim.tv_nsec, empty.st.st_mtim.tv_nsec, "the import kept the create's time")
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    /// A second open of the new file while the first is open (a reader, then an appender) joins
    /// the same backing file: each sees the other's bytes, and the last close keeps them all.
    func testASecondOpenOfTheNewFileJoinsItsBackingFile() throws {
        try mountWithPassthroughCreate()
        let before = try writes()
        let path = fx.m("joined.txt")
        let first = open(path, O_RDWR | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(first, 0, "errno \(errno)")
        XCTAssertEqual(write(first, "abc", 3), 3)
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0, "errno \(errno)")
        var got = [UInt8](repeating: 0, count: 6)
        XCTAssertEqual(pread(reader, &got, 6, 0), 3)
        XCTAssertEqual(Array(got[0..<3]), Array("abc".utf8))
        let appender = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(appender, 0, "errno \(errno)")
        XCTAssertEqual(write(appender, "def", 3), 3)
        XCTAssertEqual(pread(first, &got, 6, 0), 6)
        XCTAssertEqual(got, Array("abcdef".utf8))
        XCTAssertEqual(close(appender), 0)
        XCTAssertEqual(close(reader), 0)
        XCTAssertEqual(pwrite(first, "!", 1, 6), 1)
        XCTAssertEqual(close(first), 0)
        XCTAssertBytes(fx.readFile(path), Array("abcdef!".utf8))
        XCTAssertEqual(try writes() - before, 0, "every handle wrote through the kernel; log:\n\(fx.log)")
        XCTAssertTrue(try fx.remount(), "remount; log:\n\(fx.log)")
        XCTAssertBytes(fx.readFile(path), Array("abcdef!".utf8))
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    /// A close that returned 0 survives a kill -9 right after it, and `docfs check` agrees.
    func testKill9AfterTheCloseKeepsTheNewFile() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("needs the store (remounts)") }
        try mountWithPassthroughCreate()
        let bytes = testBytes(3 << 20, seed: 62)
        XCTAssertErrno(fx.writeFile(fx.m("kept.bin"), bytes), 0)
        XCTAssertErrno(fx.writeFile(fx.m("kept.txt"), Array("kept\n".utf8)), 0)
        fx.kill9()
        try fx.mount()
        XCTAssertBytes(fx.readFile(fx.m("kept.bin")), bytes)
        XCTAssertBytes(fx.readFile(fx.m("kept.txt")), Array("kept\n".utf8))
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        XCTAssert(check.stdout.contains("is consistent"), "\(check)")
    }
}

/// A new file the kernel wrote is still judged at close: refused there with EIO, and gone.
final class PassthroughCreateRefusalMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }
    override class var layout: String? {
        """
        folders:
          - path: Notes
            allowedContentTypes: [public.text]
        """
    }

    func testARefusedNewFileIsRefusedAtCloseAndGone() throws {
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0,passthrough_create"])
        try fx.skipUnlessPassthrough()
        let before = try MetricsScrape.requests("write", of: fx)
        // Latin-1, not UTF-8: refused at close with EIO, and the name is gone.
        XCTAssertErrno(fx.writeFile(fx.m("Notes/bad.txt"), [0x47, 0x72, 0xFC, 0xDF, 0x65, 0x0A]), EIO)
        XCTAssertEqual(fx.stat(fx.m("Notes/bad.txt")).errno, ENOENT)
        XCTAssertErrno(fx.writeFile(fx.m("Notes/good.txt"), Array("ok ✓\n".utf8)), 0)
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), Array("ok ✓\n".utf8))
        XCTAssertEqual(try MetricsScrape.requests("write", of: fx) - before, 0, "the kernel wrote both; log:\n\(fx.log)")
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }
}
