import Foundation
import Glibc
import Logging
import XCTest
@testable import DocFSBridge
import DocFSProvider

/// The smallest provider one can write: a read-only tree in three members (README, "Write your
/// own provider"). Everything else comes from the protocol's defaults.
final class TinyProvider: Provider, @unchecked Sendable {
    let items: [Item]
    let contents: [ItemIdentifier: String]
    init(files: [String: String]) {
        let now = Date()
        items = files.keys.sorted().map {
            Item(identifier: ItemIdentifier($0), parentIdentifier: .rootContainer, filename: $0, kind: .file,
                 contentType: .plainText, documentSize: Int64(files[$0]!.utf8.count), creationDate: now,
                 contentModificationDate: now, capabilities: [.allowsReading], posixPermissions: 0o444)
        }
        contents = Dictionary(uniqueKeysWithValues: files.map { (ItemIdentifier($0.key), $0.value) })
    }

    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        if identifier == .rootContainer {
            return Item(identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
                        contentType: .folder, childItemCount: items.count, creationDate: Date(), contentModificationDate: Date(),
                        capabilities: [.allowsReading, .allowsContentEnumerating])
        }
        guard let item = items.first(where: { $0.identifier == identifier }) else { throw ProviderError(.noSuchItem) }
        return item
    }

    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        container == .rootContainer ? items : []
    }

    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let text = contents[identifier] else { throw ProviderError(.noSuchItem) }
        // An anonymous file: made, unlinked at once, the descriptor handed over.
        let path = NSTemporaryDirectory() + "tiny-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw .posix(errno, "create \(path)") }
        unlink(path)
        _ = text.withCString { write(fd, $0, strlen($0)) }
        return fd
    }
}

final class ProviderDefaultsTests: XCTestCase {
    private func errno(_ body: () async throws(ProviderError) -> Void) async -> Int32 {
        do { try await body(); return 0 } catch { return error.errno }
    }

    func testAReadOnlyProviderNeedsOnlyItsReadingMembers() async throws {
        let provider = TinyProvider(files: ["a.txt": "alpha", "b.txt": "beta"])
        XCTAssertEqual(try provider.childItem(named: "b.txt", in: .rootContainer).documentSize, 4)
        XCTAssertThrowsError(try provider.childItem(named: "c.txt", in: .rootContainer))
        let fd = try provider.openContents(of: ItemIdentifier("a.txt"))
        var buffer = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(pread(fd, &buffer, 16, 0), 5)
        close(fd)
        // Every change is refused as a read-only filesystem refuses it; tags are not supported.
        let url = URL(fileURLWithPath: "/nonexistent")
        var e = await errno { () async throws(ProviderError) in _ = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in _ = try await provider.importDocument(at: url, toParentItemIdentifier: .rootContainer) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in try await provider.deleteItem(withIdentifier: ItemIdentifier("a.txt")) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in
            _ = try await provider.setAttributes(ofItemWithIdentifier: ItemIdentifier("a.txt"), changes: AttributeChanges(posixPermissions: 0o600))
        }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in _ = try await provider.setTagData(Data(), forItemIdentifier: ItemIdentifier("a.txt")) }
        XCTAssertEqual(e, EOPNOTSUPP)
        e = await errno { () async throws(ProviderError) in
            _ = try await provider.createSpecialItem(withName: "p", kind: .fifo, inParentItemIdentifier: .rootContainer,
                                                     attributes: NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644))
        }
        XCTAssertEqual(e, EPERM)
        e = await errno { () async throws(ProviderError) in try await provider.synchronize() }
        XCTAssertEqual(e, 0)
        XCTAssertGreaterThan(provider.storageStatistics().blockSize, 0)
    }

    func testChangeSignalsReachTheInodeTable() {
        let provider = TinyProvider(files: ["a.txt": "alpha"])
        let bridge = Bridge(provider: provider, logger: Logger(label: "test"))
        defer { bridge.shutdown() }
        let node = bridge.inodes.remember(ItemIdentifier("a.txt"))
        // A temporary identifier becomes permanent: same inode, new identifier.
        bridge.apply([.identifierReplaced(old: ItemIdentifier("a.txt"), new: ItemIdentifier("permanent-1"))])
        XCTAssertEqual(bridge.inodes.identifier(node.ino), ItemIdentifier("permanent-1"))
        XCTAssertIdentical(bridge.inodes.knownNode(ItemIdentifier("permanent-1")), node)
        XCTAssertNil(bridge.inodes.knownNode(ItemIdentifier("a.txt")))
        // Signals about unknown items are ignored.
        bridge.apply([.modified(ItemIdentifier("nobody")), .nameChanged(parent: ItemIdentifier("nowhere"), name: "x")])
    }
}
