import DocFS
import Foundation
import Glibc
import XCTest
import DocFSTesting

// The smallest provider someone can write (README, "Write your own provider", shows the lines
// from `import DocFS` to `serve` exactly as they are here; `testTheReadmeShowsThisProvider`
// keeps the two the same): a read-only folder of greetings served from memory. Everything it
// does not implement is refused by the core protocol's defaults, and what it does not opt into
// (trash, tags, extended attributes, …) by the bridge.

final class GreetingProvider: Provider, @unchecked Sendable {
    let greetings = ["hello.txt": "hello\n", "hallo.txt": "hallo\n"]
    func item(for id: ItemIdentifier) throws(ProviderError) -> Item {
        if id == .rootContainer {
            return Item(
                identifier: id, parentIdentifier: id, filename: "/", kind: .folder, contentType: .folder, childItemCount: greetings.count,
                creationDate: .now, contentModificationDate: .now, capabilities: [.allowsReading, .allowsContentEnumerating])
        }
        guard let text = greetings[id.rawValue] else { throw ProviderError(.noSuchItem) }
        return Item(
            identifier: id, parentIdentifier: .rootContainer, filename: id.rawValue, kind: .file, contentType: .plainText,
            documentSize: Int64(text.utf8.count), creationDate: .now, contentModificationDate: .now, capabilities: [.allowsReading],
            posixPermissions: 0o444)
    }
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        container == .rootContainer ? try greetings.keys.sorted().map { (name) throws(ProviderError) in try item(for: ItemIdentifier(name)) } : []
    }
    func openContents(of id: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let text = greetings[id.rawValue] else { throw ProviderError(.noSuchItem) }
        var path = Array("/tmp/greeting-XXXXXX".utf8CString)
        guard case let fd = mkstemp(&path), fd >= 0 else { throw .posix(errno, "mkstemp") } // a private file, unlinked at once
        unlink(path)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        return fd
    }
}

/// README's two lines that mount it, compiled here but never called (`serve` runs until
/// unmounted).
func mountGreetingsAsTheReadmeShows() throws {
    let mount = try ProviderMount(GreetingProvider(), at: "/mnt/greetings") // live when it returns
    try mount.serve(signals: true) // until umount or Ctrl-C
}

/// Mounts in this process through DocFSTesting, as a provider's own tests would.
final class TemporaryMountTests: XCTestCase {
    override func setUpWithError() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0, getuid() == 0 else {
            throw XCTSkip("needs /dev/fuse and root (the mounted tests' environment)")
        }
    }

    /// README's example is this file's provider, line for line (blank lines aside), so the
    /// example compiles; it is also counted here.
    func testTheReadmeShowsThisProvider() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try XCTUnwrap(readme.components(separatedBy: "## Write your own provider").dropFirst().first)
        let block = try XCTUnwrap(section.components(separatedBy: "```swift\n").dropFirst().first?.components(separatedBy: "```").first)
        let shown = block.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        XCTAssertEqual(shown.first, "import DocFS")
        var source = try String(contentsOf: here, encoding: .utf8).split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }[...]
        for line in shown {
            guard let at = source.firstIndex(of: line) else {
                return XCTFail("README's line is not in \(here.lastPathComponent) (in this order): \(line)")
            }
            source = source[(at + 1)...]
        }
        // The provider itself, from `final class` to its closing brace.
        let start = try XCTUnwrap(shown.firstIndex { $0.hasPrefix("final class GreetingProvider") })
        let end = try XCTUnwrap(shown.firstIndex { $0.hasPrefix("let mount") }) - 1
        XCTAssertEqual(shown[end], "}")
        XCTAssertLessThanOrEqual(end - start + 1, 26, "the smallest provider grew: \(end - start + 1) lines")
    }

    func testAnyProviderMountsReadsAndRefusesWhatItDoesNotImplement() throws {
        var mountpoint = ""
        try TemporaryMount.with(GreetingProvider()) { mnt in
            mountpoint = mnt
            XCTAssertTrue(try String(contentsOfFile: mnt + "/hello.txt", encoding: .utf8) == "hello\n")
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mnt).sorted(), ["hallo.txt", "hello.txt"])
            var st = stat()
            XCTAssertEqual(lstat(mnt + "/hallo.txt", &st), 0)
            XCTAssertEqual(st.st_mode & 0o7777, 0o444)
            XCTAssertEqual(st.st_size, 6)
            // Adding is refused (the folder has no `add`: EACCES before the provider is asked);
            // as root past the mode bits, the capability still refuses.
            XCTAssertEqual(open(mnt + "/new.txt", O_WRONLY | O_CREAT | O_EXCL, 0o644), -1)
            XCTAssertEqual(errno, EACCES)
            XCTAssertEqual(mkdir(mnt + "/d", 0o755), -1)
            XCTAssertEqual(errno, EACCES)
            XCTAssertEqual(unlink(mnt + "/hello.txt"), -1)
            XCTAssertEqual(errno, EPERM)
        }
        // Unmounted and removed afterwards.
        XCTAssertFalse(FileManager.default.fileExists(atPath: mountpoint))
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        XCTAssertFalse(mounts.contains(mountpoint))
    }
}
