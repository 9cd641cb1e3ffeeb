import Foundation
import Glibc
import Synchronization
import XCTest
@testable import DocFSBridge
import DocFSProvider

/// Opening a file for reading reads its folder's other small files ahead, once per folder in
/// 30 s, within the file and byte limits.
final class SiblingPrefetchTests: XCTestCase {
    private func file(_ id: String, in folder: String = "F", size: Int64) -> Item {
        Item(
            identifier: ItemIdentifier(id), parentIdentifier: ItemIdentifier(folder), filename: id, kind: .file,
            contentType: .data, documentSize: size, creationDate: Date(), contentModificationDate: Date(),
            capabilities: .all)
    }

    func testOpeningReadsTheOtherSmallFilesAheadOncePerWindow() throws {
        let content = FileManager.default.temporaryDirectory.appendingPathComponent("prefetch-\(getpid())").path
        FileManager.default.createFile(atPath: content, contents: Data("x".utf8))
        defer { unlink(content) }
        let siblings = [
            file("a", size: 10), file("b", size: 20), file("big", size: 2 << 20), file("empty", size: 0),
            Item(
                identifier: ItemIdentifier("sub"), parentIdentifier: ItemIdentifier("F"), filename: "sub", kind: .folder,
                contentType: .folder, creationDate: Date(), contentModificationDate: Date(), capabilities: .all),
            file("c", size: 30),
        ]
        let opened = Mutex<[String]>([])
        let prefetch = SiblingPrefetch(
            children: { $0 == ItemIdentifier("F") ? siblings : [] },
            openContents: { id in
                opened.withLock { $0.append(id.rawValue) }
                return open(content, O_RDONLY)
            })
        XCTAssertTrue(prefetch.opened(siblings[0], now: 100))
        prefetch.settle()
        XCTAssertEqual(opened.withLock { $0 }, ["b", "c"], "not the opened file, folders, empty or large files")
        XCTAssertFalse(prefetch.opened(siblings[1], now: 110), "the same folder again within 30 s")
        XCTAssertTrue(prefetch.opened(file("x", in: "G", size: 1), now: 110), "another folder")
        XCTAssertTrue(prefetch.opened(siblings[1], now: 131), "the folder again after 30 s")
        prefetch.settle()
        XCTAssertEqual(opened.withLock { $0 }, ["b", "c", "a", "c"])
    }

    func testThePlanStopsAtTheFileAndByteLimits() {
        let prefetch = SiblingPrefetch(children: { _ in [] }, openContents: { _ in nil })
        let many = (0..<300).map { file("f\($0)", size: 100) }
        XCTAssertEqual(prefetch.plan(many, skipping: ItemIdentifier("f0")).count, 256)
        let heavy = (0..<40).map { file("h\($0)", size: 1 << 20) }
        XCTAssertEqual(prefetch.plan(heavy, skipping: ItemIdentifier("none")).count, 16, "16 MiB in all")
    }
}
