import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore

/// The store's content-type rules without a mount: admission by name, by bytes at import and at
/// modify, document validation, moves, package sizes, view-only types, layout checks.
final class ContentTypeStoreTests: StoreTestCase {
    static let png: [UInt8] =
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D] + Array("IHDR".utf8) + [0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0]

    let layout = Layout(
        types: [
            .init(identifier: "com.example.deck", conformsTo: ["com.apple.package"], extensions: ["deck"]),
            .init(identifier: "com.example.log", conformsTo: ["public.plain-text"], extensions: ["log"], viewOnly: true),
        ],
        folders: [
            .init(path: "Photos", allowedContentTypes: ["public.image"]),
            .init(path: "Notes", allowedContentTypes: ["public.text"]),
            .init(path: "Strict", allowedContentTypes: ["image/png"], subfolders: false),
        ])

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipIf(!FileManager.default.fileExists(atPath: "/usr/share/mime/magic"), "shared-mime-info is not installed")
        try makeStore(layout: layout)
    }

    func folder(_ name: String) throws -> ItemIdentifier { try store.childItem(named: name, in: .rootContainer).identifier }

    func stageBytes(_ name: String, _ bytes: [UInt8]) throws -> URL {
        let dir = store.stagingDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url
    }

    func contentFiles() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: storeURL.path + "/contents"))?.sorted() ?? []
    }

    func assertRefused(_ code: ProviderError.Code, _ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await body()
            XCTFail("expected \(code)", file: file, line: line)
        } catch let error as ProviderError {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    func testAdmissionByName() throws {
        let photos = try folder("Photos")
        XCTAssertNoThrow(try store.admitItem(named: "a.png", kind: .file, into: photos))
        XCTAssertNoThrow(try store.admitItem(named: "a.JPG", kind: .file, into: photos))
        XCTAssertNoThrow(try store.admitItem(named: "f000123", kind: .file, into: photos), "a name that says nothing waits for the bytes")
        XCTAssertNoThrow(try store.admitItem(named: "2024", kind: .folder, into: photos))
        XCTAssertThrowsError(try store.admitItem(named: "a.txt", kind: .file, into: photos)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .typeNotAllowed)
            XCTAssertTrue("\(error)".contains("type public.plain-text is not among the folder's allowed types [public.image]"), "\(error)")
        }
        XCTAssertThrowsError(try store.admitItem(named: "talk.deck", kind: .folder, into: photos))
        XCTAssertThrowsError(try store.admitItem(named: "link", kind: .symlink, into: photos))
        XCTAssertThrowsError(try store.admitItem(named: "sub", kind: .folder, into: try folder("Strict")))
        // Unrestricted folders take anything.
        XCTAssertNoThrow(try store.admitItem(named: "a.txt", kind: .file, into: .rootContainer))
    }

    func testImportByBytesLeavesNothingWhenRefused() async throws {
        let photos = try folder("Photos")
        let before = contentFiles()
        await assertRefused(.typeNotAllowed) {
            _ = try await self.store.importDocument(at: try self.stageBytes("f000123", Array("just words".utf8)), toParentItemIdentifier: photos)
        }
        await assertRefused(.typeNotAllowed) {
            _ = try await self.store.importDocument(at: try self.stageBytes("fake.png", Array("just words".utf8)), toParentItemIdentifier: photos)
        }
        XCTAssertEqual(contentFiles(), before)
        XCTAssertEqual(try names(in: photos), [])
        let item = try await store.importDocument(at: try stageBytes("f000124", Self.png), toParentItemIdentifier: photos)
        XCTAssertEqual(item.contentType, .png)
        XCTAssertEqual(item.documentSize, Int64(Self.png.count))
        XCTAssertEqual(store.supertypes(of: item.contentType), [.image, .data, .content, .item])
    }

    func testDocumentsAreValidatedInRestrictedFolders() async throws {
        let notes = try folder("Notes")
        await assertRefused(.corruptFile) {
            _ = try await self.store.importDocument(at: try self.stageBytes("latin1.txt", [0x47, 0x72, 0xFC, 0x0A]), toParentItemIdentifier: notes)
        }
        await assertRefused(.corruptFile) {
            _ = try await self.store.importDocument(at: try self.stageBytes("bad.json", Array("{".utf8)), toParentItemIdentifier: notes)
        }
        let empty = try await store.importDocument(at: try stageBytes("empty.json", []), toParentItemIdentifier: notes)
        XCTAssertEqual(empty.contentType, .json)
        let good = try await importFile("good.txt", "fine", into: notes)
        // A new version that is not UTF-8 is refused; the old one stays.
        let staged = try stageBytes("x", [0xFF, 0xFE])
        await assertRefused(.corruptFile) {
            _ = try await self.store.modifyContents(ofItemWithIdentifier: good.identifier, from: staged)
        }
        let fd = try store.openContents(of: good.identifier)
        var buf = [UInt8](repeating: 0, count: 16)
        let n = read(fd, &buf, 16)
        close(fd)
        XCTAssertEqual(Array(buf[0..<max(n, 0)]), Array("fine".utf8))
        // Unrestricted folders store bytes as they come.
        let latin = try await store.importDocument(
            at: try stageBytes("latin1.txt", [0x47, 0x72, 0xFC, 0x0A]), toParentItemIdentifier: .rootContainer)
        XCTAssertEqual(latin.contentType, .plainText)
    }

    func testMovesAreCheckedAndRenamesRetype() async throws {
        let photos = try folder("Photos")
        let text = try await importFile("a.txt", "hello")
        await assertRefused(.typeNotAllowed) {
            _ = try await self.store.reparentItem(withIdentifier: text.identifier, toParentItemWithIdentifier: photos, newName: nil, replacing: nil)
        }
        let dir = try await mkdir("mixed")
        _ = try await store.reparentItem(withIdentifier: text.identifier, toParentItemWithIdentifier: dir.identifier, newName: nil, replacing: nil)
        await assertRefused(.typeNotAllowed) {
            _ = try await self.store.reparentItem(withIdentifier: dir.identifier, toParentItemWithIdentifier: photos, newName: nil, replacing: nil)
        }
        // Renamed to .log (view-only): no writing; back to .txt: writable again.
        var renamed = try await store.renameItem(withIdentifier: text.identifier, toName: "a.log")
        XCTAssertEqual(renamed.contentType, ContentType("com.example.log"))
        XCTAssertFalse(renamed.capabilities.contains(.allowsWriting))
        renamed = try await store.renameItem(withIdentifier: text.identifier, toName: "a.txt")
        XCTAssertEqual(renamed.contentType, .plainText)
        XCTAssertTrue(renamed.capabilities.contains(.allowsWriting))
    }

    func testPackagesSumTheirContentsAndViewOnlyTypesAreNotWritable() async throws {
        let deck = try await mkdir("talk.deck")
        XCTAssertEqual(deck.contentType, ContentType("com.example.deck"))
        try await importFile("a.json", "{\"a\": 1}", into: deck.identifier)
        let media = try await mkdir("media", in: deck.identifier)
        try await importFile("b.txt", String(repeating: "x", count: 100), into: media.identifier)
        XCTAssertEqual(try store.item(for: deck.identifier).documentSize, 108)
        XCTAssertEqual(try store.childItem(named: "talk.deck", in: .rootContainer).documentSize, 108)
        XCTAssertEqual(try store.enumerateItems(in: .rootContainer).first { $0.filename == "talk.deck" }?.documentSize, 108)
        let log = try await importFile("server.log", "started")
        XCTAssertEqual(log.contentType, ContentType("com.example.log"))
        XCTAssertFalse(log.capabilities.contains(.allowsWriting))
        XCTAssertTrue(log.capabilities.contains(.allowsReading))
        XCTAssertEqual(store.supertypes(of: deck.contentType), [.package, .directory, .item])
    }

    func testLayoutWithUnknownAllowedTypeIsRefusedAtInit() throws {
        let other = directory.appendingPathComponent("other")
        XCTAssertThrowsError(try LocalStore.create(at: other, layout: Layout(folders: [.init(path: "In", allowedContentTypes: ["public.imge"])]))) {
            error in
            XCTAssertTrue("\(error)".contains("public.imge"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: other.appendingPathComponent("store.sqlite").path))
        XCTAssertNoThrow(
            try LocalStore.create(
                at: directory.appendingPathComponent("third"),
                layout: Layout(folders: [.init(path: "In", allowedContentTypes: ["image/png", "public.image"])])))
    }
}
