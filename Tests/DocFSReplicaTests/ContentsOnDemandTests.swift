import XCTest
import Foundation
import Logging
import Synchronization
import DocFSProvider
@testable import DocFSStore
@testable import DocFSReplica

/// A download the test ends by hand: `finish` writes the bytes and reports the end.
final class ManualTransfer: ContentTransfer, @unchecked Sendable {
    let row: Int64
    let key: String
    let contentVersion: UInt64
    let size: Int64
    let path: String
    let arrival: ContentArrival
    private let ended: @Sendable (any ContentTransfer, String?) -> Void
    let started = Atomic<Bool>(false)

    init(_ request: ContentTransferRequest, ended: @escaping @Sendable (any ContentTransfer, String?) -> Void) {
        row = request.row
        key = request.key
        contentVersion = request.contentVersion
        size = request.size
        path = request.path
        arrival = ContentArrival(size: request.size, stallTimeout: 10)
        self.ended = ended
    }

    func start() { started.store(true, ordering: .relaxed) }

    func finish(_ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        arrival.arrived(0..<Int64(text.utf8.count))
        ended(self, nil)
    }
}

/// The transfers contents on demand asked for, in order.
final class MadeTransfers: Sendable {
    private let list = Mutex<[ManualTransfer]>([])
    func withLock<T>(_ body: (inout [ManualTransfer]) -> T) -> T { list.withLock { body(&$0) } }
}

/// Contents on demand's decisions (`ContentsOnDemand`) against the store in memory: what is
/// evicted first, what is kept and why, room made before a download, a download the item no
/// longer wants.
final class ContentsOnDemandTests: XCTestCase {
    var store: InMemoryReplicaStore!
    var onDemand: ContentsOnDemand!
    let made = MadeTransfers()

    override func setUp() async throws {
        store = try InMemoryReplicaStore()
        onDemand = ContentsOnDemand.attached(to: store, logger: Logger(label: "docfs.ondemand.tests"))
        onDemand.setTransfers { [made] request, ended in
            let transfer = ManualTransfer(request, ended: ended)
            made.withLock { $0.append(transfer) }
            return transfer
        }
    }

    override func tearDown() async throws {
        store.remove()
    }

    func id(_ row: Int64) -> ItemIdentifier { ItemIdentifier(String(row)) }
    func isHere(_ row: Int64) -> Bool { store.onDemandFile(row: row)?.isDownloaded == true }

    /// Opens and closes the file (a read), for the least-recently-used order.
    func read(_ row: Int64) throws {
        let opened = try onDemand.openContentsForReading(of: id(row))
        close(opened.fd)
        onDemand.contentsClosed(of: id(row))
    }

    func testEvictionGoesLeastRecentlyOpenedFirstAndStopsOnceEnoughWent() throws {
        for row: Int64 in [10, 11, 12] { try store.addServerFile(row, "f\(row)", size: 10, text: "0123456789") }
        for row: Int64 in [11, 10, 12] { try read(row) }
        onDemand.state.withLock { $0.limit = 25 }
        onDemand.evictToLimit(reserving: 0)
        XCTAssertEqual([10, 11, 12].map(isHere), [true, false, true], "the least recently opened goes, and only it")
        onDemand.state.withLock { $0.limit = 15 }
        onDemand.evictToLimit(reserving: 0)
        XCTAssertEqual([10, 11, 12].map(isHere), [false, false, true])
        XCTAssertEqual(onDemand.cacheFigures.local, 10)
        XCTAssertEqual(onDemand.transferFigures.evictedFiles, 2)
        XCTAssertEqual(onDemand.transferFigures.evictedBytes, 20)
    }

