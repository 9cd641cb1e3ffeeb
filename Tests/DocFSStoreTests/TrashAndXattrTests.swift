import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore
#if canImport(Glibc)
    import Glibc
#endif

/// Issue 4, store side: trash (gathering on folder trash, restore under a name, origin),
/// stored extended attributes, and the security-scoped import.
final class LocalStoreTrashTests: StoreTestCase {
    func testTrashRemembersOriginAndRestores() async throws {
        try makeStore()
        let docs = try await mkdir("Docs")
        let file = try await importFile("a.txt", "A", into: docs.identifier)
        let trashed = try await store.trashItem(withIdentifier: file.identifier)
        XCTAssertEqual(trashed.parentIdentifier, .trashContainer)
        XCTAssertEqual(try names(in: docs.identifier), [])
        XCTAssertEqual(store.trashOrigin(of: file.identifier), TrashOrigin(parentIdentifier: docs.identifier, filename: "a.txt"))
        let restored = try await store.untrashItem(withIdentifier: file.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(restored.parentIdentifier, docs.identifier)
        XCTAssertEqual(try contents(of: file.identifier), "A")
        XCTAssertNil(store.trashOrigin(of: file.identifier))
    }

    func testSameNameTwiceGetsUniqueTrashNames() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "1")
        _ = try await store.trashItem(withIdentifier: a.identifier)
        let b = try await importFile("a.txt", "2")
        let second = try await store.trashItem(withIdentifier: b.identifier)
        XCTAssertEqual(second.filename, "a 2.txt")
        XCTAssertEqual(store.trashOrigin(of: b.identifier)?.filename, "a.txt")
        // Restoring both into the root: the second collides and is reported, not overwritten.
        _ = try await store.untrashItem(withIdentifier: a.identifier, toParentItemIdentifier: nil)
        await expectError(.filenameCollision) { try await self.store.untrashItem(withIdentifier: b.identifier, toParentItemIdentifier: nil) }
        XCTAssertEqual(try contents(of: a.identifier), "1")
        // …and can be restored under a name of its own.
        let renamed = try await store.untrashItem(withIdentifier: b.identifier, toParentItemIdentifier: .rootContainer, newName: "b.txt")
        XCTAssertEqual(renamed.filename, "b.txt")
        XCTAssertEqual(try names(), ["a.txt", "b.txt"])
        XCTAssertEqual(try names(in: .trashContainer), [])
    }

    /// rm -r with a trash: files are trashed one by one, then the emptied folders; each folder
    /// takes its trashed children with it, so the trash holds one tree.
    func testTrashingAFolderGathersWhatWasTrashedFromIt() async throws {
        try makeStore()
        let top = try await mkdir("top")
        let sub = try await mkdir("sub", in: top.identifier)
        let a = try await importFile("a.txt", "A", into: top.identifier)
        let b = try await importFile("b.txt", "B", into: sub.identifier)
        let loose = try await importFile("loose.txt", "L")
        _ = try await store.trashItem(withIdentifier: loose.identifier)
        _ = try await store.trashItem(withIdentifier: a.identifier)
        _ = try await store.trashItem(withIdentifier: b.identifier)
        XCTAssertEqual(try names(in: .trashContainer), ["a.txt", "b.txt", "loose.txt"])
        _ = try await store.trashItem(withIdentifier: sub.identifier)
        XCTAssertEqual(try names(in: .trashContainer), ["a.txt", "loose.txt", "sub"])
        XCTAssertEqual(try names(in: sub.identifier), ["b.txt"])
        _ = try await store.trashItem(withIdentifier: top.identifier)
        XCTAssertEqual(try names(in: .trashContainer), ["loose.txt", "top"])
        XCTAssertEqual(try names(in: top.identifier), ["a.txt", "sub"])
        XCTAssertEqual(try store.item(for: top.identifier).childItemCount, 2)
        XCTAssertEqual(try store.item(for: .trashContainer).childItemCount, 2)
        // It survives a reopen, and restoring the folder brings the whole tree back.
        try reopen()
        _ = try await store.untrashItem(withIdentifier: top.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(try names(), ["top"])
        XCTAssertEqual(try names(in: top.identifier), ["a.txt", "sub"])
        XCTAssertEqual(try contents(of: b.identifier), "B")
        XCTAssertEqual(try names(in: .trashContainer), ["loose.txt"])
    }

    func testDeleteFromTrashRemovesContentsAndAttributes() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "A")
        try await store.setExtendedAttribute(named: "user.k", to: Data("v".utf8), mode: .upsert, forItemIdentifier: a.identifier)
        _ = try await store.trashItem(withIdentifier: a.identifier)
        let content = store.contentURL(of: a.identifier)!.path
        XCTAssertTrue(FileManager.default.fileExists(atPath: content))
        try await store.deleteItem(withIdentifier: a.identifier)
        store.contents.reaper.drain() // contents are removed in the background
        XCTAssertFalse(FileManager.default.fileExists(atPath: content))
        try reopen()
        XCTAssertEqual(try names(in: .trashContainer), [])
        XCTAssertEqual(store.storedAttributeCount, 0)
    }
}

