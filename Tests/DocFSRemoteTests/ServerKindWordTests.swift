import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSRemote

/// The server keeps an item's kind as a word in its `kind` column; the client speaks the
/// provider's `ItemKind` and must send and read exactly the server's three words.
final class ServerKindWordTests: XCTestCase {
    func testCreateSendsTheServersWord() throws {
        for (kind, word) in [(ServerItem.serverKind("file"), "file"), (.folder, "directory"), (.symlink, "symlink")] {
            let one = FileTime(totalNanoseconds: 1)
            let operation = RemoteOperation(
                id: UUID(),
                .create(
                    parent: .item(1), name: "n", kind: kind,
                    attributes: ReplicatedAttributes(creationTime: one, modificationTime: one),
                    content: nil))
            let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(RemoteDatabase.WireOperation(operation)))
            XCTAssertEqual((json as? [String: Any])?["item_kind"] as? String, word)
        }
    }

    func testServersWordsRead() {
        XCTAssertEqual(ServerItem.serverKind("file"), .file)
        XCTAssertEqual(ServerItem.serverKind("directory"), .folder)
        XCTAssertEqual(ServerItem.serverKind("symlink"), .symlink)
        // A word the server never writes reads as a file, as it always did.
        XCTAssertEqual(ServerItem.serverKind("fifo"), .file)
        XCTAssertEqual(ServerItem.serverKind("folder"), .file)
    }
}
