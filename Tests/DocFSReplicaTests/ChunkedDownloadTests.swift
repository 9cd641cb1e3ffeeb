import XCTest
import Foundation
import Synchronization
import DocFSProvider
@testable import DocFSReplica

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
        gap.end(1) // stream 1's request failed or was dropped after chunk 0
        XCTAssertEqual(gap.begin(3), 1, "chunks 1-4: no stream reaches them now")

        var empty = ChunkPlan(size: 0, chunkSize: 100)
        XCTAssertEqual(empty.count, 0)
        XCTAssertNil(empty.begin(1))
        XCTAssertFalse(empty.want(0..<10))
    }

    /// A fake object (byte i is i % 251) sent in pieces of 1,000 bytes, written at their
    /// offsets. `holdingTheStart`: a request from byte 0 sends nothing until `held` is signalled
    /// (a slow server's first request). `resetAfter`: the first request breaks off after that
    /// many bytes (a connection reset).
    final class FakeObject: Sendable {
        let held = DispatchSemaphore(value: 0)
        let requests = Mutex<[Int64]>([])
        let sent = Mutex<Int64>(0)
        let path: String
        let holdingTheStart: Bool
        let resetAfter: Int64?

        init(path: String, holdingTheStart: Bool = false, resetAfter: Int64? = nil) {
            self.path = path
            self.holdingTheStart = holdingTheStart
            self.resetAfter = resetAfter
        }

        func fetch(_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Bool) async throws -> Int64 {
            let first = requests.withLock { r -> Bool in
                r.append(range.lowerBound); return r.count == 1
            }
            if holdingTheStart && range.lowerBound == 0 {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async {
                        self.held.wait(); c.resume()
                    }
                }
            }
            let fd = open(path, O_WRONLY)
            defer { close(fd) }
            var offset = range.lowerBound
            while offset < range.upperBound {
                if first, let resetAfter, offset - range.lowerBound >= resetAfter { throw POSIXError(.ECONNRESET) }
                let end = min(range.upperBound, offset + 1000)
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

    /// How a download ended: nil while it runs, .some(nil) for success, .some(why) for failure.
    final class Outcome: Sendable {
        let state = Mutex<String??>(nil)
    }

    /// A download of `size` bytes in chunks of 4 KiB; `outcome` is set when it ends, as the store
    /// does it: the readers hear of the end.
    func makeDownload(
        size: Int64, path: String, retryDelays: [Duration] = [.zero, .zero],
        fetch: @escaping ContentDownload.Fetch
    ) -> (ContentDownload, XCTestExpectation, Outcome) {
        let done = expectation(description: "the download ends")
        let outcome = Outcome()
        let download = ContentDownload(
            row: 1, key: "k", contentVersion: 1, size: size, path: path, chunkSize: 4096, stallTimeout: 30,
            retryDelays: retryDelays, fetch: fetch,
            ended: { download, failure in
                download.arrival.finish(failure.map { ProviderError(.ioError, $0, errno: EIO) })
                outcome.state.withLock { $0 = .some(failure) }
                done.fulfill()
            })
        return (download, done, outcome)
    }

    func temporaryFile() -> String {
        let path = NSTemporaryDirectory() + "/chunked-\(UUID().uuidString)"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testAReadFarIntoTheFileDoesNotWaitForTheBytesBeforeIt() throws {
        let path = temporaryFile()
        let server = FakeObject(path: path, holdingTheStart: true)
        let size: Int64 = 64 * 1024 + 10
        let (download, done, outcome) = makeDownload(size: size, path: path) { range, progress in try await server.fetch(range, progress) }
        download.start()

        // The stream from byte 0 is held; the last bytes still arrive, and right.
        try download.arrival.waitFor(size - 100..<size)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var tail = [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 100, off_t(size - 100)) }, 100)
        XCTAssertEqual(tail, (size - 100..<size).map { UInt8($0 % 251) })
        XCTAssertFalse(download.arrival.isFinished, "the first stream is still held")
        XCTAssertEqual(server.requests.withLock { $0.sorted() }, [0, 15 * 4096], "one stream from the start, one from the reader's first chunk")

        server.held.signal()
        try download.arrival.waitForAll()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.state.withLock { $0 }, .some(nil), "the download succeeded")
        XCTAssertEqual(server.requests.withLock { $0 }.count, 2, "the first stream stopped where the second began: no third")
        XCTAssertLessThan(server.sent.withLock { $0 }, size + 2048, "each byte sent about once")
        let all = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(all), (0..<size).map { UInt8($0 % 251) })
    }

    func testAShortAnswerFailsTheDownloadAndItsReaders() throws {
        let (download, done, outcome) = makeDownload(size: 10_000, path: "/nonexistent") { range, progress in
            _ = progress(10); return 10
        }
        download.start()
        XCTAssertThrowsError(try download.arrival.waitForAll())
        wait(for: [done], timeout: 30)
        let failure = outcome.state.withLock { $0 ?? nil } ?? ""
        XCTAssertTrue(failure.contains("the server sent 10 bytes") && failure.contains("tried 3 times"), failure)
    }

    func testAStreamThatBreaksOffStartsAgainFromItsFirstChunkNotWrittenWhole() throws {
        let path = temporaryFile()
        let server = FakeObject(path: path, resetAfter: 6000)
        let size: Int64 = 20_000
        let (download, done, outcome) = makeDownload(size: size, path: path, retryDelays: [.zero]) { range, progress in
            try await server.fetch(range, progress)
        }
        download.start()
        try download.arrival.waitForAll()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.state.withLock { $0 }, .some(nil), "the download succeeded after one reset")
        XCTAssertEqual(server.requests.withLock { $0 }, [0, 4096], "started again at chunk 1 (chunk 0 was whole)")
        let all = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(all), (0..<size).map { UInt8($0 % 251) })
    }
}
