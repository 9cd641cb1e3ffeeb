import XCTest
import Foundation
import DocFSProvider
import GRDB
@testable import DocFSStore

/// Hard links and device nodes in the store: one item under several names, through reopenings
/// and `docfs check`.
final class HardLinkStoreTests: StoreTestCase {
    func testALinkIsTheSameItemUnderTwoNames() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        let d = try await mkdir("d")
        let b = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        XCTAssertEqual(b.identifier, a.identifier)
        XCTAssertEqual(b.filename, "b.txt")
        XCTAssertEqual(b.parentIdentifier, d.identifier)
        XCTAssertEqual(b.linkCount, 2)
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 2)
        let seen = try store.childItem(named: "b.txt", in: d.identifier)
        XCTAssertEqual(seen.identifier, a.identifier)
        XCTAssertEqual(try store.enumerateItems(in: d.identifier).map(\.filename), ["b.txt"])
        XCTAssertEqual(try store.enumerateItems(in: d.identifier).first?.identifier, a.identifier)
        // Contents and attributes are one: a new version and a chmod through either name.
        _ = try await store.modifyContents(ofItemWithIdentifier: b.identifier, from: stage("b.txt", "bravo"))
        XCTAssertEqual(try contents(of: try store.childItem(named: "b.txt", in: d.identifier).identifier), "bravo")
        _ = try await store.setAttributes(ofItemWithIdentifier: a.identifier, posixPermissions: 0o600, contentModificationDate: nil)
        XCTAssertEqual(try store.childItem(named: "b.txt", in: d.identifier).posixPermissions, 0o600)
        XCTAssertEqual(try store.childItem(named: "b.txt", in: d.identifier).documentSize, 5)
        try reopen()
        XCTAssertEqual(try store.childItem(named: "b.txt", in: d.identifier).identifier, a.identifier)
        XCTAssertEqual(try store.childItem(named: "a.txt", in: .rootContainer).linkCount, 2)
        XCTAssertEqual(try contents(of: a.identifier), "bravo")
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
    }

    func testFoldersAndTakenNamesAreRefused() async throws {
        try makeStore()
        let a = try await importFile("a.txt")
        let d = try await mkdir("d")
        await expectError(.notPermitted) {
            try await self.store.linkItem(withIdentifier: d.identifier, toParentItemIdentifier: .rootContainer, name: "e")
        }
        await expectError(.filenameCollision) {
            try await self.store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: .rootContainer, name: "d")
        }
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 1)
    }

    func testEachNameGoesAloneAndTheItemWithTheLast() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        let d = try await mkdir("d")
        _ = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        _ = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: .rootContainer, name: "c.txt")
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 3)
        // The item's own name goes: another name takes its place.
        try await store.removeName("a.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try names(), ["c.txt", "d"])
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 2)
        XCTAssertEqual(try contents(of: a.identifier), "alpha")
        // A move of one name, then over another item's name.
        let other = try await importFile("o.txt", "other")
        let moved = try await store.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .rootContainer, newName: "o.txt")
        XCTAssertEqual(moved.identifier, a.identifier)
        XCTAssertThrowsError(try store.item(for: other.identifier))
        XCTAssertEqual(try names(), ["c.txt", "d", "o.txt"])
        XCTAssertEqual(try names(in: d.identifier), [])
        try reopen()
        XCTAssertEqual(try store.childItem(named: "o.txt", in: .rootContainer).identifier, a.identifier)
        try await store.removeName("o.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 1)
        try await store.removeName("c.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertThrowsError(try store.item(for: a.identifier))
        XCTAssertEqual(try names(), ["d"])
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
        XCTAssertEqual(report.contentFiles, 0)
    }

    /// deleteItem (not the bridge's way for a linked file, but a provider's action) takes every
    /// name; a move over one name of a linked file must go through moveName.
    func testDeleteTakesEveryNameAndAPlainMoveLeavesNamesAlone() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        let d = try await mkdir("d")
        _ = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        let o = try await importFile("o.txt", "other")
        await expectError(.filenameCollision) {
            try await self.store.reparentItem(
                withIdentifier: o.identifier, toParentItemWithIdentifier: d.identifier,
                newName: "b.txt", replacing: a.identifier)
        }
        await expectError(.busy) {
            try await self.store.reparentItem(
                withIdentifier: o.identifier, toParentItemWithIdentifier: .rootContainer,
                newName: "a.txt", replacing: a.identifier)
        }
        try await store.deleteItem(withIdentifier: a.identifier)
        XCTAssertEqual(try names(), ["d", "o.txt"])
        XCTAssertEqual(try names(in: d.identifier), [])
        try reopen()
        XCTAssertEqual(try names(in: d.identifier), [])
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
    }

    func testCheckFindsAndMendsWrongCounts() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        _ = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: .rootContainer, name: "b.txt")
        store.close()
        store = nil
        let queue = try DatabaseQueue(path: storeURL.appendingPathComponent("store.sqlite").path)
        try queue.inDatabase { db in
            try db.execute(sql: "UPDATE item SET links = 5 WHERE name = 'a.txt'")
            try db.execute(
                sql:
                    "INSERT INTO item (parent, name, kind, contentType, created, modified, caps, perms, linkOf) VALUES (1, 'ghost', 0, 'public.data', 0, 0, 0, 420, 999)"
            )
        }
        try queue.close()
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(Set(found.problems.map(\.kind)), [.linkCount, .danglingName], "\(found.problems)")
        let mended = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(mended.isConsistent, "\(mended.remaining)")
        let again = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(again.isConsistent, "\(again.problems)")
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 2)
        XCTAssertEqual(try names(), ["a.txt", "b.txt"])
    }

    func testDeviceNodesKeepTheirNumbers() async throws {
        try makeStore()
        var attributes = NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644)
        attributes.deviceNumber = 0x0103 // makedev(1, 3)
        let node = try await store.createSpecialItem(
            withName: "null", kind: .characterDevice, inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(node.kind, .characterDevice)
        XCTAssertEqual(node.deviceNumber, 0x0103)
        XCTAssertThrowsError(try store.openContents(of: node.identifier))
        try reopen()
        let again = try store.childItem(named: "null", in: .rootContainer)
        XCTAssertEqual(again.kind, .characterDevice)
        XCTAssertEqual(again.deviceNumber, 0x0103)
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
    }

    /// One name of several goes to the trash with `moveName`: it still counts, remembers where it
    /// came from (whichever name it is), goes along with a trashed folder it came from, comes
    /// back, and its removal passes the origin on when it was the item's own name.
    func testANameGoesToTheTrashAndBack() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        let d = try await mkdir("d")
        _ = try await store.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        let trashed = try await store.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "b.txt")
        XCTAssertEqual([trashed.parentIdentifier, trashed.identifier], [.trashContainer, a.identifier])
        XCTAssertEqual(trashed.linkCount, 2, "a name in the trash is still a name")
        XCTAssertEqual(store.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: d.identifier, filename: "b.txt"))
        // Trashing its folder takes the name along; restoring the folder brings it back.
        _ = try await store.trashItem(withIdentifier: d.identifier)
        XCTAssertEqual(try store.enumerateItems(in: .trashContainer).map(\.filename), ["d"])
        XCTAssertEqual(try store.childItem(named: "b.txt", in: d.identifier).identifier, a.identifier)
        XCTAssertNil(store.trashOrigin(of: a.identifier))
        _ = try await store.untrashItem(withIdentifier: d.identifier, toParentItemIdentifier: .rootContainer, newName: "d")
        // The item's own name in the trash: the origin is its; removing it passes the place (and
        // a trashed name's origin) to another name.
        _ = try await store.moveName(
            "a.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "a.txt")
        _ = try await store.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "b2.txt")
        XCTAssertEqual(store.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: .rootContainer, filename: "a.txt"))
        try await store.removeName("a.txt", inParentItemIdentifier: .trashContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 1)
        XCTAssertEqual(store.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: d.identifier, filename: "b.txt"))
        _ = try await store.untrashItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, newName: "b.txt")
        XCTAssertNil(store.trashOrigin(of: a.identifier))
        try reopen()
        XCTAssertEqual(try contents(of: try store.childItem(named: "b.txt", in: d.identifier).identifier), "alpha")
        XCTAssertEqual(try store.enumerateItems(in: .trashContainer).map(\.filename), [])
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
    }
}
