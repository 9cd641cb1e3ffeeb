import XCTest
import Foundation
import Synchronization
import DocFSProvider
@testable import DocFSStore

/// Downloads in streams, without a server: where streams start and stop, and that a read far
/// into a file waits for its own chunk only, not for the bytes before it.
final class ChunkedDownloadTests: XCTestCase {
    func testOneStreamServesASequentialReaderAndAFarReadGetsOneOfItsOwn() {
        var plan = ChunkPlan(size: 10 * 100 + 1, chunkSize: 100)
        XCTAssertEqual(plan.count, 11)
        XCTAssertEqual(plan.begin(1), 0, "the first stream starts at the first byte")
        XCTAssertTrue(plan.advance(1, into: 1))
        XCTAssertFalse(plan.want(150..<250), "chunk 1 is stream 1's and chunk 2 its next: the reader waits for it")
        XCTAssertNil(plan.begin(2), "nothing that stream 1 will not reach")
        // A reader at byte 750 for 100 bytes needs chunks 7 and 8: a stream from 7.
        XCTAssertTrue(plan.want(750..<850))
        XCTAssertFalse(plan.want(750..<850), "asked already")
        XCTAssertFalse(plan.want(0..<1001), "the first chunk not claimed is stream 1's next")
        XCTAssertEqual(plan.begin(2), 7)
        XCTAssertTrue(plan.advance(2, into: 8))
        XCTAssertTrue(plan.advance(2, into: 9))
        // Stream 1 goes on to chunk 7, which stream 2 has: it stops there.
        for chunk in 2...6 { XCTAssertTrue(plan.advance(1, into: chunk)) }
        XCTAssertFalse(plan.advance(1, into: 7))
        XCTAssertNil(plan.begin(1), "chunk 10 is stream 2's next: nowhere else to start")
        XCTAssertTrue(plan.advance(2, into: 10))
        XCTAssertFalse(plan.advance(2, into: 11), "the end of the file")
        plan.end(2)
        XCTAssertNil(plan.begin(2))
        XCTAssertFalse(plan.want(0..<1001), "every chunk is claimed")

        // A stream that stops leaves a stretch no head begins: the next stream to start takes it.
        var gap = ChunkPlan(size: 1000, chunkSize: 100)
        XCTAssertEqual(gap.begin(1), 0)
        XCTAssertTrue(gap.want(500..<510))
        XCTAssertEqual(gap.begin(2), 5)
        gap.end(1)  // stream 1's request failed or was dropped after chunk 0
        XCTAssertEqual(gap.begin(3), 1, "chunks 1-4: no stream reaches them now")

        var empty = ChunkPlan(size: 0, chunkSize: 100)
        XCTAssertEqual(empty.count, 0)
        XCTAssertNil(empty.begin(1))
        XCTAssertFalse(empty.want(0..<10))
    }

    /// A fake object of `size` bytes (byte i is i % 251), sent in pieces of 1 KiB; a request
    /// from byte 0 sends nothing until released, as a slow server's first request.
    final class SlowStart: Sendable {
        let held = DispatchSemaphore(value: 0)
        let requests = Mutex<[Int64]>([])
        let sent = Mutex<Int64>(0)
        let path: String
        init(path: String) { self.path = path }

