import Foundation
import Glibc
import XCTest
import DocFS
import DocFSTesting

/// A read-only provider in a few lines (README, "Write your own provider"): one folder of
/// greetings, served from memory. Everything it does not implement is refused by the protocol's
/// defaults.
final class GreetingProvider: Provider, @unchecked Sendable {
    let greetings = ["hello.txt": "hello\n", "hallo.txt": "hallo\n"]

    func item(for id: ItemIdentifier) throws(ProviderError) -> Item {
        if id == .rootContainer {
            return Item(identifier: id, parentIdentifier: id, filename: "/", kind: .folder, contentType: .folder,
                        childItemCount: greetings.count, creationDate: .now, contentModificationDate: .now,
                        capabilities: [.allowsReading, .allowsContentEnumerating])
        }
        guard let text = greetings[id.rawValue] else { throw ProviderError(.noSuchItem) }
        return Item(identifier: id, parentIdentifier: .rootContainer, filename: id.rawValue, kind: .file,
                    contentType: .plainText, documentSize: Int64(text.utf8.count), creationDate: .now,
                    contentModificationDate: .now, capabilities: [.allowsReading], posixPermissions: 0o444)
    }

    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        guard container == .rootContainer else { return [] }
        var items: [Item] = []
        for name in greetings.keys.sorted() { items.append(try item(for: ItemIdentifier(name))) }
        return items
    }

    func openContents(of id: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let text = greetings[id.rawValue] else { throw ProviderError(.noSuchItem) }
        let path = NSTemporaryDirectory() + "greeting-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw .posix(errno, "create \(path)") }
        unlink(path)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        return fd
    }
}

/// Mounts in this process through DocFSTesting, as a provider's own tests would.
final class TemporaryMountTests: XCTestCase {
    override func setUpWithError() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0, getuid() == 0 else {
            throw XCTSkip("needs /dev/fuse and root (the mounted tests' environment)")
        }
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
