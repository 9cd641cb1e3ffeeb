import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Content types on the mount: folders take only the types they allow (by name at create, by
/// bytes at close), documents are validated before they land, packages sum their contents, and
/// view-only types are not writable.
final class ContentTypeMountTests: MountTestCase {
    override class var layout: String? {
        """
        types:
          - identifier: com.example.deck
            conformsTo: [com.apple.package]
            extensions: [deck]
          - identifier: com.example.log
            conformsTo: [public.plain-text]
            extensions: [log]
            viewOnly: true
        folders:
          - path: Photos
            allowedContentTypes: [public.image]
          - path: Papers
            allowedContentTypes: [com.adobe.pdf]
          - path: Notes
            allowedContentTypes: [public.text]
          - path: Projects
        """
    }

    // Real bytes.
    static let png: [UInt8] = hex(
        "89504e470d0a1a0a0000000d49484452000000010000000108000000003a7e9b550000000a49444154789c636000000002000148afa4710000000049454e44ae426082")
    static let jpeg: [UInt8] =
        [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00]
    static let pdf = Array("%PDF-1.4\n1 0 obj\n<< /Type /Catalog >>\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n".utf8)
    static let latin1: [UInt8] = [0x47, 0x72, 0xFC, 0xDF, 0x65, 0x0A] // "Grüße" in Latin-1

    static func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map { i in
            let start = text.index(text.startIndex, offsetBy: i)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        }
    }

    /// Names in the store's contents and staged leftovers: a refusal must leave none behind.
    func storeFiles() -> [String] {
        let contents = (try? FileManager.default.contentsOfDirectory(atPath: fx.store + "/contents")) ?? []
        return (contents + fx.stagedLeftovers().map { "staging/" + $0 }).sorted()
    }

    func info(_ rel: String) -> [String: String] {
        let r = fx.docfs(["info", fx.m(rel)])
        XCTAssertEqual(r.status, 0, "docfs info \(rel): \(r)")
        var fields: [String: String] = [:]
        for line in r.stdout.split(separator: "\n") {
            let text = String(line)
            guard text.count > 14 else { continue }
            let key = text.prefix(14).trimmingCharacters(in: .whitespaces)
            fields[key] = String(text.dropFirst(14))
        }
        return fields
    }

    func testAllowedPNGLandsWithItsTypeAndConformance() throws {
        try fx.writeSource("pic.png", Self.png)
        let r = fx.sh("cp src/pic.png mnt/Photos/")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertBytes(fx.readFile(fx.m("Photos/pic.png")), Self.png)
        let fields = info("Photos/pic.png")
        XCTAssertEqual(fields["type"], "public.png")
        XCTAssertEqual(fields["conforms to"], "public.image, public.data, public.content, public.item")
        XCTAssertEqual(fields["size"], String(Self.png.count))
        // A JPEG is an image too; so is a JPEG whose name says PNG.
        try fx.writeSource("photo.jpg", Self.jpeg)
        XCTAssertEqual(fx.sh("cp src/photo.jpg mnt/Photos/ && cp src/photo.jpg mnt/Photos/misnamed.png").status, 0)
        XCTAssertEqual(info("Photos/misnamed.png")["type"], "public.jpeg")
        XCTAssertEqual(fx.list(fx.m("Photos")), ["misnamed.png", "photo.jpg", "pic.png"])
    }

    func testTextIntoImageFolderIsRefusedAtCreateAndLeavesNothing() throws {
        try fx.writeSource("notes.txt", Array("hello\n".utf8))
        let before = storeFiles()
        let r = fx.sh("cp src/notes.txt mnt/Photos/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertEqual(fx.list(fx.m("Photos")), [])
        XCTAssertErrno(fx.stat(fx.m("Photos/notes.txt")).errno, ENOENT)
        XCTAssertErrno(fx.openErrno(fx.m("Photos/other.txt"), O_WRONLY | O_CREAT | O_EXCL), EPERM)
        XCTAssertEqual(storeFiles(), before)
        let lines = fx.logLines { $0.contains("refused") && $0.contains("/Photos/notes.txt") }
        XCTAssertEqual(lines.count, 1, "log:\n\(fx.log)")
        XCTAssertTrue(
            lines.first?.contains("type public.plain-text is not among the folder's allowed types [public.image]") ?? false,
            lines.joined(separator: "\n"))
        XCTAssertTrue(lines.first?.contains("EPERM") ?? false, lines.joined(separator: "\n"))
    }

    func testPDFNamedFileThatIsNotAPDFIsRefusedAtClose() throws {
        try fx.writeSource("fake.pdf", Array("this is not a pdf, only words\n".utf8))
        try fx.writeSource("real.pdf", Self.pdf)
        let before = storeFiles()
        // The name passes at create; the bytes are judged at close.
        let r = fx.sh("cp src/fake.pdf mnt/Papers/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertEqual(fx.list(fx.m("Papers")), [])
        XCTAssertErrno(fx.stat(fx.m("Papers/fake.pdf")).errno, ENOENT)
        XCTAssertEqual(storeFiles(), before, "a refused import leaves no content file and no staged file")
        // The same through open/write/close: close() gives EPERM.
        XCTAssertErrno(fx.writeFile(fx.m("Papers/fake2.pdf"), Array("still not a pdf".utf8)), EPERM)
        XCTAssertEqual(fx.list(fx.m("Papers")), [])
        let lines = fx.logLines { $0.contains("refused") && $0.contains("/Papers/fake.pdf") }
        XCTAssertEqual(lines.count, 1, "log:\n\(fx.log)")
        XCTAssertTrue(lines.first?.contains("the contents say public.plain-text") ?? false, lines.joined(separator: "\n"))
        // A real PDF lands.
        XCTAssertEqual(fx.sh("cp src/real.pdf mnt/Papers/").status, 0)
        XCTAssertEqual(fx.list(fx.m("Papers")), ["real.pdf"])
        XCTAssertEqual(info("Papers/real.pdf")["type"], "com.adobe.pdf")
    }

    func testInvalidUTF8TextIsRefusedWithIOErrorAndNothingLands() throws {
        try fx.writeSource("latin1.txt", Self.latin1)
        try fx.writeSource("good.txt", Array("Grüße ✓\n".utf8))
        try fx.writeSource("broken.json", Array("{\"a\": ".utf8))
        let before = storeFiles()
        var r = fx.sh("cp src/latin1.txt mnt/Notes/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stderr.contains("Input/output error"), "\(r)")
        r = fx.sh("cp src/broken.json mnt/Notes/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stderr.contains("Input/output error"), "\(r)")
        XCTAssertEqual(fx.list(fx.m("Notes")), [])
        XCTAssertEqual(storeFiles(), before)
        let lines = fx.logLines { $0.contains("refused") && $0.contains("/Notes/latin1.txt") }
        XCTAssertTrue(lines.first?.contains("not valid UTF-8") ?? false, "log:\n\(fx.log)")
        XCTAssertTrue(lines.first?.contains("EIO") ?? false, lines.joined(separator: "\n"))
        // Valid UTF-8 lands; an edit that breaks it is refused at close, and the file reads as
        // the stored version at once (the refused bytes are dropped, also from the page cache)
        // and after a remount. A valid edit afterwards goes through.
        XCTAssertEqual(fx.sh("cp src/good.txt mnt/Notes/").status, 0)
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), Array("Grüße ✓\n".utf8))
        XCTAssertErrno(fx.writeFile(fx.m("Notes/good.txt"), Self.latin1), EIO)
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), Array("Grüße ✓\n".utf8))
        XCTAssertEqual(fx.sh("cat mnt/Notes/good.txt").stdout, "Grüße ✓\n")
        XCTAssertTrue(try fx.remount(), "remount; log:\n\(fx.log)")
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), Array("Grüße ✓\n".utf8))
        XCTAssertEqual(fx.sh("printf 'v2 ✓\\n' > mnt/Notes/good.txt").status, 0)
        XCTAssertEqual(fx.sh("cat mnt/Notes/good.txt").stdout, "v2 ✓\n")
        XCTAssertEqual(info("Notes/good.txt")["type"], "public.plain-text")
        // A folder that takes anything stores the same bytes as they are.
        XCTAssertEqual(fx.sh("cp src/latin1.txt mnt/Projects/").status, 0)
        XCTAssertBytes(fx.readFile(fx.m("Projects/latin1.txt")), Self.latin1)
    }

    func testSubfoldersInheritTheRuleAndMovesAreChecked() throws {
        XCTAssertErrno(fx.mkdirErrno(fx.m("Photos/2024")), 0)
        try fx.writeSource("pic.png", Self.png)
        try fx.writeSource("notes.txt", Array("hello\n".utf8))
        XCTAssertEqual(fx.sh("cp src/pic.png mnt/Photos/2024/").status, 0)
        let r = fx.sh("cp src/notes.txt mnt/Photos/2024/")
        XCTAssertTrue(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertEqual(fx.list(fx.m("Photos/2024")), ["pic.png"])
        // Moving a text file in is refused too; moving the PNG out is fine.
        XCTAssertEqual(fx.sh("cp src/notes.txt mnt/Projects/").status, 0)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/notes.txt"), fx.m("Photos/notes.txt")), EPERM)
        XCTAssertErrno(fx.mkdirErrno(fx.m("Projects/mixed")), 0)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/notes.txt"), fx.m("Projects/mixed/notes.txt")), 0)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/mixed"), fx.m("Photos/mixed")), EPERM)
        XCTAssertErrno(fx.renameErrno(fx.m("Photos/2024/pic.png"), fx.m("Projects/pic.png")), 0)
        XCTAssertEqual(fx.list(fx.m("Projects")), ["mixed", "pic.png"])
    }

    func testPackageDirectoryReportsTheSumOfItsContents() throws {
        try fx.writeSource("talk.deck/slides.json", Array("{\"slides\": 3}".utf8))
        try fx.writeSource("talk.deck/media/pic.png", Self.png)
        try fx.writeSource("talk.deck/notes.txt", Array(repeating: 0x61, count: 1000))
        let r = fx.sh("cp -r src/talk.deck mnt/Projects/ && getfattr --only-values -n user.docfs.document-size mnt/Projects/talk.deck")
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        let total = 13 + Self.png.count + 1000
        XCTAssertEqual(r.stdout, String(total))
        let fields = info("Projects/talk.deck")
        XCTAssertEqual(fields["type"], "com.example.deck")
        XCTAssertEqual(fields["conforms to"], "com.apple.package, public.directory, public.item")
        XCTAssertEqual(fields["size"], String(total))
        // The sum follows changes inside the package.
        XCTAssertErrno(fx.unlinkErrno(fx.m("Projects/talk.deck/notes.txt")), 0)
        XCTAssertEqual(info("Projects/talk.deck")["size"], String(total - 1000))
        // An ordinary folder is a folder.
        XCTAssertErrno(fx.mkdirErrno(fx.m("Projects/plain")), 0)
        XCTAssertEqual(info("Projects/plain")["type"], "public.folder")
    }

    func testViewOnlyTypeIsNotWritable() throws {
        try fx.writeSource("server.log", Array("started\n".utf8))
        try fx.writeSource("notes.txt", Array("hello\n".utf8))
        XCTAssertEqual(fx.sh("cp src/server.log src/notes.txt mnt/Projects/").status, 0)
        XCTAssertEqual(info("Projects/server.log")["type"], "com.example.log")
        // No w bit: access(2) says so to every caller but root, which passes the bits (the
        // kernel answers it, as ext4 does for a 0444 file; RefusalTests asks as an owner).
        XCTAssertEqual(fx.stat(fx.m("Projects/server.log")).st.st_mode & 0o222, 0, "a view-only item must not look writable")
        XCTAssertNotEqual(fx.stat(fx.m("Projects/notes.txt")).st.st_mode & 0o200, 0)
        XCTAssertEqual(fx.sh("test -w mnt/Projects/notes.txt").status, 0)
        XCTAssertErrno(fx.openErrno(fx.m("Projects/server.log"), O_WRONLY), EACCES)
        XCTAssertErrno(fx.openErrno(fx.m("Projects/server.log"), O_WRONLY | O_APPEND), EACCES)
        let r = fx.sh("echo more >> mnt/Projects/server.log")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("Projects/server.log")), Array("started\n".utf8))
        XCTAssertFalse(info("Projects/server.log")["capabilities"]?.contains("write") ?? true)
    }

    /// A rename to a view-only type takes writing away, and the mode the kernel holds (which its
    /// own permission check uses, default_permissions) loses its w bits at once: the kernel reads
    /// a renamed item's attributes again. Renamed back, they return.
    func testRenameToAViewOnlyTypeShowsAtOnce() throws {
        try fx.writeSource("notes.txt", Array("hello\n".utf8))
        XCTAssertEqual(fx.sh("cp src/notes.txt mnt/Projects/ && stat -c %a mnt/Projects/notes.txt").stdout, "644\n")
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/notes.txt"), fx.m("Projects/notes.log")), 0)
        XCTAssertEqual(fx.stat(fx.m("Projects/notes.log")).st.st_mode & 0o7777, 0o444, "\(fx.log)")
        XCTAssertErrno(fx.openErrno(fx.m("Projects/notes.log"), O_WRONLY), EACCES)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/notes.log"), fx.m("Projects/notes.txt")), 0)
        XCTAssertEqual(fx.stat(fx.m("Projects/notes.txt")).st.st_mode & 0o7777, 0o644)
    }

    /// FIFOs and sockets are items where the folder has no list of allowed types, and refused
    /// (EPERM, one log line) where it has one; device nodes (made by root) likewise.
    func testFIFOsAndSocketsOnlyWhereNoTypesAreListed() {
        let script = """
            import errno, os, socket, stat, sys
            def attempt(call):
                try: call(); return "ok"
                except OSError as e: return errno.errorcode[e.errno]
            print(attempt(lambda: os.mkfifo("mnt/Projects/pipe", 0o600)))
            s = socket.socket(socket.AF_UNIX)
            print(attempt(lambda: s.bind("mnt/Projects/sock")))
            print(stat.S_ISFIFO(os.stat("mnt/Projects/pipe").st_mode), stat.S_ISSOCK(os.stat("mnt/Projects/sock").st_mode))
            print(attempt(lambda: os.mkfifo("mnt/Photos/pipe")))
            print(attempt(lambda: os.mknod("mnt/Projects/null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))))
            print(attempt(lambda: os.mknod("mnt/Photos/null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))))
            print(sorted(os.listdir("mnt/Photos")), os.path.exists("mnt/Projects/null"))
            """
        XCTAssertNoThrow(try script.write(toFile: fx.dir + "/fifo.py", atomically: true, encoding: .utf8))
        let r = fx.sh("python3 fifo.py")
        XCTAssertEqual(r.stdout, "ok\nok\nTrue True\nEPERM\nok\nEPERM\n[] True\n", "\(r)\n\(fx.log)")
        XCTAssertTrue(fx.log.contains("FIFOs and sockets are not documents"), fx.log)
    }
}

