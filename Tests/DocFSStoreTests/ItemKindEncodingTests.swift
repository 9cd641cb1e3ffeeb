import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore

/// `ItemKind` is the one kind type of the provider, the store, the outbox and the server client;
/// three encodings of it are stored where other programs and older stores read them, so they are
/// pinned here: the store's `items.kind` column (the raw value), the outbox entries' JSON and the
/// server's `kind` column (both `storedName`, the server's words).
final class ItemKindEncodingTests: XCTestCase {
    static let all: [ItemKind] = [.file, .folder, .symlink, .fifo, .socket, .characterDevice, .blockDevice]

    func testRawValuesInTheStoresItemsTable() {
        XCTAssertEqual(Self.all.map(\.rawValue), [0, 1, 2, 3, 4, 5, 6])
        for kind in Self.all { XCTAssertEqual(ItemKind(rawValue: kind.rawValue), kind) }
    }

    func testWordsOfTheServerAndTheOutbox() {
        XCTAssertEqual(
            Self.all.map(\.storedName),
            ["file", "directory", "symlink", "fifo", "socket", "characterDevice", "blockDevice"])
        for kind in Self.all { XCTAssertEqual(ItemKind(storedName: kind.storedName), kind) }
        XCTAssertNil(ItemKind(storedName: "folder"))
        XCTAssertEqual(Self.all.filter(\.isReplicated), [.file, .folder, .symlink])
    }

    /// The JSON an outbox entry's details are stored as, written and read back as `Schema`
    /// does (sorted keys), and an entry an older docfs wrote still read.
    func testOutboxDetailsJSON() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for (kind, word) in [(ItemKind.file, "file"), (.folder, "directory"), (.symlink, "symlink")] {
            let json = String(decoding: try encoder.encode(OutboxDetails(kind: kind)), as: UTF8.self)
            XCTAssertEqual(json, "{\"kind\":\"\(word)\"}")
            XCTAssertEqual(try JSONDecoder().decode(OutboxDetails.self, from: Data(json.utf8)).kind, kind)
        }
        let older = #"{"contentVersion":1,"createdNs":5,"gid":0,"kind":"directory","mode":493,"modifiedNs":5,"uid":0}"#
        XCTAssertEqual(try JSONDecoder().decode(OutboxDetails.self, from: Data(older.utf8)).kind, .folder)
        XCTAssertThrowsError(try JSONDecoder().decode(OutboxDetails.self, from: Data(#"{"kind":"folder"}"#.utf8)))
    }
}
