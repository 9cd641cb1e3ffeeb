import Foundation
import XCTest
@testable import DocFSContentTypes
@testable import DocFSProvider

/// Real bytes of the built-in types.
enum Samples {
    static func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }
    /// A 1×1 grey PNG.
    static let png = hex(
        "89504e470d0a1a0a0000000d49484452000000010000000108000000003a7e9b550000000a49444154789c636000000002000148afa4710000000049454e44ae426082")
    /// The start of a JFIF JPEG.
    static let jpeg: [UInt8] =
        [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]
    static let pdf = Array("%PDF-1.4\n%\u{e2}\u{e3}\u{cf}\u{d3}\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n".utf8)
    /// A zip holding a.txt.
    static let zip = hex(
        "504b03041400000000004b19765d7a7a6fed030000000300000005000000612e74787468690a504b010214031400000000004b19765d7a7a6fed0300000003000000050000000000000000000000800100000000612e747874504b0506000000000100010033000000260000000000"
    )
    static let json = Array(#"{"name": "docfs", "tags": ["a", "b"], "size": 3}"#.utf8)
    static let utf8Text = Array("Grüße aus dem Dateisystem — ✓\n".utf8)
    /// Latin-1 "Grüße": not UTF-8.
    static let latin1Text: [UInt8] = [0x47, 0x72, 0xFC, 0xDF, 0x65, 0x0A]
    static let html = Array("<!DOCTYPE html>\n<html><body>hi</body></html>\n".utf8)
    static let xml = Array("<?xml version=\"1.0\"?>\n<root/>\n".utf8)
    static let binary: [UInt8] = (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }
}

final class ContentTypeRegistryTests: XCTestCase {
    let registry = ContentTypeRegistry.standard

    func testConformanceOfBuiltIns() {
        let cases: [(ContentType, ContentType)] = [
            (.png, .image), (.png, .data), (.png, .content), (.png, .item),
            (.jpeg, .image), (.gif, .image), (.svg, .image),
            (.json, .text), (.json, .data), (.json, .content),
            (.plainText, .text), (.utf8PlainText, .plainText), (.utf8PlainText, .text),
            (.xml, .text), (.html, .text), (.xhtml, .html), (.xhtml, .xml),
            (.sourceCode, .plainText), (.swiftSource, .sourceCode), (.shellScript, .script), (.log, .plainText),
            (.pdf, .data), (.pdf, .compositeContent), (.pdf, .content),
            (.zip, .archive), (.zip, .data), (.gzip, .archive),
            (.folder, .directory), (.package, .directory), (.directory, .item),
            (.symbolicLink, .item), (.mp3, .audio), (.mp3, .audiovisualContent), (.mpeg4Movie, .movie),
        ]
        for (type, parent) in cases {
            XCTAssertTrue(registry.conforms(type, to: parent), "\(type) should conform to \(parent)")
        }
        let not: [(ContentType, ContentType)] = [
            (.image, .png), (.png, .text), (.json, .plainText), (.plainText, .json), (.pdf, .image),
            (.pdf, .text), (.zip, .directory), (.folder, .package), (.package, .data), (.text, .image),
            (.symbolicLink, .data), (.data, .content),
        ]
        for (type, parent) in not {
            XCTAssertFalse(registry.conforms(type, to: parent), "\(type) should not conform to \(parent)")
        }
        XCTAssertTrue(registry.conforms(.png, toAnyOf: [.pdf, .image]))
        XCTAssertFalse(registry.conforms(.plainText, toAnyOf: [.pdf, .image]))
    }

    func testSupertypesAreNearestFirst() {
        XCTAssertEqual(registry.supertypes(of: .png), [.image, .data, .content, .item])
        XCTAssertEqual(registry.supertypes(of: .utf8PlainText).prefix(2), [.plainText, .text])
        XCTAssertEqual(registry.supertypes(of: ContentType("org.example.unknown")), [.item])
        XCTAssertEqual(registry.supertypes(of: .item), [])
    }

    func testExtensionsAndMIMETypes() {
        XCTAssertEqual(registry.type(forFilenameExtension: "PNG"), .png)
        XCTAssertEqual(registry.type(forFilenameExtension: "jpg"), .jpeg)
        XCTAssertEqual(registry.type(forFilenameExtension: "pdf"), .pdf)
        XCTAssertEqual(registry.type(forMIMEType: "image/png"), .png)
        XCTAssertEqual(registry.type(forMIMEType: "application/json; charset=utf-8"), .json)
        XCTAssertEqual(registry.preferredMIMEType(for: .pdf), "application/pdf")
        XCTAssertEqual(registry.preferredFilenameExtension(for: .jpeg), "jpeg")
        XCTAssertEqual(registry.type(forFilename: "archive.tar.gz"), .gzip)
        XCTAssertNil(registry.type(forFilename: ".profile"))
        XCTAssertNil(registry.type(forFilename: "README"))
    }