/// Without a view-only type in the layout, a copy into a folder no rule checks leaves the file's
/// type to its first reader (getxattr, `docfs info`, a move into a folder with a rule): what
/// they see is what detection at close gave before.
final class LazyContentTypeMountTests: MountTestCase {
    override class var layout: String? {
        """
        folders:
          - path: Photos
            allowedContentTypes: [public.image]
          - path: Projects
        """
    }

    func type(_ rel: String) -> String {
        let r = fx.sh("getfattr --only-values -n user.docfs.type mnt/\(rel)")
        XCTAssertEqual(r.status, 0, "getfattr \(rel): \(r)")
        return r.stdout
    }

    func testTypesAreThereWhenAskedAndRulesSeeThem() throws {
        try fx.writeSource("picture", ContentTypeMountTests.png)
        try fx.writeSource("misnamed.png", ContentTypeMountTests.jpeg)
        try fx.writeSource("notes.txt", Array("hello\n".utf8))
        try fx.writeSource("f0001", Array("only words\n".utf8))
        XCTAssertEqual(fx.sh("cp src/picture src/misnamed.png src/notes.txt src/f0001 mnt/Projects/").status, 0)
        XCTAssertEqual(type("Projects/picture"), "public.png")
        XCTAssertEqual(type("Projects/misnamed.png"), "public.jpeg")
        XCTAssertEqual(type("Projects/notes.txt"), "public.plain-text")
        let r = fx.docfs(["info", fx.m("Projects/picture")])
        XCTAssertTrue(r.stdout.contains("public.image, public.data, public.content, public.item"), "\(r)")
        // A new name that says nothing keeps the type the bytes gave under the old one.
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/notes.txt"), fx.m("Projects/notes")), 0)
        XCTAssertEqual(type("Projects/notes"), "public.plain-text")
        // The image folder's rule sees the bytes: text stays out, at a move and at close.
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/f0001"), fx.m("Photos/f0001")), EPERM)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/picture"), fx.m("Photos/picture")), 0)
        XCTAssertEqual(type("Photos/picture"), "public.png")
        let refused = fx.sh("cp src/f0001 mnt/Photos/")
        XCTAssertNotEqual(refused.status, 0, "\(refused)")
        XCTAssertEqual(fx.list(fx.m("Photos")), ["picture"])
        // A new version is typed from its bytes when asked, after a remount too.
        XCTAssertEqual(fx.sh("cat src/picture > mnt/Projects/notes").status, 0)
        XCTAssertEqual(type("Projects/notes"), "public.png")
        XCTAssertTrue(try fx.remount())
        XCTAssertEqual(type("Projects/notes"), "public.png")
        XCTAssertEqual(type("Projects/misnamed.png"), "public.jpeg")
    }
}
