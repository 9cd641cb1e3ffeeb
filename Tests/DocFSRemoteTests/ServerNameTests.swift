import DocFSProvider
import DocFSWire
import DocFSRemote
import Foundation
import XCTest

/// Schema version 12 (`RemoteSchema+Links`): a file's further names are name rows the server
/// makes, moves and removes through `docfs_apply`, logs and lists; an item's own row and a name
/// row are each changed only by their own operations; a delete of an item that still has names
/// (from a replica that never saw them) passes it the oldest. Version 13: one name trashed and
/// restored alone, every field checked. Against the PostgreSQL `make test` starts.
final class ServerNameTests: XCTestCase {
    let attributes = ReplicatedAttributes(
        ownerID: 1000, groupID: 1000, posixPermissions: 0o644,
        creationTime: FileTime(totalNanoseconds: 1),
        modificationTime: FileTime(totalNanoseconds: 1))

    func link(_ db: RemoteDatabase, _ item: Int64, _ parent: Int64, _ name: String) async throws -> AppliedChange {
        try await db.applyOne(RemoteOperation(id: UUID(), .link(item: .item(item), parent: .item(parent), name: name)))
    }

    func testNamesAreMadeMovedAndRemovedAndADeletePassesTheItemItsOtherName() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            let docs = try await db.createItem(operationID: UUID(), parentID: root, name: "docs", kind: .folder, attributes: attributes).itemID
            _ = try await db.createItem(operationID: UUID(), parentID: docs, name: "b", kind: .folder, attributes: attributes)
            let file = try await db.createItem(
                operationID: UUID(), parentID: root, name: "a", kind: .file, attributes: attributes,
                content: try await db.recordedContent("a", size: 1)
            ).itemID

            let linked = try await link(db, file, docs, "b")
            XCTAssertEqual(linked.name, "b 2", "a name taken in the folder gets the usual suffix")
            let name = linked.itemID
            let row = try await db.items([name]).first
            XCTAssertEqual(row?.linkOf, file)
            let listed = try await db.children(of: docs).map(\.name)
            XCTAssertEqual(listed, ["b", "b 2"], "the listing holds the name")
            let logged = try await db.changes(since: 0).last?.kind
            XCTAssertEqual(logged, .link, "the change log carries it")

            let moved = try await db.applyOne(
                RemoteOperation(
                    id: UUID(),
                    .moveName(
                        name: .item(name), toParent: .item(root), newName: "c",
                        expectedParentID: docs, expectedName: "b 2")))
            XCTAssertEqual(moved.name, "c")
            do {
                _ = try await db.moveItem(operationID: UUID(), itemID: name, toParentID: docs, name: "x")
                XCTFail("a name row moved as an item")
            } catch RemoteError.invalid(let message) {
                XCTAssertTrue(message.contains("is a further name of item \(file)"), message)
            }
            do {
                _ = try await db.applyOne(RemoteOperation(id: UUID(), .unlink(name: .item(file))))
                XCTFail("an item unlinked as a name")
            } catch RemoteError.invalid(let message) {
                XCTAssertTrue(message.contains("is an item, not one of its further names"), message)
            }

            // A replica that never saw the name deletes the file: it stays, under its other name.
            _ = try await db.deleteItem(operationID: UUID(), itemID: file, expectedContentVersion: 1)
            let passed = try await db.items([file, name])
            let item = try XCTUnwrap(passed.first { $0.id == file }), gone = try XCTUnwrap(passed.first { $0.id == name })
            XCTAssertFalse(item.deleted)
            XCTAssertEqual(item.parentID, root)
            XCTAssertEqual(item.name, "c")
            XCTAssertTrue(gone.deleted)
            let kinds = try await db.changes(since: 0).suffix(2).map(\.kind)
            XCTAssertEqual(kinds, [.unlink, .delete])