    func testUserTypes() {
        let registry = ContentTypeRegistry(declarations: [
            ContentTypeDeclaration(
                ContentType("com.example.invoice"), conformsTo: [.pdf], extensions: ["invoice"],
                mimeTypes: ["application/x-invoice"]),
            ContentTypeDeclaration(ContentType("com.example.deck"), conformsTo: [.package], extensions: [".Deck"]),
            ContentTypeDeclaration(ContentType("com.example.log"), conformsTo: [.plainText], extensions: ["log"], viewOnly: true),
            ContentTypeDeclaration(ContentType("com.example.blob"), extensions: ["blob"]),
        ])
        let invoice = ContentType("com.example.invoice")
        XCTAssertTrue(registry.conforms(invoice, to: .pdf))
        XCTAssertTrue(registry.conforms(invoice, to: .compositeContent))
        XCTAssertEqual(registry.type(forFilename: "march.invoice"), invoice)
        XCTAssertEqual(registry.type(forMIMEType: "application/x-invoice"), invoice)
        XCTAssertEqual(registry.type(forFilename: "talk.deck", userTypesOnly: true), ContentType("com.example.deck"))
        XCTAssertTrue(registry.isPackage(ContentType("com.example.deck")))
        XCTAssertFalse(registry.isPackage(.folder))
        // A user extension wins over the built-in one.
        XCTAssertEqual(registry.type(forFilename: "server.log"), ContentType("com.example.log"))
        XCTAssertTrue(registry.isViewOnly(ContentType("com.example.log")))
        XCTAssertFalse(registry.isViewOnly(.plainText))
        // A type declared with no parents is data.
        XCTAssertTrue(registry.conforms(ContentType("com.example.blob"), to: .data))
        XCTAssertEqual(registry.supertypes(of: ContentType("com.example.deck")), [.package, .directory, .item])
    }
}

final class SharedMimeDatabaseTests: XCTestCase {
    let database = SharedMimeDatabase.system

    override func setUpWithError() throws {
        try XCTSkipIf(database.isEmpty, "no shared-mime-info database (install shared-mime-info: make deps)")
    }

    func testGlobs() {
        XCTAssertEqual(database.mimeTypes(forFilename: "photo.png"), ["image/png"])
        XCTAssertEqual(database.mimeTypes(forFilename: "PHOTO.JPG"), ["image/jpeg"])
        XCTAssertEqual(database.mimeTypes(forFilename: "report.pdf"), ["application/pdf"])
        XCTAssertEqual(database.mimeTypes(forFilename: "notes.txt"), ["text/plain"])
        XCTAssertTrue(database.mimeTypes(forFilename: "data.json").contains("application/json"))
        // The longest pattern wins: *.tar.gz over *.gz.
        XCTAssertEqual(database.mimeTypes(forFilename: "src.tar.gz"), ["application/x-compressed-tar"])
        // Literal names.
        XCTAssertEqual(database.mimeTypes(forFilename: "Makefile"), ["text/x-makefile"])
        XCTAssertEqual(database.mimeTypes(forFilename: "f000123"), [])
        XCTAssertEqual(database.mimeTypes(forFilename: ""), [])
    }

    func testMagic() {
        func sniff(_ bytes: [UInt8]) -> String? { bytes.withUnsafeBytes { database.sniff($0)?.mimeType } }
        XCTAssertEqual(sniff(Samples.png), "image/png")
        XCTAssertEqual(sniff(Samples.jpeg), "image/jpeg")
        XCTAssertEqual(sniff(Samples.pdf), "application/pdf")
        XCTAssertEqual(sniff(Samples.zip), "application/zip")
        XCTAssertEqual(sniff(Samples.html), "text/html")
        XCTAssertNil(sniff([]))
        XCTAssertTrue(database.magicExtent > 0 && database.magicExtent < 1 << 20)
        Samples.png.withUnsafeBytes { XCTAssertEqual(database.magicMatches("image/png", $0), true) }
        Samples.pdf.withUnsafeBytes { XCTAssertEqual(database.magicMatches("image/png", $0), false) }
    }