final class LocalStoreXattrTests: StoreTestCase {
    func testSetGetListRemoveAndPersist() async throws {
        try makeStore()
        let a = try await importFile("a.txt")
        XCTAssertEqual(try store.extendedAttributeNames(of: a.identifier), [])
        try await store.setExtendedAttribute(named: "user.color", to: Data("blue".utf8), mode: .upsert, forItemIdentifier: a.identifier)
        try await store.setExtendedAttribute(named: "user.bin", to: Data([0, 1, 2, 255]), mode: .create, forItemIdentifier: a.identifier)
        XCTAssertEqual(try store.extendedAttributeNames(of: a.identifier), ["user.bin", "user.color"])
        try reopen()
        XCTAssertEqual(try store.extendedAttribute(named: "user.color", of: a.identifier), Data("blue".utf8))
        XCTAssertEqual(try store.extendedAttribute(named: "user.bin", of: a.identifier), Data([0, 1, 2, 255]))
        try await store.setExtendedAttribute(named: "user.color", to: nil, mode: .upsert, forItemIdentifier: a.identifier)
        await expectError(.noSuchAttribute) { try self.store.extendedAttribute(named: "user.color", of: a.identifier) }
        try reopen()
        XCTAssertEqual(try store.extendedAttributeNames(of: a.identifier), ["user.bin"])
    }

    func testFlagsAndLimits() async throws {
        try makeStore()
        let a = try await importFile("a.txt")
        let id = a.identifier
        await expectError(.noSuchAttribute) {
            try await self.store.setExtendedAttribute(named: "user.x", to: Data("1".utf8), mode: .replace, forItemIdentifier: id)
        }
        await expectError(.noSuchAttribute) {
            try await self.store.setExtendedAttribute(named: "user.x", to: nil, mode: .upsert, forItemIdentifier: id)
        }
        try await store.setExtendedAttribute(named: "user.x", to: Data("1".utf8), mode: .create, forItemIdentifier: id)
        let exists = await expectError(.filenameCollision) {
            try await self.store.setExtendedAttribute(named: "user.x", to: Data("2".utf8), mode: .create, forItemIdentifier: id)
        }
        XCTAssertEqual(exists?.errno, EEXIST)
        try await store.setExtendedAttribute(named: "user.x", to: Data("3".utf8), mode: .replace, forItemIdentifier: id)
        XCTAssertEqual(try store.extendedAttribute(named: "user.x", of: id), Data("3".utf8))

        let big = Data(repeating: 7, count: ExtendedAttributes.maxValueBytes + 1)
        let e2big = await expectError(.invalidArgument) {
            try await self.store.setExtendedAttribute(named: "user.big", to: big, mode: .upsert, forItemIdentifier: id)
        }
        XCTAssertEqual(e2big?.errno, E2BIG)
        let chunk = Data(repeating: 1, count: ExtendedAttributes.maxValueBytes)
        let fits = ExtendedAttributes.maxBytesPerItem / ExtendedAttributes.maxValueBytes - 1
        for i in 0..<fits {
            try await store.setExtendedAttribute(named: "user.chunk\(i)", to: chunk, mode: .upsert, forItemIdentifier: id)
        }
        let full = await expectError(.noSpace) {
            try await self.store.setExtendedAttribute(named: "user.chunk\(fits)", to: chunk, mode: .upsert, forItemIdentifier: id)
        }
        XCTAssertEqual(full?.errno, ENOSPC)
        await expectError(.unsupported) {
            try await self.store.setExtendedAttribute(named: "security.selinux", to: Data("x".utf8), mode: .upsert, forItemIdentifier: id)
        }
        await expectError(.unsupported) {
            try await self.store.setExtendedAttribute(named: "user.docfs.tags", to: Data("x".utf8), mode: .upsert, forItemIdentifier: id)
        }
    }
}

/// A provider that keeps the URL it was handed and reads it after its import returned. Only the
/// reading members and the import: everything else is the protocol's defaults.
private final class LeakyProvider: Provider, @unchecked Sendable {
    let store: LocalStore
    nonisolated(unsafe) var kept: URL?
    init(store: LocalStore) { self.store = store }
    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item { try store.item(for: identifier) }
    func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item { try store.childItem(named: name, in: parent) }
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] { try store.enumerateItems(in: container) }
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 { try store.openContents(of: identifier) }
    var stagingDirectory: URL { store.stagingDirectory }
    /// Reads the file inside its window but does not take it: "answers at once, uploads later".
    func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try await file.withAccess { (url) async throws(ProviderError) -> Item in
            kept = url
            guard FileManager.default.contents(atPath: url.path) != nil else { throw ProviderError(.ioError, "cannot read inside the window") }
            return try store.item(for: parent)
        }
    }
}

