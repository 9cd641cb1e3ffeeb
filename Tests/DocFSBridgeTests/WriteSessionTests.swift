import CFuse
import Glibc
import XCTest
@testable import DocFSBridge

/// `WriteSession.put`: a write request's bytes land in the staged file at their offset, from
/// libfuse's memory buffer or from the pipe that splice filled from /dev/fuse.
final class WriteSessionTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-put-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func bytes(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) &+ seed }
    }

    private func contents(_ fd: Int32) -> [UInt8] {
        var st = stat()
        fstat(fd, &st)
        var out = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = out.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        XCTAssertEqual(n, out.count)
        return out
    }

    private func staged() -> Int32 {
        let fd = open(dir + "/staged", O_RDWR | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        return fd
    }

    func testMemoryBytesLandAtTheirOffset() {
        let fd = staged()
        defer { close(fd) }
        let data = bytes(10_000, seed: 1)
        let result = data.withUnsafeBytes { raw -> (written: Int, errno: Int32) in
            var source = fuse_bufvec()
            source.count = 1
            source.buf.size = raw.count
            source.buf.mem = UnsafeMutableRawPointer(mutating: raw.baseAddress)
            return WriteSession.put(&source, into: fd, at: 4096)
        }
        XCTAssertEqual(result.written, 10_000)
        XCTAssertEqual(result.errno, 0)
        XCTAssertEqual(contents(fd), [UInt8](repeating: 0, count: 4096) + data)
    }

    /// What libfuse hands write_buf for a large request with splice: the data in a pipe.
    func testPipeBytesLandAtTheirOffsetAndThePipeIsEmptied() {
        let fd = staged()
        defer { close(fd) }
        let first = bytes(5000, seed: 9)
        XCTAssertEqual(first.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }, 5000)
        var p: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&p), 0)
        defer { close(p[0]); close(p[1]) }
        let size = 256 << 10
        XCTAssertGreaterThanOrEqual(fcntl(p[1], FuseOperations.setPipeSize, Int32(size)), Int32(size))
        let data = bytes(size, seed: 3)
        XCTAssertEqual(data.withUnsafeBytes { write(p[1], $0.baseAddress, $0.count) }, size)
        var source = fuse_bufvec()
        source.count = 1
        source.buf.size = size
        source.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue)
        source.buf.fd = p[0]
        let result = WriteSession.put(&source, into: fd, at: 1000)
        XCTAssertEqual(result.written, size)
        XCTAssertEqual(result.errno, 0)
        XCTAssertEqual(contents(fd), Array(first[0..<1000]) + data)
        _ = fcntl(p[0], F_SETFL, O_NONBLOCK)
        var rest: UInt8 = 0
        XCTAssertEqual(read(p[0], &rest, 1), -1, "the request's bytes were all taken from the pipe")
        XCTAssertEqual(errno, EAGAIN)
    }

    func testAFailedWriteReportsItsErrno() {
        let fd = open(dir + "/read-only", O_RDONLY | O_CREAT, 0o600)
        defer { close(fd) }
        var byte: UInt8 = 7
        let result = withUnsafeMutableBytes(of: &byte) { raw -> (written: Int, errno: Int32) in
            var source = fuse_bufvec()
            source.count = 1
            source.buf.size = 1
            source.buf.mem = raw.baseAddress
            return WriteSession.put(&source, into: fd, at: 0)
        }
        XCTAssertEqual(result.written, 0)
        XCTAssertEqual(result.errno, EBADF)
    }
}