    func testHierarchy() {
        XCTAssertTrue(database.isSubclass("image/svg+xml", of: "application/xml"))
        XCTAssertTrue(database.isSubclass("image/svg+xml", of: "text/plain"))
        XCTAssertTrue(database.isSubclass("text/x-csrc", of: "text/plain"))
        XCTAssertTrue(database.isSubclass("image/png", of: "application/octet-stream"))
        XCTAssertFalse(database.isSubclass("image/png", of: "application/octet-stream", implicitOctetStream: false))
        XCTAssertFalse(database.isSubclass("application/pdf", of: "text/plain"))
        XCTAssertEqual(database.canonical("application/acrobat"), "application/pdf")
    }

    func testLooksLikeText() {
        XCTAssertTrue(Samples.utf8Text.withUnsafeBytes { SharedMimeDatabase.looksLikeText($0) })
        XCTAssertTrue(Samples.json.withUnsafeBytes { SharedMimeDatabase.looksLikeText($0) })
        XCTAssertFalse(Samples.binary.withUnsafeBytes { SharedMimeDatabase.looksLikeText($0) })
        XCTAssertFalse(Samples.png.withUnsafeBytes { SharedMimeDatabase.looksLikeText($0) })
        XCTAssertFalse(Samples.latin1Text.withUnsafeBytes { SharedMimeDatabase.looksLikeText($0) })
    }

    func testParsesNestedRulesAndMasks() {
        var magic = Array("MIME-Magic\0\n".utf8)
        // [50:application/x-test]  >0="AB" with child 1>4="CD"; >10="X"&"\xDF"+4 (case-folding mask, range)
        magic += Array("[50:application/x-test]\n>0=".utf8) + [0, 2] + Array("AB\n".utf8)
        magic += Array("1>4=".utf8) + [0, 2] + Array("CD\n".utf8)
        magic += Array(">10=".utf8) + [0, 1] + Array("X&".utf8) + [0xDF] + Array("+4\n".utf8)
        let sections = SharedMimeDatabase.parseMagic(magic)
        XCTAssertEqual(sections.count, 1)
        XCTAssertEqual(sections.first?.rules.count, 2)
        XCTAssertEqual(sections.first?.rules.first?.children.count, 1)
        func matches(_ text: String) -> Bool {
            Array(text.utf8).withUnsafeBytes { SharedMimeDatabase.matches(sections[0].rules, $0) }
        }
        XCTAssertTrue(matches("AB..CD"))
        XCTAssertFalse(matches("AB..EF"))
        XCTAssertTrue(matches("..........x")) // offset 10, masked lowercase
        XCTAssertTrue(matches(".............X")) // offset 13, inside the range
        XCTAssertFalse(matches("..............X")) // offset 14, outside
    }
}

final class ContentTypeDetectorTests: XCTestCase {
    var detector: ContentTypeDetector!

    override func setUpWithError() throws {
        try XCTSkipIf(SharedMimeDatabase.system.isEmpty, "no shared-mime-info database (install shared-mime-info: make deps)")
        detector = ContentTypeDetector(
            registry: ContentTypeRegistry(declarations: [
                ContentTypeDeclaration(ContentType("com.example.invoice"), conformsTo: [.pdf], extensions: ["invoice"]),
                ContentTypeDeclaration(ContentType("com.example.deck"), conformsTo: [.package], extensions: ["deck"]),
            ]))
    }

    func detect(_ name: String?, _ bytes: [UInt8]) -> Detection { detector.detect(name: name, contents: bytes) }

    func testEveryBuiltInByNameAndBytes() {
        let cases: [(String, [UInt8], ContentType)] = [
            ("a.png", Samples.png, .png), ("a.jpg", Samples.jpeg, .jpeg), ("a.jpeg", Samples.jpeg, .jpeg),
            ("a.pdf", Samples.pdf, .pdf), ("a.zip", Samples.zip, .zip), ("a.json", Samples.json, .json),
            ("a.txt", Samples.utf8Text, .plainText), ("a.html", Samples.html, .html), ("a.xml", Samples.xml, .xml),
        ]
        for (name, bytes, type) in cases {
            let found = detect(name, bytes)
            XCTAssertEqual(found.type, type, "\(name): \(found)")
            XCTAssertFalse(found.nameContradicted, "\(name): \(found)")
        }
        XCTAssertEqual(detect("a.png", Samples.png).source, .nameAndContents)
    }

    func testBytesAloneWhenTheNameSaysNothing() {
        let cases: [([UInt8], ContentType)] = [
            (Samples.png, .png), (Samples.jpeg, .jpeg), (Samples.pdf, .pdf), (Samples.zip, .zip),
            (Samples.html, .html), (Samples.utf8Text, .plainText), (Samples.binary, .data),
        ]
        for (bytes, type) in cases {
            for name in [nil, "f000123", "noext"] {
                let found = detect(name, bytes)
                XCTAssertEqual(found.type, type, "\(name ?? "(no name)"): \(found)")
                XCTAssertEqual(found.source, .contents)
            }
        }
    }

