import Foundation
import Glibc
import Logging
import XCTest
@testable import DocFSBridge
import DocFSProvider

/// The smallest provider one can write: a read-only tree in three members (README, "Write your
/// own provider"). Everything else comes from the protocol's defaults.
class TinyProvider: Provider, @unchecked Sendable {
    let items: [Item]
    let contents: [ItemIdentifier: String]
    init(files: [String: String]) {
        let now = Date()
        items = files.keys.sorted().map {
            Item(
                identifier: ItemIdentifier($0), parentIdentifier: .rootContainer, filename: $0, kind: .file,
                contentType: .plainText, documentSize: Int64(files[$0]!.utf8.count), creationDate: now,
                contentModificationDate: now, capabilities: [.allowsReading], posixPermissions: 0o444)
        }
        contents = Dictionary(uniqueKeysWithValues: files.map { (ItemIdentifier($0.key), $0.value) })
    }

    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        if identifier == .rootContainer {
            return Item(
                identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
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

/// A provider that implements each action once, in its attributed form, and records what it was
/// asked: the plain forms of Apple's vocabulary must arrive here.
final class AttributedOnlyProvider: TrashProvider, @unchecked Sendable {
    nonisolated(unsafe) var calls: [String] = []
    let root = Item(
        identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
        contentType: .folder, childItemCount: 0, creationDate: Date(), contentModificationDate: Date(), capabilities: .all)

    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        if identifier == .rootContainer { return root }
        if identifier == ItemIdentifier("trashed") {
            return Item(
                identifier: identifier, parentIdentifier: .trashContainer, filename: "x 2.txt", kind: .file,
                contentType: .plainText, creationDate: Date(), contentModificationDate: Date(), capabilities: .all)
        }
        throw ProviderError(.noSuchItem)
    }
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] { [] }
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 { throw ProviderError(.noSuchItem) }

    private func record(_ call: String) -> Item { calls.append(call); return root }
    func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        record("import \(file.name) \(attributes.map { String($0.posixPermissions, radix: 8) } ?? "nil")")
    }
    func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        record("mkdir \(name) \(attributes == nil ? "nil" : "given")")
    }
    func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        record("symlink \(name) \(target) \(attributes == nil ? "nil" : "given")")
    }
    func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        record("trash \(identifier)")
    }
    func untrashItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        newName: String
    ) async throws(ProviderError) -> Item {
        record("untrash \(identifier) \(parent) \(newName)")
    }
    func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? {
        TrashOrigin(parentIdentifier: ItemIdentifier("gone"), filename: "x.txt")
    }
    func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        record("setattr \(changes.posixPermissions.map { String($0, radix: 8) } ?? "-") \(changes.modificationTime?.seconds ?? -1)")
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
        // Every change is refused as a read-only filesystem refuses it; it opts into nothing, and
        // the bridge refuses what the opt-ins do (tags are not supported, no FIFOs).
        XCTAssertFalse(
            provider is any TrashProvider || provider is any AppleMetadataProvider
                || provider is any ExtendedAttributeProvider || provider is any SpecialItemProvider)
        let bridge = Bridge(provider: provider, logger: Logger(label: "test"))
        defer { bridge.shutdown() }
        let url = URL(fileURLWithPath: "/nonexistent")
        var e = await errno { () async throws(ProviderError) in
            _ = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer)
        }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in _ = try await provider.importDocument(at: url, toParentItemIdentifier: .rootContainer) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in try await provider.deleteItem(withIdentifier: ItemIdentifier("a.txt")) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in
            _ = try await provider.setAttributes(ofItemWithIdentifier: ItemIdentifier("a.txt"), changes: AttributeChanges(posixPermissions: 0o600))
        }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in _ = try await bridge.setTagData(Data(), of: ItemIdentifier("a.txt")) }
        XCTAssertEqual(e, EOPNOTSUPP)
        e = await errno { () async throws(ProviderError) in
            _ = try await bridge.createSpecialItem(
                named: "p", kind: .fifo, in: .rootContainer,
                attributes: NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644))
        }
        XCTAssertEqual(e, EPERM)
        let a = ItemIdentifier("a.txt")
        e = await errno { () async throws(ProviderError) in _ = try await bridge.trashItem(a) }
        XCTAssertEqual(e, EROFS)
        e = await errno { () async throws(ProviderError) in _ = try await bridge.untrashItem(a, to: .rootContainer, newName: "a.txt") }
        XCTAssertEqual(e, EROFS)
        XCTAssertNil(bridge.trashOrigin(of: a))
        XCTAssertEqual(try bridge.storedAttributeNames(of: a), [])
        e = await errno { () async throws(ProviderError) in _ = try bridge.storedAttribute(named: "user.x", of: a) }
        XCTAssertEqual(e, ENODATA)
        e = await errno { () async throws(ProviderError) in try await bridge.setStoredAttribute(named: "user.x", to: Data(), mode: .upsert, of: a) }
        XCTAssertEqual(e, EOPNOTSUPP)
        e = await errno { () async throws(ProviderError) in try await provider.synchronize() }
        XCTAssertEqual(e, 0)
        XCTAssertGreaterThan(provider.storageStatistics().blockSize, 0)
    }

    func testThePlainFormsCallTheAttributedRequirement() async throws {
        let provider = AttributedOnlyProvider()
        let staged = URL(fileURLWithPath: NSTemporaryDirectory() + "plain-\(UUID().uuidString).txt")
        try Data("x".utf8).write(to: staged)
        defer { unlink(staged.path) }
        _ = try await provider.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        XCTAssertTrue(FileManager.default.fileExists(atPath: staged.path) == false, "a plain import's file is taken once it succeeded")
        _ = try await provider.createDirectory(withName: "d", inParentItemIdentifier: .rootContainer)
        _ = try await provider.createDirectory(
            withName: "e", inParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: 1, groupID: 1, posixPermissions: 0o700))
        _ = try await provider.createSymbolicLink(withName: "l", target: "t", inParentItemIdentifier: .rootContainer)
        // Its origin folder is gone: back to the root, under the name it had.
        _ = try await provider.untrashItem(withIdentifier: ItemIdentifier("trashed"), toParentItemIdentifier: nil)
        _ = try await provider.untrashItem(withIdentifier: ItemIdentifier("trashed"), toParentItemIdentifier: ItemIdentifier("here"))
        _ = try await provider.setAttributes(
            ofItemWithIdentifier: .rootContainer, posixPermissions: 0o750,
            contentModificationDate: Date(timeIntervalSince1970: 1000))
        XCTAssertEqual(
            provider.calls,
            [
                "import \(staged.lastPathComponent) nil", "mkdir d nil", "mkdir e given", "symlink l t nil",
                "untrash trashed \(ItemIdentifier.rootContainer) x.txt", "untrash trashed here x.txt", "setattr 750 1000",
            ])
    }

    /// The opt-in sides are found by a cast: a plain provider has none (its files open with
    /// `openContents`, pin/evict/retry are refused), one that conforms is used as such.
    func testTheBridgeFindsTheOptInSidesOfAProvider() {
        let plain = Bridge(provider: TinyProvider(files: ["a.txt": "alpha"]), logger: Logger(label: "test"))
        defer { plain.shutdown() }
        XCTAssertNil(plain.replicaStatus)
        XCTAssertNil(plain.openWriters)
        XCTAssertNil(plain.trash)
        XCTAssertNil(plain.onDemand)
        let replica = TinyReplica(files: ["a.txt": "alpha"])
        let bridge = Bridge(provider: replica, logger: Logger(label: "test"))
        defer { bridge.shutdown() }
        XCTAssertIdentical(bridge.replicaStatus, replica)
        XCTAssertIdentical(bridge.openWriters, replica)
        XCTAssertNil(bridge.onDemand)
        XCTAssertEqual(bridge.replicaStatus?.syncState(of: ItemIdentifier("a.txt")), "uploaded")
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

/// A replica in its smallest form: every item uploaded, nothing else.
final class TinyReplica: TinyProvider, ReplicaStatusProvider, OpenWritersProvider, @unchecked Sendable {
    func syncState(of identifier: ItemIdentifier) -> String? { "uploaded" }
    func conflict(of identifier: ItemIdentifier) -> String? { nil }
    func syncStatus() -> String? { "{}" }
    func retrySync(of identifier: ItemIdentifier) async throws(ProviderError) {}
    func contentsOpenedForWriting(of identifier: ItemIdentifier) {}
    func contentsClosedForWriting(of identifier: ItemIdentifier) {}
}