            // A name made and removed; then the last name takes the file.
            let again = try await link(db, file, docs, "d").itemID
            _ = try await db.applyOne(RemoteOperation(id: UUID(), .unlink(name: .item(again))))
            let unlinked = try await db.item(again)?.deleted, kept = try await db.item(file)?.deleted
            XCTAssertEqual(unlinked, true)
            XCTAssertEqual(kept, false)
            _ = try await db.deleteItem(operationID: UUID(), itemID: file, expectedContentVersion: 1)
            let deleted = try await db.item(file)?.deleted
            XCTAssertEqual(deleted, true)
            do {
                _ = try await link(db, file, docs, "late")
                XCTFail("a link to a deleted file")
            } catch RemoteError.notFound(let id) {
                XCTAssertEqual(id, file)
            }
            // gc's trimming takes the tombstones of names (they refer to their file) with the rest.
            try await RemoteDatabaseTests.adminQuery(url, "UPDATE docfs_versions SET collected_ns = 1")
            try await db.trimChangeLog(before: Int64.max)
            let trimmed = try await db.trimHistory(before: Int64.max)
            XCTAssertGreaterThanOrEqual(trimmed.tombstones, 2, "both names' tombstones went")
        }
    }

    func testOneNameIsTrashedAndRestoredAloneAndBadValuesAreRefusedWithTheTreeUnharmed() async throws {
        try await RemoteDatabaseTests.withDatabase { db, _ in
            let root = try await db.rootID()
            let docs = try await db.createItem(operationID: UUID(), parentID: root, name: "docs", kind: .folder, attributes: attributes).itemID
            let gone = try await db.createItem(operationID: UUID(), parentID: root, name: "gone", kind: .folder, attributes: attributes).itemID
            _ = try await db.deleteItem(operationID: UUID(), itemID: gone, expectedContentVersion: nil)
            let file = try await db.createItem(
                operationID: UUID(), parentID: root, name: "a", kind: .file, attributes: attributes,
                content: try await db.recordedContent("a", size: 1)
            ).itemID
            let name = try await link(db, file, docs, "b").itemID

            // Refused as invalid (saying `words`) or, without words, as invalid or not found.
            func refused(_ change: RemoteOperation.Change, _ what: String, saying words: String?) async throws {
                let before = try await db.items([file, name, docs]).sorted { $0.id < $1.id }
                do {
                    _ = try await db.applyOne(RemoteOperation(id: UUID(), change))
                    XCTFail("\(what) was taken")
                } catch RemoteError.invalid(let message) {
                    if let words { XCTAssertTrue(message.contains(words), "\(what): \(message)") }
                } catch RemoteError.notFound {
                    XCTAssertNil(words, "\(what): refused as not found")
                }
                let after = try await db.items([file, name, docs]).sorted { $0.id < $1.id }
                XCTAssertEqual(after, before, "\(what): the tree is unharmed")
            }
            // Out of the trash before it is in it.
            try await refused(
                .untrash(item: .item(name), toParent: .item(docs), name: "b", types: nil), "an untrash of a live name",
                saying: "is not in the trash")

            let trashed = try await db.applyOne(RemoteOperation(id: UUID(), .trash(item: .item(name))))
            XCTAssertEqual(trashed.itemID, name)
            let inTrashRow = try await db.item(name)
            let inTrash = try XCTUnwrap(inTrashRow)
            XCTAssertNotNil(inTrash.trashTime, "the name is in the trash")
            XCTAssertEqual(inTrash.parentID, docs, "it keeps where it came from")
            XCTAssertEqual(inTrash.linkOf, file)
            let itemRow = try await db.item(file)
            let item = try XCTUnwrap(itemRow)
            XCTAssertNil(item.trashTime, "the item and its other name stay")
            let listed = try await db.children(of: docs).filter { $0.trashTime == nil && !$0.deleted }.map(\.name)
            XCTAssertEqual(listed, [], "the folder holds no live name")
            let logged = try await db.changes(since: 0).last
            XCTAssertEqual(logged?.kind, .trash)
            XCTAssertEqual(logged?.itemID, name)

            // Bad values: each refused, nothing changed.
            try await refused(
                .untrash(item: .item(name), toParent: .item(987_654), name: "b", types: nil), "an untrash to a missing folder",
                saying: nil)
            try await refused(
                .untrash(item: .item(name), toParent: .item(gone), name: "b", types: nil), "an untrash to a deleted folder",
                saying: nil)
            try await refused(
                .untrash(item: .item(name), toParent: .item(file), name: "b", types: nil), "an untrash into a file",
                saying: "is not a directory")
            try await refused(
                .untrash(item: .item(name), toParent: .item(docs), name: "x/y", types: nil), "an untrash to a bad name",
                saying: nil)
            // A name is never what brings a folder back from the trash.
            _ = try await db.trashItem(operationID: UUID(), itemID: docs)
            try await refused(
                .untrash(item: .item(name), toParent: .item(docs), name: "b", types: nil), "an untrash into a trashed folder",
                saying: "is in the trash")
            _ = try await db.untrashItem(operationID: UUID(), itemID: docs, toParentID: root, name: "docs")

            // Back where it was (a taken name gets the usual suffix); then trashed and removed alone.
            _ = try await db.createItem(
                operationID: UUID(), parentID: docs, name: "b", kind: .file, attributes: attributes,
                content: try await db.recordedContent("b", size: 1))
            let restored = try await db.applyOne(
                RemoteOperation(
                    id: UUID(),
                    .untrash(
                        item: .item(name), toParent: .item(docs),
                        name: "b", types: nil)))
            XCTAssertEqual(restored.name, "b 2")
            let backRow = try await db.item(name)
            let back = try XCTUnwrap(backRow)
            XCTAssertNil(back.trashTime)
            XCTAssertEqual(back.parentID, docs)
            _ = try await db.applyOne(RemoteOperation(id: UUID(), .trash(item: .item(name))))
            _ = try await db.applyOne(RemoteOperation(id: UUID(), .unlink(name: .item(name))))
            let removed = try await db.item(name)?.deleted, kept = try await db.item(file)
            XCTAssertEqual(removed, true)
            XCTAssertEqual(kept?.deleted, false)
            XCTAssertNil(kept?.trashTime)
        }
    }
}