    func testTheNameAloneWhenThereAreNoBytes() {
        XCTAssertEqual(detect("a.pdf", []).type, .pdf)
        XCTAssertEqual(detect("a.pdf", []).source, .name)
        XCTAssertEqual(detect("x", []).type, .data)
        XCTAssertEqual(detector.type(forFilename: "photo.PNG"), .png)
        XCTAssertNil(detector.type(forFilename: "f000123"))
    }

    func testBytesOverruleANameTheyContradict() {
        // A .pdf that is text, a .pdf that is a PNG, a .png that is text.
        var found = detect("fake.pdf", Array("this is not a pdf\n".utf8))
        XCTAssertEqual(found.type, .plainText)
        XCTAssertEqual(found.typeFromName, .pdf)
        XCTAssertTrue(found.nameContradicted)
        found = detect("fake.pdf", Samples.png)
        XCTAssertEqual(found.type, .png)
        found = detect("fake.pdf", Samples.binary)
        XCTAssertEqual(found.type, .data)
        found = detect("fake.png", Array("hello".utf8))
        XCTAssertEqual(found.type, .plainText)
        // A JPEG named .png is still an image, of the kind the bytes say.
        XCTAssertEqual(detect("photo.png", Samples.jpeg).type, .jpeg)
    }

    func testANameWithoutMagicStandsUnlessStrongMagicSaysOtherwise() {
        // Text types have no magic: invalid UTF-8 in a .txt stays plain text (the document type
        // refuses it later); binary in a .json stays JSON.
        XCTAssertEqual(detect("a.txt", Samples.latin1Text).type, .plainText)
        XCTAssertEqual(detect("a.txt", Samples.binary).type, .plainText)
        XCTAssertEqual(detect("a.json", Samples.binary).type, .json)
        // A PNG called .txt is a PNG: its magic is strong.
        XCTAssertEqual(detect("a.txt", Samples.png).type, .png)
        // An HTML fragment without a doctype is still HTML (HTML is a kind of text).
        XCTAssertEqual(detect("frag.html", Array("<p>hello</p>\n".utf8)).type, .html)
    }

    func testUserTypesAndExplicitTypes() {
        let invoice = ContentType("com.example.invoice")
        // A user type conforming to com.adobe.pdf must look like a PDF.
        XCTAssertEqual(detect("march.invoice", Samples.pdf).type, invoice)
        XCTAssertEqual(detect("march.invoice", Array("plain words".utf8)).type, .plainText)
        XCTAssertEqual(detector.type(forFolderNamed: "talk.deck"), ContentType("com.example.deck"))
        XCTAssertEqual(detector.type(forFolderNamed: "photos"), .folder)
        XCTAssertEqual(detector.type(forFolderNamed: "archive.zip"), .folder)
        // An explicit type (user.mime_type, or a UTType identifier) wins.
        XCTAssertEqual(detector.detect(name: "a.txt", contents: Samples.utf8Text, explicitType: "application/json").type, .json)
        XCTAssertEqual(detector.detect(name: "a.bin", contents: Samples.binary, explicitType: "com.example.invoice").type, invoice)
    }

    func testMIMETypesWithoutADeclaredTypeMapToTheirNearestDeclaredSupertype() {
        XCTAssertEqual(detector.contentType(forMIMEType: "text/x-csrc"), .cSource)
        XCTAssertEqual(detector.contentType(forMIMEType: "text/x-matlab"), .plainText)
        XCTAssertEqual(detector.contentType(forMIMEType: "image/svg+xml"), .svg)
        XCTAssertEqual(detector.contentType(forMIMEType: "image/x-portable-bitmap"), .image)
        XCTAssertEqual(detector.contentType(forMIMEType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"), .zip)
        XCTAssertEqual(detector.contentType(forMIMEType: "application/x-nothing-like-this"), .data)
        XCTAssertEqual(detector.contentType(forMIMEType: "application/acrobat"), .pdf)
    }

    func testDetectingAFileReadsItsPrefixAndExplicitType() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-ct-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let png = dir.appendingPathComponent("pic")
        try Data(Samples.png).write(to: png)
        XCTAssertEqual(try detector.detect(fileAt: png.path).type, .png)
        XCTAssertEqual(try detector.detect(fileAt: png.path, name: "renamed.pdf").type, .png)
        let deck = dir.appendingPathComponent("talk.deck")
        try FileManager.default.createDirectory(at: deck, withIntermediateDirectories: false)
        XCTAssertEqual(try detector.detect(fileAt: deck.path).type, ContentType("com.example.deck"))
        XCTAssertThrowsError(try detector.detect(fileAt: dir.appendingPathComponent("missing").path))
    }
}

final class DocumentTypeTests: XCTestCase {
    let registry = ContentTypeRegistry.standard
    let documents = DocumentTypes.builtIn

