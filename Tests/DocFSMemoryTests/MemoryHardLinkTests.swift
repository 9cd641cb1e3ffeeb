import Foundation
import XCTest
import DocFSProvider
@testable import DocFSMemory
#if canImport(Glibc)
    import Glibc
#endif

/// Hard links and device nodes in the in-memory tree, as the store keeps them.
final class MemoryHardLinkTests: XCTestCase {
    private var provider: MemoryProvider!

    override func setUpWithError() throws { provider = try MemoryProvider() }
    override func tearDown() { provider?.close(); provider = nil }

    private func importFile(_ name: String, _ text: String, into parent: ItemIdentifier = .rootContainer) async throws -> Item {
        let folder = provider.stagingDirectory.appendingPathComponent(UUID().uuidString, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return try await provider.importDocument(at: url, toParentItemIdentifier: parent)
    }

    private func contents(_ id: ItemIdentifier) throws -> String {
        let fd = try provider.openContents(of: id)
        return String(decoding: FileHandle(fileDescriptor: fd, closeOnDealloc: true).readDataToEndOfFile(), as: UTF8.self)
    }

    private func names(_ folder: ItemIdentifier = .rootContainer) throws -> [String] {
        try provider.enumerateItems(in: folder).map(\.filename)
    }

    func testALinkIsTheSameItemUnderTwoNames() async throws {
        let a = try await importFile("a.txt", "alpha")
        let d = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer)
        let b = try await provider.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        XCTAssertEqual(b.identifier, a.identifier)
        XCTAssertEqual([b.filename, b.parentIdentifier.rawValue], ["b.txt", d.identifier.rawValue])
        XCTAssertEqual(b.linkCount, 2)
        XCTAssertEqual(try provider.childItem(named: "b.txt", in: d.identifier).identifier, a.identifier)
        XCTAssertEqual(try provider.enumerateItems(in: d.identifier).map(\.filename), ["b.txt"])
        XCTAssertEqual(try provider.item(for: d.identifier).childItemCount, 1)
        _ = try await provider.setAttributes(ofItemWithIdentifier: a.identifier, posixPermissions: 0o600, contentModificationDate: nil)
        XCTAssertEqual(try provider.childItem(named: "b.txt", in: d.identifier).posixPermissions, 0o600)
        XCTAssertEqual(try contents(b.identifier), "alpha")
        do {
            _ = try await provider.linkItem(withIdentifier: d.identifier, toParentItemIdentifier: .rootContainer, name: "e")
            XCTFail("a folder was linked")
        } catch { XCTAssertEqual(error.code, .notPermitted) }
        do {
            _ = try await provider.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: .rootContainer, name: "d")
            XCTFail("a taken name was linked")
        } catch { XCTAssertEqual(error.code, .filenameCollision) }
    }

    func testEachNameGoesAloneAndTheItemWithTheLast() async throws {
        let a = try await importFile("a.txt", "alpha")
        let d = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer)
        _ = try await provider.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        _ = try await provider.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: .rootContainer, name: "c.txt")
        try await provider.removeName("a.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try names(), ["c.txt", "d"])
        XCTAssertEqual(try provider.item(for: a.identifier).linkCount, 2)
        let other = try await importFile("o.txt", "other")
        let moved = try await provider.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .rootContainer, newName: "o.txt")
        XCTAssertEqual(moved.identifier, a.identifier)
        XCTAssertEqual(moved.filename, "o.txt")
        XCTAssertThrowsError(try provider.item(for: other.identifier))
        XCTAssertEqual(try names(), ["c.txt", "d", "o.txt"])
        XCTAssertEqual(try names(d.identifier), [])
        XCTAssertEqual(try provider.item(for: d.identifier).childItemCount, 0)
        try await provider.removeName("o.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try provider.item(for: a.identifier).linkCount, 1)
        try await provider.removeName("c.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertThrowsError(try provider.item(for: a.identifier))
        XCTAssertEqual(try names(), ["d"])
        XCTAssertEqual(try provider.item(for: .rootContainer).childItemCount, 1)
    }

    func testDeviceNodesKeepTheirNumbers() async throws {
        var attributes = NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644)
        attributes.deviceNumber = 0x0700
        let node = try await provider.createSpecialItem(
            withName: "loop", kind: .blockDevice, inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(node.kind, .blockDevice)
        XCTAssertEqual(try provider.childItem(named: "loop", in: .rootContainer).deviceNumber, 0x0700)
        XCTAssertThrowsError(try provider.openContents(of: node.identifier))
    }

    /// One name of several in the trash and back, as the store keeps it (HardLinkStoreTests).
    func testANameGoesToTheTrashAndBack() async throws {
        let a = try await importFile("a.txt", "alpha")
        let d = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer)
        _ = try await provider.linkItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, name: "b.txt")
        let trashed = try await provider.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "b.txt")
        XCTAssertEqual([trashed.parentIdentifier, trashed.identifier], [.trashContainer, a.identifier])
        XCTAssertEqual(trashed.linkCount, 2, "a name in the trash is still a name")
        XCTAssertEqual(provider.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: d.identifier, filename: "b.txt"))
        _ = try await provider.trashItem(withIdentifier: d.identifier)
        XCTAssertEqual(try names(.trashContainer), ["d"])
        XCTAssertEqual(try provider.childItem(named: "b.txt", in: d.identifier).identifier, a.identifier)
        XCTAssertNil(provider.trashOrigin(of: a.identifier))
        _ = try await provider.untrashItem(withIdentifier: d.identifier, toParentItemIdentifier: .rootContainer, newName: "d")
        _ = try await provider.moveName(
            "a.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "a.txt")
        _ = try await provider.moveName(
            "b.txt", inParentItemIdentifier: d.identifier, ofItemWithIdentifier: a.identifier,
            toParentItemIdentifier: .trashContainer, newName: "b2.txt")
        XCTAssertEqual(provider.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: .rootContainer, filename: "a.txt"))
        try await provider.removeName("a.txt", inParentItemIdentifier: .trashContainer, ofItemWithIdentifier: a.identifier)
        XCTAssertEqual(try provider.item(for: a.identifier).linkCount, 1)
        XCTAssertEqual(provider.trashOrigin(of: a.identifier), TrashOrigin(parentIdentifier: d.identifier, filename: "b.txt"))
        _ = try await provider.untrashItem(withIdentifier: a.identifier, toParentItemIdentifier: d.identifier, newName: "b.txt")
        XCTAssertNil(provider.trashOrigin(of: a.identifier))
        XCTAssertEqual(try contents(try provider.childItem(named: "b.txt", in: d.identifier).identifier), "alpha")
        XCTAssertEqual(try names(.trashContainer), [])
    }
}
