import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// A write-only copy (issue 38): a file created `O_WRONLY` (cp, tar, a shell's `>`) is written
/// around the page cache, so the kernel asks no `security.capability` before its first write
/// (one GETXATTR round trip per new file before); its bytes, and what a reader holding the file
/// open sees while it is written, stay as they were. Its name is cached from the create on.
final class WriteOnlyCopyMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    /// The daemon's request count for `op` (its metrics text, as curl fetches it).
    func requests(_ op: String) throws -> Int {
        try MetricsScrape.requests(op, of: fx)
    }

    func testWriteOnlyCopiesCostNoSecurityQuestion() throws {
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0"])
        let files = (0..<20).map { testBytes(6000 + 977 * $0, seed: UInt64(380 + $0)) }
        for (i, bytes) in files.enumerated() { try fx.writeSource("f\(i)", bytes) }
        let before = try requests("getxattr")
        let r = fx.sh("cp src/f* mnt/")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(try requests("getxattr") - before, 0, "a write-only copy asked the kernel's security question")
        for i in files.indices { XCTAssertEqual(fx.sh("cmp src/f\(i) mnt/f\(i)").status, 0, "f\(i)") }
        // A file created for reading and writing keeps the page cache, and with it the question:
        // the count above would have seen one.
        let fd = open(fx.m("both"), O_RDWR | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "x", 1), 1)
        XCTAssertEqual(close(fd), 0)
        XCTAssertEqual(try requests("getxattr") - before, 1)
    }

    /// The name a create gave is cached like a looked-up one: a stat or unlink by path after
    /// close asks the daemon nothing more (one LOOKUP per file before: fsbench's churn).
    func testANewFilesNameNeedsNoLookupAfterClose() throws {
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0"])
        let names = (0..<20).map { "n\($0)" }
        for name in names {
            let fd = open(fx.m(name), O_WRONLY | O_CREAT | O_EXCL, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0, name)
            XCTAssertEqual(close(fd), 0, name)
        }
        let before = try requests("lookup")
        for name in names { XCTAssertEqual(fx.stat(fx.m(name)).errno, 0, name) }
        for name in names { XCTAssertEqual(unlink(fx.m(name)), 0, name) }
        XCTAssertEqual(try requests("lookup") - before, 0, "a new file's name was looked up again")
        for name in names { XCTAssertErrno(fx.stat(fx.m(name)).errno, ENOENT) }
    }

    func testAReaderSeesEachWriteOfAWriteOnlyFile() throws {
        try fx.mount()
        let first = Array("first line\n".utf8), second = Array("second line\n".utf8)
        func read(_ fd: Int32) -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = pread(fd, &buffer, buffer.count, 0)
            return n < 0 ? [] : Array(buffer[0..<n])
        }
        let writer = open(fx.m("log"), O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(writer, 0)
        XCTAssertEqual(write(writer, first, first.count), first.count)
        // tail -f: a reader open while the file is written, its first page read and cached.
        let reader = open(fx.m("log"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        XCTAssertEqual(read(reader), first)
        XCTAssertEqual(write(writer, second, second.count), second.count)
        XCTAssertEqual(read(reader), first + second)
        XCTAssertEqual(close(writer), 0)
        XCTAssertEqual(read(reader), first + second)
        XCTAssertEqual(close(reader), 0)
        XCTAssertBytes(fx.readFile(fx.m("log")), first + second)
    }
}