    func wrapper(_ bytes: [UInt8]) -> FileWrapper { FileWrapper(regularFileWithContents: Data(bytes)) }

    func testPlainTextMustBeUTF8() throws {
        XCTAssertNoThrow(try documents.validate(wrapper(Samples.utf8Text), as: .plainText, in: registry))
        XCTAssertThrowsError(try documents.validate(wrapper(Samples.latin1Text), as: .plainText, in: registry)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .corruptFile)
            XCTAssertTrue("\(error)".contains("offset 2"), "\(error)")
        }
        // Types that conform to plain text are read by the plain-text document.
        XCTAssertTrue(documents.documentType(for: .swiftSource, in: registry) == PlainTextDocument.self)
        XCTAssertThrowsError(try documents.validate(wrapper(Samples.latin1Text), as: .log, in: registry))
        let doc = try PlainTextDocument(configuration: .init(contentType: .plainText, file: wrapper(Samples.utf8Text)))
        XCTAssertEqual(doc.text, String(decoding: Samples.utf8Text, as: UTF8.self))
        let written = try doc.fileWrapper(configuration: .init(contentType: .plainText))
        XCTAssertEqual(written.regularFileContents.map(Array.init), Samples.utf8Text)
    }

    func testJSONMustParse() {
        XCTAssertNoThrow(try documents.validate(wrapper(Samples.json), as: .json, in: registry))
        XCTAssertNoThrow(try documents.validate(wrapper(Array("42".utf8)), as: .json, in: registry))
        XCTAssertThrowsError(try documents.validate(wrapper(Array("{\"a\": ".utf8)), as: .json, in: registry)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .corruptFile)
        }
        XCTAssertTrue(documents.documentType(for: .json, in: registry) == JSONDocument.self)
    }

    func testOtherTypesHaveNoDocumentType() {
        XCTAssertNil(documents.documentType(for: .png, in: registry))
        XCTAssertNil(documents.documentType(for: .pdf, in: registry))
        XCTAssertNoThrow(try documents.validate(wrapper(Samples.binary), as: .png, in: registry))
    }

    func testPackagesAreDirectoriesAndSumTheirContents() throws {
        let package = FileWrapper(directoryWithFileWrappers: [
            "a.txt": wrapper(Array(repeating: 0x61, count: 100)),
            "media": FileWrapper(directoryWithFileWrappers: ["b.png": wrapper(Samples.png)]),
            "link": FileWrapper(symbolicLinkWithDestination: "a.txt"),
        ])
        let deck = ContentType("com.example.deck")
        let registry = ContentTypeRegistry(declarations: [ContentTypeDeclaration(deck, conformsTo: [.package], extensions: ["deck"])])
        let doc = try PackageDocument(configuration: .init(contentType: deck, file: package))
        XCTAssertEqual(doc.documentSize, Int64(100 + Samples.png.count + 5))
        XCTAssertTrue(documents.documentType(for: deck, in: registry) == PackageDocument.self)
        XCTAssertThrowsError(try documents.validate(wrapper(Samples.zip), as: deck, in: registry))
    }

    func testFileWrapperReadsLazilyFromDisk() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-fw-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(Samples.json).write(to: dir.appendingPathComponent("a.json"))
        try Data(Samples.png).write(to: dir.appendingPathComponent("sub/b.png"))
        XCTAssertEqual(symlink("a.json", dir.appendingPathComponent("l").path), 0)
        let root = try FileWrapper(url: dir)
        XCTAssertTrue(root.isDirectory)
        XCTAssertEqual(Set(root.fileWrappers?.keys ?? [:].keys), ["a.json", "sub", "l"])
        XCTAssertEqual(root.fileWrappers?["l"]?.symbolicLinkDestination, "a.json")
        XCTAssertEqual(root.fileWrappers?["a.json"]?.regularFileContents.map(Array.init), Samples.json)
        XCTAssertEqual(root.totalSize, Int64(Samples.json.count + Samples.png.count + "a.json".utf8.count))
        // Written back, it is the same tree.
        let copy = dir.appendingPathComponent("copy")
        try root.fileWrappers!["sub"]!.write(to: copy)
        XCTAssertEqual(try Data(contentsOf: copy.appendingPathComponent("b.png")), Data(Samples.png))
    }
}
