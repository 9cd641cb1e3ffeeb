import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore

final class LayoutTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-layout-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    func write(_ text: String, to name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    static let sampleYAML = """
        trash: true
        types:
          - identifier: com.example.invoice
            conformsTo: [com.adobe.pdf]
            extensions: [invoice]
          - identifier: com.example.log
            conformsTo: [public.plain-text]
            extensions: [log]
            viewOnly: true
        folders:
          - path: Inbox
            capabilities: [read, enumerate, add]
            allowedContentTypes: [com.adobe.pdf, public.image]
            contents: [read, rename, delete, trash]
          - path: Archive
            capabilities: [read, enumerate]
            contents: [read]
          - path: Projects
          - path: /Projects/Team/
            contents: all
        """

    func testParsesYAML() throws {
        let layout = try Layout.load(from: write(Self.sampleYAML, to: "layout.yaml"))
        XCTAssertTrue(layout.trash)
        XCTAssertEqual(layout.types.count, 2)
        XCTAssertEqual(
            layout.types[0], Layout.TypeDeclaration(identifier: "com.example.invoice", conformsTo: ["com.adobe.pdf"], extensions: ["invoice"]))
        XCTAssertTrue(layout.types[1].viewOnly)
        XCTAssertEqual(layout.folders.map(\.path), ["Inbox", "Archive", "Projects", "Projects/Team"])
        let inbox = try XCTUnwrap(layout.folder(atPath: "Inbox"))
        XCTAssertEqual(try inbox.folderCapabilities, [.allowsReading, .allowsContentEnumerating, .allowsAddingSubItems])
        XCTAssertEqual(try inbox.contentsCapabilities, [.allowsReading, .allowsRenaming, .allowsDeleting, .allowsTrashing])
        XCTAssertEqual(inbox.allowedContentTypes, ["com.adobe.pdf", "public.image"])
        let projects = try XCTUnwrap(layout.folder(atPath: "Projects"))
        XCTAssertEqual(try projects.folderCapabilities, .all)
        XCTAssertEqual(try projects.contentsCapabilities, .all)
        XCTAssertNil(projects.allowedContentTypes)
        XCTAssertEqual(try layout.folder(atPath: "Projects/Team")?.contentsCapabilities, .all)
    }

    func testParsesJSON() throws {
        let json = """
            {"trash": false,
             "folders": [{"path": "Inbox", "capabilities": ["read", "enumerate"], "contents": ["read"]}],
             "types": [{"identifier": "com.example.deck", "conformsTo": ["com.apple.package"], "extensions": ["deck"]}]}
            """
        let layout = try Layout.load(from: write(json, to: "layout.json"))
        XCTAssertFalse(layout.trash)
        XCTAssertEqual(layout.folders, [Layout.Folder(path: "Inbox", capabilities: ["read", "enumerate"], contents: ["read"])])
        XCTAssertEqual(layout.types.first?.identifier, "com.example.deck")
    }

    func testEmptyFileIsEmptyLayout() throws {
        let layout = try Layout.load(from: write("", to: "empty.yaml"))
        XCTAssertEqual(layout, Layout())
    }

    func testBadCapabilityWordNamesFileLineAndWord() throws {
        let url = try write(
            """
            folders:
              - path: Inbox
                capabilities: [read, wirte]
            """, to: "bad.yaml")
        XCTAssertThrowsError(try Layout.load(from: url)) { error in
            let message = "\(error)"
            XCTAssertTrue(message.contains(url.path), message)
            XCTAssertTrue(message.contains("'wirte'"), message)
            XCTAssertTrue(message.contains("line 3"), message)
            XCTAssertTrue(message.contains("Inbox"), message)
        }
    }

    func testUnknownKeyIsNamed() throws {
        let url = try write(
            """
            folders:
              - path: Inbox
                capabilites: [read]
            """, to: "typo.yaml")
        XCTAssertThrowsError(try Layout.load(from: url)) { error in
            XCTAssertTrue("\(error)".contains("unknown key 'capabilites'"), "\(error)")
        }
        let top = try write("trashh: true\n", to: "top.yaml")
        XCTAssertThrowsError(try Layout.load(from: top)) { error in
            XCTAssertTrue("\(error)".contains("unknown key 'trashh'"), "\(error)")
        }
    }

    func testBadValuesAreRefused() throws {
        for (text, expected) in [
            ("trash: maybe\n", "'trash' must be true or false"),
            ("folders:\n  - capabilities: [read]\n", "'path' is missing"),
            ("folders:\n  - path: ../x\n", "'.' or '..'"),
            ("folders:\n  - path: A\n  - path: A/\n", "declared twice"),
            ("folders: [\n", "not valid YAML"),
            ("- just\n- a list\n", "expected a mapping"),
            ("types:\n  - extensions: [x]\n", "'identifier' is missing"),
        ] {
            let url = try write(text, to: "case.yaml")
            XCTAssertThrowsError(try Layout.load(from: url), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text) -> \(error)")
            }
        }
    }

    func testMissingFileNamesIt() {
        let url = directory.appendingPathComponent("nope.yaml")
        XCTAssertThrowsError(try Layout.load(from: url)) { error in
            XCTAssertTrue("\(error)".contains(url.path), "\(error)")
        }
    }

    func testCodableRoundTrip() throws {
        let layout = try Layout.parse(Self.sampleYAML)
        let data = try JSONEncoder().encode(layout)
        XCTAssertEqual(try JSONDecoder().decode(Layout.self, from: data), layout)
    }
}