        func fetch(_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Bool) async throws -> Int64 {
            requests.withLock { $0.append(range.lowerBound) }
            if range.lowerBound == 0 {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async { self.held.wait(); c.resume() }
                }
            }
            let fd = open(path, O_WRONLY)
            defer { close(fd) }
            var offset = range.lowerBound
            while offset < range.upperBound {
                let end = min(range.upperBound, offset + 1024)
                let bytes = (offset..<end).map { UInt8($0 % 251) }
                let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
                guard n == bytes.count else { throw POSIXError(.EIO) }
                offset = end
                sent.withLock { $0 += Int64(n) }
                if !progress(offset - range.lowerBound) { break }
            }
            return offset - range.lowerBound
        }
    }

    func testAReadFarIntoTheFileDoesNotWaitForTheBytesBeforeIt() throws {
        let path = NSTemporaryDirectory() + "/chunked-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let server = SlowStart(path: path)
        let size: Int64 = 64 * 1024 + 10
        let done = expectation(description: "the download ends")
        let outcome = Mutex<String??>(nil)
        let download = ContentDownload(row: 1, key: "k", contentVersion: 1, size: size, path: path, chunkSize: 4096, stallTimeout: 30,
                                       fetch: { range, progress in try await server.fetch(range, progress) },
                                       ended: { download, failure in
                                           // As the store does: the readers hear of the end.
                                           download.arrival.finish(failure.map { ProviderError(.ioError, $0, errno: EIO) })
                                           outcome.withLock { $0 = .some(failure) }
                                           done.fulfill()
                                       })
        download.start()

        // The stream from byte 0 is held; the last bytes still arrive, and right.
        try download.arrival.waitFor(size - 100 ..< size)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var tail = [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 100, off_t(size - 100)) }, 100)
        XCTAssertEqual(tail, (size - 100 ..< size).map { UInt8($0 % 251) })
        XCTAssertFalse(download.arrival.isFinished, "the first stream is still held")
        XCTAssertEqual(server.requests.withLock { $0.sorted() }, [0, 15 * 4096], "one stream from the start, one from the reader's first chunk")

        server.held.signal()
        try download.arrival.waitForAll()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.withLock { $0 }, .some(nil), "the download succeeded")
        XCTAssertEqual(server.requests.withLock { $0 }.count, 2, "the first stream stopped where the second began: no third")
        XCTAssertLessThan(server.sent.withLock { $0 }, size + 2048, "each byte sent about once")
        let all = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(all), (0..<size).map { UInt8($0 % 251) })
    }

    func testAShortAnswerFailsTheDownloadAndItsReaders() throws {
        let done = expectation(description: "the download ends")
        let outcome = Mutex<String?>(nil)
        let download = ContentDownload(row: 1, key: "k", contentVersion: 1, size: 10_000, path: "/nonexistent", chunkSize: 4096, stallTimeout: 30,
                                       retryDelays: [.zero, .zero],
                                       fetch: { range, progress in _ = progress(10); return 10 },
                                       ended: { download, failure in
                                           download.arrival.finish(failure.map { ProviderError(.ioError, $0, errno: EIO) })
                                           outcome.withLock { $0 = failure }
                                           done.fulfill()
                                       })
        download.start()
        XCTAssertThrowsError(try download.arrival.waitForAll())
        wait(for: [done], timeout: 30)
        let failure = outcome.withLock { $0 ?? "" }
        XCTAssertTrue(failure.contains("the server sent 10 bytes") && failure.contains("tried 3 times"), failure)
    }

    /// A fake object whose first request breaks off after 6,000 bytes (a connection reset).
    final class ResetOnce: Sendable {
        let requests = Mutex<[Int64]>([])
        let path: String
        init(path: String) { self.path = path }

        func fetch(_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Bool) async throws -> Int64 {
            let first = requests.withLock { r -> Bool in r.append(range.lowerBound); return r.count == 1 }
            let fd = open(path, O_WRONLY)
            defer { close(fd) }
            var offset = range.lowerBound
            while offset < range.upperBound {
                if first && offset - range.lowerBound >= 6000 { throw POSIXError(.ECONNRESET) }
                let end = min(range.upperBound, offset + 1000)
                let bytes = (offset..<end).map { UInt8($0 % 251) }
                _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
                offset = end
                if !progress(offset - range.lowerBound) { break }
            }
            return offset - range.lowerBound
        }
    }

    func testAStreamThatBreaksOffStartsAgainFromItsFirstChunkNotWrittenWhole() throws {
        let path = NSTemporaryDirectory() + "/reset-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let server = ResetOnce(path: path)
        let size: Int64 = 20_000
        let done = expectation(description: "the download ends")
        let outcome = Mutex<String??>(nil)
        let download = ContentDownload(row: 1, key: "k", contentVersion: 1, size: size, path: path, chunkSize: 4096, stallTimeout: 30,
                                       retryDelays: [.zero],
                                       fetch: { range, progress in try await server.fetch(range, progress) },
                                       ended: { download, failure in
                                           download.arrival.finish(failure.map { ProviderError(.ioError, $0, errno: EIO) })
                                           outcome.withLock { $0 = .some(failure) }
                                           done.fulfill()
                                       })
        download.start()
        try download.arrival.waitForAll()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.withLock { $0 }, .some(nil), "the download succeeded after one reset")
        XCTAssertEqual(server.requests.withLock { $0 }, [0, 4096], "started again at chunk 1 (chunk 0 was whole)")
        let all = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(all), (0..<size).map { UInt8($0 % 251) })
    }
}