final class SecurityScopedImportTests: StoreTestCase {
    /// Stages `text` under a sealed name, as the bridge does.
    func scoped(_ name: String, _ text: String) throws -> (SecurityScopedURL, String) {
        let sealed = store.stagingDirectory.appendingPathComponent("sealed-\(UUID().uuidString)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: sealed))
        return (try SecurityScopedURL(sealed: sealed, name: name, in: store.stagingDirectory), sealed)
    }

    func testReadableOnlyInsideTheWindow() throws {
        try makeStore()
        let (file, _) = try scoped("a.txt", "x")
        XCTAssertNil(FileManager.default.contents(atPath: file.url.path), "readable before start")
        XCTAssertTrue(file.startAccessingSecurityScopedResource())
        XCTAssertEqual(FileManager.default.contents(atPath: file.url.path), Data("x".utf8))
        file.stopAccessingSecurityScopedResource()
        XCTAssertNil(FileManager.default.contents(atPath: file.url.path), "readable after stop")
        file.finish()
        XCTAssertFalse(file.startAccessingSecurityScopedResource(), "a finished scope cannot be reopened")
        XCTAssertEqual(try directoryEntries(store.stagingDirectory.path), [], "nothing left in staging")
    }

    func testASealedPathWindowIsOneWindowAndKnowsWhenTheFileWasTaken() throws {
        try makeStore()
        let (file, sealed) = try scoped("a.txt", "x")
        let target = store.stagingDirectory.appendingPathComponent("taken").path
        try file.withSealedPath { (path) throws(ProviderError) in
            XCTAssertEqual(path, sealed)
            XCTAssertEqual(FileManager.default.contents(atPath: path), Data("x".utf8))
            XCTAssertFalse(file.startAccessingSecurityScopedResource(), "no second window meanwhile")
            XCTAssertEqual(rename(path, target), 0)
        }
        XCTAssertFalse(file.startAccessingSecurityScopedResource(), "taken: nothing left to open")
        file.finish()
        XCTAssertEqual(FileManager.default.contents(atPath: target), Data("x".utf8), "finish leaves what was taken alone")
        XCTAssertThrowsError(try file.withSealedPath { (_) throws(ProviderError) in }, "a finished scope")
        unlink(target)
    }

    /// A provider that says it moved the file spares the window's end its look; the scope then
    /// behaves as when the look finds the file gone.
    func testASealedWindowToldTheFileWasTakenCountsItAsTaken() throws {
        try makeStore()
        let (file, _) = try scoped("a.txt", "x")
        let target = store.stagingDirectory.path + "/taken-told"
        try file.withSealedPath { (path) throws(ProviderError) in
            XCTAssertEqual(rename(path, target), 0)
            file.noteMovedAway()
        }
        XCTAssertFalse(file.startAccessingSecurityScopedResource(), "taken: nothing left to open")
        file.finish()
        XCTAssertEqual(FileManager.default.contents(atPath: target), Data("x".utf8))
        unlink(target)
    }

    func testLocalStoreImportsThroughTheScopeWithoutACopy() async throws {
        try makeStore()
        let (file, sealed) = try scoped("a.txt", "hello")
        let before = inode(sealed)
        let item = try await store.importDocument(from: file, toParentItemIdentifier: .rootContainer)
        file.finish()
        XCTAssertEqual(item.filename, "a.txt")
        XCTAssertEqual(try contents(of: item.identifier), "hello")
        XCTAssertEqual(inode(store.contentURL(of: item.identifier)!.path), before, "moved (renamed), not copied")
        XCTAssertEqual(try directoryEntries(store.stagingDirectory.path), [])
    }

    func testAProviderReadingOutsideItsWindowGetsAnError() async throws {
        try makeStore()
        let leaky = LeakyProvider(store: store)
        let (file, sealed) = try scoped("a.txt", "secret")
        // The provider opens the window around its read (withAccess).
        _ = try await leaky.importDocument(from: file, toParentItemIdentifier: .rootContainer)
        let kept = try XCTUnwrap(leaky.kept)
        XCTAssertNil(FileManager.default.contents(atPath: kept.path), "readable after the window closed")
        XCTAssertEqual(open(kept.path, O_RDONLY), -1)
        XCTAssertEqual(errno, ENOENT)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sealed), "still sealed until the caller finishes")
        file.finish()
        XCTAssertFalse(FileManager.default.fileExists(atPath: sealed), "gone after the import completed")
        // Outside any window, even the default path refuses to hand the file over.
        let (late, _) = try scoped("b.txt", "x")
        late.finish()
        do {
            _ = try await leaky.importDocument(from: late, toParentItemIdentifier: .rootContainer)
            XCTFail("import from a finished scope succeeded")
        } catch {
            XCTAssertEqual(error.code, .noSuchItem)
        }
    }
}
