import Foundation
import XCTest
import DocFSProvider
@testable import DocFSMemory
#if canImport(Glibc)
    import Glibc
#endif

final class MemoryProviderTests: XCTestCase {
    private var provider: MemoryProvider!
    private var counter = 0

    override func setUpWithError() throws {
        provider = try MemoryProvider()
    }

    override func tearDown() {
        provider?.close()
        provider = nil
    }

    // MARK: helpers

    /// A staged file in the provider's staging folder holding `bytes`.
    private func stage(_ bytes: [UInt8], name: String = "staged") throws -> URL {
        counter += 1
        let folder = provider.stagingDirectory.appendingPathComponent("t\(counter)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url
    }

    private func importFile(_ name: String, _ bytes: [UInt8], into parent: ItemIdentifier = .rootContainer) async throws -> Item {
        try await provider.importDocument(at: try stage(bytes, name: name), toParentItemIdentifier: parent)
    }

    private func contents(_ id: ItemIdentifier) throws -> [UInt8] {
        let fd = try provider.openContents(of: id)
        defer { close(fd) }
        return try Self.readAll(fd)
    }

    private static func readAll(_ fd: Int32) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(out.count)) }
            if n < 0 { throw ProviderError.posix(errno, "pread") }
            if n == 0 { return out }
            out += buffer[0..<n]
        }
    }

    private func names(_ folder: ItemIdentifier = .rootContainer) throws -> [String] {
        try provider.enumerateItems(in: folder).map(\.filename)
    }

    private func assertCode(
        _ code: ProviderError.Code, file: StaticString = #filePath, line: UInt = #line,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            XCTFail("expected \(code), got success", file: file, line: line)
        } catch let error as ProviderError {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
        } catch {
            XCTFail("expected a ProviderError \(code), got \(error)", file: file, line: line)
        }
    }

    // MARK: tests

    func testEmptyTreeHasRootAndTrash() throws {
        let root = try provider.item(for: .rootContainer)
        XCTAssertTrue(root.isFolder)
        XCTAssertEqual(root.childItemCount, 0)
        XCTAssertFalse(root.capabilities.contains(.allowsDeleting))
        XCTAssertEqual(try provider.item(for: .trashContainer).filename, ".Trash")
        XCTAssertEqual(try names(), [])
        var st = stat()
        XCTAssertEqual(stat(provider.stagingDirectory.path, &st), 0)
    }

    func testImportReadAndNewVersion() async throws {
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let item = try await importFile("notes.txt", bytes)
        XCTAssertEqual(item.filename, "notes.txt")
        XCTAssertEqual(item.kind, .file)
        XCTAssertEqual(item.contentType, .plainText)
        XCTAssertEqual(item.documentSize, Int64(bytes.count))
        XCTAssertEqual(try contents(item.identifier), bytes)
        XCTAssertEqual(try names(), ["notes.txt"])
        XCTAssertEqual(try provider.item(for: .rootContainer).childItemCount, 1)

        // A reader of the old version keeps it after a new version replaced it.
        let oldReader = try provider.openContents(of: item.identifier)
        defer { close(oldReader) }
        let staged = try stage([1, 2, 3])
        let modified = try await provider.modifyContents(ofItemWithIdentifier: item.identifier, from: staged)
        XCTAssertEqual(modified.documentSize, 3)
        XCTAssertEqual(modified.itemVersion.contentVersion, item.itemVersion.contentVersion + 1)
        XCTAssertGreaterThan(modified.itemVersion.metadataVersion, item.itemVersion.metadataVersion)
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path), "the staged file is taken")
        XCTAssertEqual(try contents(item.identifier), [1, 2, 3])
        XCTAssertEqual(try Self.readAll(oldReader), bytes)
        // The descriptor handed out is read-only.
        let fd = try provider.openContents(of: item.identifier)
        defer { close(fd) }
        var one: UInt8 = 9
        XCTAssertEqual(pwrite(fd, &one, 1, 0), -1)
    }

    func testScopedImportTakesAttributes() async throws {
        let url = try stage(Array("hello".utf8), name: "sealed-file")
        let scoped = try SecurityScopedURL(sealed: url.path, name: "a.json", in: provider.stagingDirectory)
        let mtime = FileTime(seconds: 1_600_000_000, nanoseconds: 123_456_789)
        let attributes = NewItemAttributes(ownerID: 1234, groupID: 5678, posixPermissions: 0o4640, modificationTime: mtime)
        let item = try await provider.importDocument(from: scoped, toParentItemIdentifier: .rootContainer, attributes: attributes)
        scoped.finish()
        XCTAssertEqual(item.filename, "a.json")
        XCTAssertEqual(item.contentType, .json)
        XCTAssertEqual(item.ownerID, 1234)
        XCTAssertEqual(item.groupID, 5678)
        XCTAssertEqual(item.posixPermissions, 0o4640)
        XCTAssertEqual(item.modificationTime, mtime)
        XCTAssertNotNil(item.accessTime)
        XCTAssertFalse(FileManager.default.fileExists(atPath: url.path))
        XCTAssertEqual(try contents(item.identifier), Array("hello".utf8))
    }

    func testImportFolderTree() async throws {
        let top = provider.stagingDirectory.appendingPathComponent("tree/Docs", isDirectory: true)
        try FileManager.default.createDirectory(at: top.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try Data("x".utf8).write(to: top.appendingPathComponent("sub/x.txt"))
        try FileManager.default.createSymbolicLink(atPath: top.appendingPathComponent("link").path, withDestinationPath: "sub/x.txt")
        let docs = try await provider.importDocument(at: top, toParentItemIdentifier: .rootContainer)
        XCTAssertTrue(docs.isFolder)
        XCTAssertEqual(try names(docs.identifier), ["link", "sub"])
        let docsNow = try provider.item(for: docs.identifier)
        XCTAssertEqual(docsNow.childItemCount, 2)
        XCTAssertEqual(docsNow.childFolderCount, 1)
        let link = try provider.childItem(named: "link", in: docs.identifier)
        XCTAssertEqual(link.kind, .symlink)
        XCTAssertEqual(link.symlinkTargetPath, "sub/x.txt")
        let sub = try provider.childItem(named: "sub", in: docs.identifier)
        XCTAssertEqual(try contents(try provider.childItem(named: "x.txt", in: sub.identifier).identifier), Array("x".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: top.path))
    }

    func testCreateRenameAndParentTimes() async throws {
        let before = try provider.item(for: .rootContainer)
        let folder = try await provider.createDirectory(withName: "Projects", inParentItemIdentifier: .rootContainer)
        let root = try provider.item(for: .rootContainer)
        XCTAssertGreaterThanOrEqual(root.modificationTime, before.modificationTime)
        XCTAssertGreaterThan(root.itemVersion.metadataVersion, before.itemVersion.metadataVersion)
        XCTAssertEqual(root.childFolderCount, 1)
        let file = try await importFile("a.txt", [65], into: folder.identifier)
        let renamed = try await provider.renameItem(withIdentifier: file.identifier, toName: "b.json")
        XCTAssertEqual(renamed.filename, "b.json")
        XCTAssertEqual(renamed.contentType, .json)
        XCTAssertGreaterThanOrEqual(renamed.changeTime, file.changeTime)
        XCTAssertEqual(try names(folder.identifier), ["b.json"])
        XCTAssertEqual(try provider.childItem(named: "b.json", in: folder.identifier).identifier, file.identifier)
        await assertCode(.noSuchItem) { _ = try self.provider.childItem(named: "a.txt", in: folder.identifier) }
        // Names are bytes: NFC and NFD are two names.
        _ = try await provider.createDirectory(withName: "caf\u{E9}", inParentItemIdentifier: .rootContainer)
        _ = try await provider.createDirectory(withName: "cafe\u{301}", inParentItemIdentifier: .rootContainer)
        XCTAssertEqual(try names().count, 3)
    }

    func testReparentReplacingAndErrors() async throws {
        let a = try await provider.createDirectory(withName: "A", inParentItemIdentifier: .rootContainer)
        let b = try await provider.createDirectory(withName: "B", inParentItemIdentifier: .rootContainer)
        let one = try await importFile("f", [1], into: a.identifier)
        let two = try await importFile("f", [2], into: b.identifier)
        await assertCode(.filenameCollision) {
            _ = try await self.provider.reparentItem(
                withIdentifier: one.identifier, toParentItemWithIdentifier: b.identifier,
                newName: nil, replacing: nil)
        }
        let moved = try await provider.reparentItem(
            withIdentifier: one.identifier, toParentItemWithIdentifier: b.identifier,
            newName: nil, replacing: two.identifier)
        XCTAssertEqual(moved.parentIdentifier, b.identifier)
        XCTAssertEqual(try contents(moved.identifier), [1])
        await assertCode(.noSuchItem) { _ = try self.provider.item(for: two.identifier) }
        XCTAssertEqual(try provider.item(for: a.identifier).childItemCount, 0)
        XCTAssertEqual(try provider.item(for: b.identifier).childItemCount, 1)
        // A folder may not move below itself; folders and files do not replace each other.
        let inner = try await provider.createDirectory(withName: "inner", inParentItemIdentifier: b.identifier)
        await assertCode(.invalidArgument) {
            _ = try await self.provider.reparentItem(
                withIdentifier: b.identifier, toParentItemWithIdentifier: inner.identifier,
                newName: nil, replacing: nil)
        }
        await assertCode(.isDirectory) {
            _ = try await self.provider.reparentItem(
                withIdentifier: one.identifier, toParentItemWithIdentifier: b.identifier,
                newName: "inner", replacing: inner.identifier)
        }
        await assertCode(.notDirectory) {
            _ = try await self.provider.reparentItem(
                withIdentifier: a.identifier, toParentItemWithIdentifier: one.identifier,
                newName: nil, replacing: nil)
        }
        // Replacing a non-empty folder.
        _ = try await provider.createDirectory(withName: "x", inParentItemIdentifier: inner.identifier)
        let other = try await provider.createDirectory(withName: "other", inParentItemIdentifier: a.identifier)
        await assertCode(.directoryNotEmpty) {
            _ = try await self.provider.reparentItem(
                withIdentifier: other.identifier, toParentItemWithIdentifier: b.identifier,
                newName: "inner", replacing: inner.identifier)
        }
    }

    func testDeleteAndErrors() async throws {
        let folder = try await provider.createDirectory(withName: "D", inParentItemIdentifier: .rootContainer)
        let file = try await importFile("f.txt", [1], into: folder.identifier)
        await assertCode(.directoryNotEmpty) { try await self.provider.deleteItem(withIdentifier: folder.identifier) }
        await assertCode(.notPermitted) { try await self.provider.deleteItem(withIdentifier: .rootContainer) }
        await assertCode(.filenameCollision) {
            _ = try await self.provider.createDirectory(withName: "D", inParentItemIdentifier: .rootContainer)
        }
        await assertCode(.notDirectory) {
            _ = try await self.provider.createDirectory(withName: "x", inParentItemIdentifier: file.identifier)
        }
        await assertCode(.isDirectory) { _ = try self.provider.openContents(of: folder.identifier) }
        await assertCode(.invalidName) { _ = try await self.provider.createDirectory(withName: "..", inParentItemIdentifier: .rootContainer) }
        await assertCode(.invalidName) { _ = try await self.provider.createDirectory(withName: "a/b", inParentItemIdentifier: .rootContainer) }
        await assertCode(.nameTooLong) {
            _ = try await self.provider.createDirectory(withName: String(repeating: "n", count: 256), inParentItemIdentifier: .rootContainer)
        }
        await assertCode(.noSuchItem) { _ = try self.provider.item(for: ItemIdentifier("999")) }
        let reader = try provider.openContents(of: file.identifier)
        defer { close(reader) }
        try await provider.deleteItem(withIdentifier: file.identifier)
        try await provider.deleteItem(withIdentifier: folder.identifier)
        XCTAssertEqual(try names(), [])
        XCTAssertEqual(try Self.readAll(reader), [1], "an open reader keeps the deleted contents")
    }

    func testTrashGatherAndUntrash() async throws {
        let docs = try await provider.createDirectory(withName: "Docs", inParentItemIdentifier: .rootContainer)
        let file = try await importFile("a.txt", [7], into: docs.identifier)
        let trashed = try await provider.trashItem(withIdentifier: file.identifier)
        XCTAssertEqual(trashed.parentIdentifier, .trashContainer)
        XCTAssertEqual(provider.trashOrigin(of: file.identifier), TrashOrigin(parentIdentifier: docs.identifier, filename: "a.txt"))
        // A second a.txt trashed from elsewhere gets a new name.
        let other = try await importFile("a.txt", [8])
        let otherTrashed = try await provider.trashItem(withIdentifier: other.identifier)
        XCTAssertEqual(otherTrashed.filename, "a 2.txt")
        // Trashing the folder takes its trashed file along.
        _ = try await provider.trashItem(withIdentifier: docs.identifier)
        XCTAssertEqual(try names(.trashContainer), ["Docs", "a 2.txt"])
        XCTAssertEqual(try names(docs.identifier), ["a.txt"])
        // Untrash goes back to where it came from.
        let restored = try await provider.untrashItem(withIdentifier: docs.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(restored.parentIdentifier, .rootContainer)
        XCTAssertEqual(try contents(try provider.childItem(named: "a.txt", in: docs.identifier).identifier), [7])
        await assertCode(.invalidArgument) {
            _ = try await self.provider.untrashItem(withIdentifier: docs.identifier, toParentItemIdentifier: nil)
        }
        let named = try await provider.untrashItem(withIdentifier: other.identifier, toParentItemIdentifier: docs.identifier, newName: "b.txt")
        XCTAssertEqual(named.filename, "b.txt")
        XCTAssertNil(provider.trashOrigin(of: other.identifier))
        XCTAssertEqual(try names(.trashContainer), [])
    }

    /// The plain untrash (`toParentItemIdentifier: nil`, built on the newName form): back to its
    /// folder under its old name, or to the root when that folder is in the trash itself.
    func testPlainUntrashFindsTheOriginOrTheRoot() async throws {
        let outer = try await provider.createDirectory(withName: "Outer", inParentItemIdentifier: .rootContainer)
        let inner = try await provider.createDirectory(withName: "Inner", inParentItemIdentifier: outer.identifier)
        let file = try await importFile("f.txt", [1], into: inner.identifier)
        _ = try await provider.trashItem(withIdentifier: file.identifier)
        let clash = try await importFile("f.txt", [2], into: inner.identifier)
        _ = try await provider.trashItem(withIdentifier: clash.identifier)
        // Inner is trashed and takes one f.txt along; the other stays loose in the trash,
        // renamed, with Inner (now in the trash) as its origin.
        _ = try await provider.trashItem(withIdentifier: inner.identifier)
        let loose = try provider.enumerateItems(in: .trashContainer).first { $0.kind == .file }
        let looseID = try XCTUnwrap(loose?.identifier)
        XCTAssertEqual(provider.trashOrigin(of: looseID)?.parentIdentifier, inner.identifier)
        let restored = try await provider.untrashItem(withIdentifier: looseID, toParentItemIdentifier: nil)
        XCTAssertEqual(restored.parentIdentifier, .rootContainer, "its folder is in the trash: the root")
        XCTAssertEqual(restored.filename, "f.txt", "under the name it had")
        let back = try await provider.untrashItem(withIdentifier: inner.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(back.parentIdentifier, outer.identifier)
        await assertCode(.noSuchItem) {
            _ = try await self.provider.untrashItem(withIdentifier: ItemIdentifier("nobody"), toParentItemIdentifier: nil)
        }
    }

    /// The plain import (built on the scoped, attributed one): the file is taken when the import
    /// succeeds and stays where it was when it is refused.
    func testPlainImportTakesTheFileOnlyWhenItSucceeds() async throws {
        _ = try await importFile("a.txt", [1])
        let staged = try stage([2], name: "a.txt")
        await assertCode(.filenameCollision) {
            _ = try await self.provider.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: staged.path), "a refused import leaves the file")
        await assertCode(.noSuchItem) {
            _ = try await self.provider.importDocument(at: staged.appendingPathExtension("missing"), toParentItemIdentifier: .rootContainer)
        }
        let folder = try await provider.createDirectory(withName: "F", inParentItemIdentifier: .rootContainer)
        let item = try await provider.importDocument(at: staged, toParentItemIdentifier: folder.identifier)
        XCTAssertEqual(try contents(item.identifier), [2])
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path), "an import takes the file")
        XCTAssertTrue(FileManager.default.fileExists(atPath: staged.deletingLastPathComponent().path), "but not its folder")
    }

    func testExtendedAttributes() async throws {
        let file = try await importFile("x", [1])
        try await provider.setExtendedAttribute(named: "user.color", to: Data("blue".utf8), mode: .upsert, forItemIdentifier: file.identifier)
        XCTAssertEqual(try provider.extendedAttribute(named: "user.color", of: file.identifier), Data("blue".utf8))
        XCTAssertEqual(try provider.extendedAttributeNames(of: file.identifier), ["user.color"])
        XCTAssertGreaterThan(try provider.item(for: file.identifier).itemVersion.metadataVersion, file.itemVersion.metadataVersion)
        await assertCode(.filenameCollision) {
            try await self.provider.setExtendedAttribute(named: "user.color", to: Data(), mode: .create, forItemIdentifier: file.identifier)
        }
        await assertCode(.noSuchAttribute) {
            try await self.provider.setExtendedAttribute(named: "user.size", to: Data(), mode: .replace, forItemIdentifier: file.identifier)
        }
        await assertCode(.noSuchAttribute) { _ = try self.provider.extendedAttribute(named: "user.size", of: file.identifier) }
        await assertCode(.unsupported) {
            try await self.provider.setExtendedAttribute(named: "user.docfs.tags", to: Data(), mode: .upsert, forItemIdentifier: file.identifier)
        }
        await assertCode(.invalidArgument) {
            try await self.provider.setExtendedAttribute(
                named: "user.big", to: Data(count: 16 * 1024 + 1), mode: .upsert,
                forItemIdentifier: file.identifier)
        }
        await assertCode(.noSpace) {
            for n in 0..<5 {
                try await self.provider.setExtendedAttribute(
                    named: "user.v\(n)", to: Data(count: 16 * 1024), mode: .upsert,
                    forItemIdentifier: file.identifier)
            }
        }
        try await provider.setExtendedAttribute(named: "user.color", to: nil, mode: .upsert, forItemIdentifier: file.identifier)
        XCTAssertFalse(try provider.extendedAttributeNames(of: file.identifier).contains("user.color"))
    }

    func testAttributesTagsAndSpecialItems() async throws {
        let file = try await importFile("x.txt", [1])
        let t = FileTime(seconds: 1_700_000_000, nanoseconds: 999_999_999)
        let changed = try await provider.setAttributes(
            ofItemWithIdentifier: file.identifier,
            changes: AttributeChanges(
                posixPermissions: 0o600, ownerID: 42, groupID: 43,
                modificationTime: t, accessTime: t))
        XCTAssertEqual(changed.posixPermissions, 0o600)
        XCTAssertEqual(changed.ownerID, 42)
        XCTAssertEqual(changed.groupID, 43)
        XCTAssertEqual(changed.modificationTime, t)
        XCTAssertEqual(changed.accessTime, t)
        XCTAssertGreaterThanOrEqual(changed.changeTime, file.changeTime)
        let tagged = try await provider.setTagData(Data("red".utf8), forItemIdentifier: file.identifier)
        XCTAssertEqual(tagged.tagData, Data("red".utf8))
        let ranked = try await provider.setFavoriteRank(5, forItemIdentifier: file.identifier)
        XCTAssertEqual(ranked.favoriteRank, 5)

        let attributes = NewItemAttributes(ownerID: 7, groupID: 8, posixPermissions: 0o640)
        let fifo = try await provider.createSpecialItem(
            withName: "pipe", kind: .fifo, inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(fifo.kind, .fifo)
        XCTAssertEqual(fifo.ownerID, 7)
        XCTAssertEqual(fifo.posixPermissions, 0o640)
        let socket = try await provider.createSpecialItem(
            withName: "sock", kind: .socket, inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(socket.kind, .socket)
        await assertCode(.invalidArgument) { _ = try self.provider.openContents(of: fifo.identifier) }
        await assertCode(.invalidArgument) {
            _ = try await self.provider.createSpecialItem(withName: "f", kind: .file, inParentItemIdentifier: .rootContainer, attributes: attributes)
        }
        let link = try await provider.createSymbolicLink(
            withName: "l", target: "x.txt", inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(link.posixPermissions, 0o777)
        XCTAssertEqual(link.documentSize, 5)
        await assertCode(.unsupported) {
            _ = try await self.provider.setAttributes(ofItemWithIdentifier: link.identifier, changes: AttributeChanges(posixPermissions: 0o600))
        }
        await assertCode(.invalidArgument) {
            _ = try await self.provider.createSymbolicLink(withName: "e", target: "", inParentItemIdentifier: .rootContainer)
        }
        XCTAssertEqual(try names(), ["l", "pipe", "sock", "x.txt"])
    }

    func testCapabilitiesAndFolderRules() async throws {
        provider = try MemoryProvider(
            capabilities: [.allowsReading, .allowsContentEnumerating, .allowsAddingSubItems],
            folders: [
                .init(
                    path: "Inbox/Mail", capabilities: [.allowsReading, .allowsContentEnumerating],
                    contents: [.allowsReading, .allowsDeleting])
            ])
        let inbox = try provider.childItem(named: "Inbox", in: .rootContainer)
        XCTAssertEqual(inbox.capabilities, [.allowsReading, .allowsContentEnumerating, .allowsAddingSubItems])
        let mail = try provider.childItem(named: "Mail", in: inbox.identifier)
        XCTAssertEqual(mail.capabilities, [.allowsReading, .allowsContentEnumerating])
        let file = try await importFile("m.txt", [1], into: mail.identifier)
        XCTAssertEqual(file.capabilities, [.allowsReading, .allowsDeleting])
        let sub = try await provider.createDirectory(withName: "sub", inParentItemIdentifier: mail.identifier)
        let nested = try await importFile("n.txt", [1], into: sub.identifier)
        XCTAssertEqual(nested.capabilities, [.allowsReading, .allowsDeleting])
        XCTAssertFalse(try provider.item(for: .rootContainer).capabilities.contains(.allowsWriting))
    }

    func testCloseRemovesStaging() throws {
        let staging = provider.stagingDirectory.path
        _ = try stage([1])
        provider.close()
        XCTAssertFalse(FileManager.default.fileExists(atPath: staging))
    }

    func testConcurrentImports() async throws {
        let folder = try await provider.createDirectory(withName: "C", inParentItemIdentifier: .rootContainer)
        let urls = try (0..<64).map { try stage([UInt8(truncatingIfNeeded: $0)], name: "f\($0)") }
        let provider = self.provider!
        try await withThrowingTaskGroup(of: Void.self) { group in
            for url in urls {
                group.addTask { _ = try await provider.importDocument(at: url, toParentItemIdentifier: folder.identifier) }
            }
            try await group.waitForAll()
        }
        XCTAssertEqual(try provider.item(for: folder.identifier).childItemCount, 64)
        for n in 0..<64 {
            XCTAssertEqual(try contents(try provider.childItem(named: "f\(n)", in: folder.identifier).identifier), [UInt8(n)])
        }
    }
}
