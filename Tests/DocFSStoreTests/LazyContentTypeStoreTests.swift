import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore

/// A copy through the mount (an import with attributes) into a folder no rule checks leaves the
/// file's type to its first reader; what that reader gets is what the import would have found,
/// and rules still see the detected type.
final class LazyContentTypeStoreTests: StoreTestCase {
    let layout = Layout(folders: [.init(path: "Photos", allowedContentTypes: ["public.image"])])
    let mounted = NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644)

    override func setUpWithError() throws {
        try super.setUpWithError()
        try XCTSkipIf(!FileManager.default.fileExists(atPath: "/usr/share/mime/magic"), "shared-mime-info is not installed")
        try makeStore(layout: layout)
    }

    func copyIn(_ name: String, _ bytes: [UInt8], into parent: ItemIdentifier = .rootContainer) async throws -> Item {
        try await store.importDocument(contents: bytes, named: name, toParentItemIdentifier: parent, attributes: mounted)
    }

    func refused(_ body: () async throws -> Void, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await body()
            XCTFail("expected typeNotAllowed", file: file, line: line)
        } catch let error as ProviderError {
            XCTAssertEqual(error.code, .typeNotAllowed, "\(error)", file: file, line: line)
        } catch {
            XCTFail("\(error)", file: file, line: line)
        }
    }

    func testTypeIsDetectedWhenAskedAndRulesSeeIt() async throws {
        let photos = try store.childItem(named: "Photos", in: .rootContainer).identifier
        // PNG bytes under a name that says nothing: the bytes decide, when asked.
        let picture = try await copyIn("picture", ContentTypeStoreTests.png)
        XCTAssertEqual(picture.contentType, LocalStore.undetectedType)
        XCTAssertEqual(store.contentType(of: picture), .png)
        XCTAssertEqual(store.contentType(of: try store.item(for: picture.identifier)), .png)
        let words = try await copyIn("notes.txt", Array("just words\n".utf8))
        XCTAssertEqual(store.contentType(of: words), .plainText)
        let empty = try await copyIn("empty.json", [])
        XCTAssertEqual(store.contentType(of: empty), .json)
        // The same after a remount: nothing stored a wrong type.
        try reopen()
        XCTAssertEqual(store.contentType(of: try store.item(for: picture.identifier)), .png)

        // A new name that says nothing keeps what the bytes said under the old name.
        let renamed = try await store.renameItem(withIdentifier: words.identifier, toName: "notes")
        XCTAssertEqual(store.contentType(of: renamed), .plainText)

        // A move into the image folder checks the detected type: text is refused, the PNG goes in.
        await refused {
            _ = try await self.store.reparentItem(
                withIdentifier: words.identifier, toParentItemWithIdentifier: photos,
                newName: nil, replacing: nil)
        }
        let moved = try await store.reparentItem(
            withIdentifier: picture.identifier, toParentItemWithIdentifier: photos,
            newName: nil, replacing: nil)
        XCTAssertEqual(store.contentType(of: moved), .png)

        // Where a rule applies, the import detects at once, and refuses what the rule refuses.
        await refused { _ = try await self.copyIn("more-words", Array("text\n".utf8), into: photos) }
        XCTAssertEqual(try store.childItem(named: "picture", in: photos).identifier, picture.identifier)
        let checked = try await copyIn("second", ContentTypeStoreTests.png, into: photos)
        XCTAssertEqual(checked.contentType, .png)
    }

    func testNewVersionIsDetectedWhenAsked() async throws {
        let file = try await copyIn("data", Array("text\n".utf8))
        XCTAssertEqual(store.contentType(of: file), .plainText)
        let staged = store.stagingDirectory.appendingPathComponent(UUID().uuidString)
        try Data(ContentTypeStoreTests.png).write(to: staged)
        let modified = try await store.modifyContents(ofItemWithIdentifier: file.identifier, from: staged)
        XCTAssertEqual(modified.contentType, LocalStore.undetectedType)
        XCTAssertEqual(store.contentType(of: modified), .png)
    }
}