    func testPinnedOpenWaitingAndNotOnTheServerAreKeptWithTheirReasons() async throws {
        store.addServerFolder(20, "d")
        try store.addServerFile(21, "pinned", size: 5, text: "12345", in: 20)
        try store.addServerFile(22, "open", size: 5, text: "12345", in: 20)
        try store.addServerFile(23, "waiting", size: 5, text: "12345", in: 20)
        try store.addServerFile(24, "unsent", size: 5, text: "12345", key: nil, in: 20)
        try store.addServerFile(25, "free", size: 5, text: "12345", in: 20)
        try await onDemand.setPinned(true, forItemIdentifier: id(21))
        let opened = try onDemand.openContentsForReading(of: id(22))
        try store.write("67890", to: 23, base: 1)

        let evicted = try await onDemand.evictContents(ofItemWithIdentifier: id(20))
        XCTAssertEqual(evicted, 1)
        XCTAssertEqual([21, 22, 23, 24, 25].map(isHere), [true, true, true, true, false])
        for (row, reason) in [(21, "it is pinned"), (22, "it is open"), (23, "not on the server yet"), (24, "not on the server yet")] {
            do {
                _ = try await onDemand.evictContents(ofItemWithIdentifier: id(Int64(row)))
                XCTFail("\(row) was evicted")
            } catch {
                XCTAssertEqual(error.code, .busy, "\(row): \(error)")
                XCTAssertTrue(error.reason.contains(reason), "\(row): \(error.reason)")
            }
        }
        // Closed, it can go; a pinned folder pins what is below it.
        close(opened.fd)
        onDemand.contentsClosed(of: id(22))
        let closedEvicted = try await onDemand.evictContents(ofItemWithIdentifier: id(22))
        XCTAssertEqual(closedEvicted, 1)
        // Pinning the folder downloads what is below it and not here (one at a time) before it answers.
        let onDemand = self.onDemand!
        let pinning = Task { try await onDemand.setPinned(true, forItemIdentifier: ItemIdentifier("20")) }
        for done in 0..<2 {
            let deadline = ContinuousClock.now + .seconds(10)
            while made.withLock({ $0.count }) <= done, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            try XCTUnwrap(made.withLock { $0.count > done ? $0[done] : nil }, "download \(done + 1) began").finish("12345")
        }
        try await pinning.value
        XCTAssertEqual([22, 25].map(isHere), [true, true])
        XCTAssertTrue(onDemand.isPinnedRow(25))
        try await onDemand.setPinned(false, forItemIdentifier: id(20))
        XCTAssertFalse(onDemand.isPinnedRow(25))
        XCTAssertTrue(onDemand.isPinnedRow(21))
    }

    func testADownloadMakesRoomUnderTheLimitFirst() throws {
        try store.addServerFile(30, "old", size: 10, text: "0123456789")
        try store.addServerFile(31, "new", size: 10, text: "0123456789")
        try store.addServerFile(32, "there", size: 10, text: nil, key: "k32")
        try read(30)
        try read(31)
        onDemand.state.withLock { $0.limit = 20 }
        let opened = try onDemand.openContentsForReading(of: id(32))
        defer { close(opened.fd) }
        XCTAssertEqual([30, 31].map(isHere), [false, true], "the least recently opened went before the download began")
        let transfer = try XCTUnwrap(made.withLock { $0.first })
        XCTAssertTrue(transfer.started.load(ordering: .relaxed))
        XCTAssertEqual(transfer.key, "k32")
        XCTAssertEqual(onDemand.cacheFigures.downloading, 1)
        try transfer.finish("abcdefghij")
        try opened.arrival?.waitForAll()
        XCTAssertTrue(isHere(32))
        XCTAssertEqual(store.placedRows, [32])
        XCTAssertEqual(onDemand.cacheFigures.downloading, 0)
        XCTAssertEqual(onDemand.transferFigures.downloadedFiles, 1)
        var bytes = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(pread(opened.fd, &bytes, 16, 0), 10)
        XCTAssertEqual(String(decoding: bytes.prefix(10), as: UTF8.self), "abcdefghij")
        onDemand.contentsClosed(of: id(32))
    }

    func testADownloadWhoseItemChangedMeanwhileIsDropped() throws {
        try store.addServerFile(40, "changing", size: 4, text: nil, key: "k1")
        let opened = try onDemand.openContentsForReading(of: id(40))
        defer { close(opened.fd); onDemand.contentsClosed(of: id(40)) }
        let transfer = try XCTUnwrap(made.withLock { $0.first })
        store.replaceServerVersion(40, version: 2, key: "k2")
        try transfer.finish("old!")
        XCTAssertNoThrow(try opened.arrival?.waitForAll(), "its readers read what came")
        XCTAssertFalse(isHere(40), "the item wants version 2 now")
        XCTAssertEqual(store.placedRows, [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: transfer.path), "the staged file is removed")
        XCTAssertEqual(onDemand.cacheFigures.downloading, 0)
        // The next open downloads version 2.
        let again = try onDemand.openContentsForReading(of: id(40))
        close(again.fd)
        onDemand.contentsClosed(of: id(40))
        XCTAssertEqual(made.withLock { $0.last?.key }, "k2")
    }

    func testADownloadOfTheWrongSizeFailsItsReaders() throws {
        try store.addServerFile(50, "short", size: 8, text: nil, key: "k")
        let opened = try onDemand.openContentsForReading(of: id(50))
        defer { close(opened.fd); onDemand.contentsClosed(of: id(50)) }
        try XCTUnwrap(made.withLock { $0.first }).finish("four")
        XCTAssertThrowsError(try opened.arrival?.waitForAll()) { error in
            XCTAssertEqual((error as? ProviderError)?.errno, EIO, "\(error)")
        }
        XCTAssertFalse(isHere(50))
    }
}
