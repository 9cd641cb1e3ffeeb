import CFuse
import Glibc
import XCTest
import DocFSProvider
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

    // MARK: - A small new file in memory

    private func put(_ data: [UInt8], into session: WriteSession, at offset: Int) -> (written: Int, errno: Int32) {
        data.withUnsafeBytes { raw in
            var source = fuse_bufvec()
            source.count = 1
            source.buf.size = raw.count
            source.buf.mem = UnsafeMutableRawPointer(mutating: raw.baseAddress)
            return session.put(&source, at: offset)
        }
    }

    private func readAll(_ session: WriteSession) -> [UInt8] {
        let size = Int(session.status()?.st_size ?? 0)
        var out = [UInt8](repeating: 0, count: size)
        let n = out.withUnsafeMutableBytes { session.read(into: $0.baseAddress!, size, at: 0) }
        XCTAssertEqual(n, size)
        return out
    }

    /// Writes, reads, truncation and times in memory; past the bound the copy spills to a staged
    /// file with its bytes and modification time, and goes on there.
    func testASmallFileStaysInMemoryUntilItGrowsPastItsBound() throws {
        let pool = StagingFilePool(stagingDirectory: dir)
        defer { pool.drain() }
        let before = InMemoryCopy.inUse
        let session = WriteSession.inMemory(limit: 8192, spillingTo: pool)
        let first = bytes(3000, seed: 5)
        XCTAssertEqual(put(first, into: session, at: 1000).written, 3000)
        XCTAssertNotNil(session.memoryContents())
        XCTAssertEqual(session.fd, -1, "no staged file yet")
        XCTAssertEqual(readAll(session), [UInt8](repeating: 0, count: 1000) + first)
        XCTAssertEqual(InMemoryCopy.inUse - before, 4000)
        let status = try XCTUnwrap(session.status())
        XCTAssertEqual(status.st_size, 4000)
        XCTAssertEqual(status.st_mtim.tv_sec, status.st_ctim.tv_sec)
        XCTAssertEqual(status.st_mtim.tv_nsec, status.st_ctim.tv_nsec, "a write sets both times to one instant")
        // Truncation, and a modification time set by the program (futimens).
        XCTAssertEqual(session.truncate(to: 2000), 0)
        XCTAssertEqual(readAll(session), [UInt8](repeating: 0, count: 1000) + first[0..<1000])
        XCTAssertEqual(InMemoryCopy.inUse - before, 2000)
        let set = FileTime(seconds: 1_000_000_000, nanoseconds: 123_456_789)
        session.setModificationTime(set)
        XCTAssertEqual(session.status()?.st_mtim.tv_nsec, 123_456_789)
        // Past the bound: the bytes move to a staged file (with the time set) and the write lands there.
        let second = bytes(9000, seed: 7)
        XCTAssertEqual(put(second, into: session, at: 2000).written, 9000)
        XCTAssertNil(session.memoryContents())
        XCTAssertGreaterThanOrEqual(session.fd, 0)
        XCTAssertEqual(InMemoryCopy.inUse, before, "the memory went back")
        XCTAssertEqual(contents(session.fd), [UInt8](repeating: 0, count: 1000) + first[0..<1000] + second)
        XCTAssertEqual(readAll(session), contents(session.fd))
        let path = try session.stagedPath()
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
    }

    /// The total for all copies in memory is bounded too: one that would pass it spills.
    func testTheMemoryOfAllCopiesIsBounded() throws {
        let pool = StagingFilePool(stagingDirectory: dir)
        defer { pool.drain() }
        let each = 4 << 20
        var sessions: [WriteSession] = []
        for _ in 0..<(InMemoryCopy.budget / each + 2) {
            let session = WriteSession.inMemory(limit: each, spillingTo: pool)
            XCTAssertEqual(session.truncate(to: Int64(each)), 0)
            sessions.append(session)
        }
        XCTAssertLessThanOrEqual(InMemoryCopy.inUse, InMemoryCopy.budget)
        XCTAssertTrue(sessions.contains { $0.memoryContents() == nil }, "a copy past the budget spilled")
        XCTAssertTrue(sessions.allSatisfy { $0.status()?.st_size == off_t(each) })
        sessions.removeAll()
        XCTAssertEqual(InMemoryCopy.inUse, 0, "every copy let go of its memory")
    }
}
