import XCTest
import Foundation
import Synchronization
import DocFSProvider
@testable import DocFSStore

/// Downloads in chunks, without a server: the order chunks are fetched in, and that a read far
/// into a file waits for its own chunk only, not for the ones before it.
final class ChunkedDownloadTests: XCTestCase {
    func testThePlanFetchesInOrderAndJumpsToAWaitingReader() {
        var plan = ChunkPlan(size: 10 * 100 + 1, chunkSize: 100)
        XCTAssertEqual(plan.count, 11)
        XCTAssertEqual(plan.range(of: 10), 1000..<1001, "the last chunk is short")
        XCTAssertEqual(plan.next(), 0)
        XCTAssertEqual(plan.next(), 1)
        // A reader at byte 750 for 100 bytes needs chunks 7 and 8: they go next, then on from there.
        XCTAssertTrue(plan.want(750..<850))
        XCTAssertFalse(plan.want(750..<850), "asked already")
        XCTAssertEqual(plan.next(), 7)
        XCTAssertEqual(plan.next(), 8)
        XCTAssertEqual(plan.next(), 9)
        XCTAssertEqual(plan.next(), 10)
        // Then the ones skipped, so the whole file arrives.
        XCTAssertEqual(plan.next(), 2)
        XCTAssertFalse(plan.want(0..<300), "chunks taken already are not asked again")
        XCTAssertEqual([plan.next(), plan.next(), plan.next(), plan.next()], [3, 4, 5, 6])
        XCTAssertNil(plan.next())
        XCTAssertEqual(plan.remaining, 0)
        XCTAssertFalse(plan.want(0..<1001))

        var empty = ChunkPlan(size: 0, chunkSize: 100)
        XCTAssertEqual(empty.count, 0)
        XCTAssertNil(empty.next())
        XCTAssertFalse(empty.want(0..<10))
    }

    /// A fake object of `size` bytes (byte i is i % 251) whose chunk 0 does not arrive until
    /// released, as a slow server's first request.
    final class SlowStart: Sendable {
        let held = DispatchSemaphore(value: 0)
        let fetched = Mutex<[Int64]>([])
        let path: String
        init(path: String) { self.path = path }

        func fetch(_ range: Range<Int64>, _ progress: @escaping @Sendable (Int64) -> Void) async throws -> Int64 {
            fetched.withLock { $0.append(range.lowerBound) }
            if range.lowerBound == 0 {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    DispatchQueue.global().async { self.held.wait(); c.resume() }
                }
            }
            let bytes = range.map { UInt8($0 % 251) }
            let fd = open(path, O_WRONLY)
            defer { close(fd) }
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(range.lowerBound)) }
            progress(Int64(n))
            return Int64(n)
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
                                       ended: { _, failure in outcome.withLock { $0 = .some(failure) }; done.fulfill() })
        download.start()

        // Chunk 0 is held; the last bytes still arrive, and right.
        try download.arrival.waitFor(size - 100 ..< size)
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        var tail = [UInt8](repeating: 0, count: 100)
        XCTAssertEqual(tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 100, off_t(size - 100)) }, 100)
        XCTAssertEqual(tail, (size - 100 ..< size).map { UInt8($0 % 251) })
        XCTAssertFalse(download.arrival.isFinished, "the first chunk is still held")
        XCTAssertEqual(server.fetched.withLock { $0.first }, 0, "fetching began at the start")
        XCTAssertTrue(server.fetched.withLock { $0.contains(size / 4096 * 4096) }, "the reader's chunk was fetched out of order")

        server.held.signal()
        try download.arrival.waitForAll()
        wait(for: [done], timeout: 30)
        XCTAssertEqual(outcome.withLock { $0 }, .some(nil), "the download succeeded")
        XCTAssertEqual(server.fetched.withLock { Set($0) }.count, 17, "every chunk once")
        let all = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(Array(all), (0..<size).map { UInt8($0 % 251) })
    }

    func testAShortChunkFailsTheDownloadAndItsReaders() throws {
        let done = expectation(description: "the download ends")
        let outcome = Mutex<String?>(nil)
        let download = ContentDownload(row: 1, key: "k", contentVersion: 1, size: 10_000, path: "/nonexistent", chunkSize: 4096, stallTimeout: 30,
                                       fetch: { range, progress in progress(10); return 10 },
                                       ended: { download, failure in
                                           // As the store does: the readers hear of the end.
                                           download.arrival.finish(failure.map { ProviderError(.ioError, $0, errno: EIO) })
                                           outcome.withLock { $0 = failure }
                                           done.fulfill()
                                       })
        download.start()
        XCTAssertThrowsError(try download.arrival.waitForAll())
        wait(for: [done], timeout: 30)
        XCTAssertTrue(outcome.withLock { $0 ?? "" }.contains("the server sent 10 bytes"), "\(String(describing: outcome.withLock { $0 }))")
    }
}
