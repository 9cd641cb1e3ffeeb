import XCTest
import Foundation
import Logging
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// The real `SyncEngine` with fakes on all three sides: the store (`InMemoryReplicaStore`), the
/// server (`InMemoryServer`) and the object store (`InMemoryObjects`).
final class SyncEngineAgainstFakesTests: XCTestCase {
    var store: InMemoryReplicaStore!
    var server: InMemoryServer!
    var objects: InMemoryObjects!
    var engine: SyncEngine?
    let logger = Logger(label: "docfs.replica.fakes")

    override func setUp() async throws {
        store = try InMemoryReplicaStore()
        server = InMemoryServer()
        objects = InMemoryObjects()
    }

    override func tearDown() async throws {
        await engine?.stop()
        engine = nil
        store?.remove()
    }

    func startEngine() {
        let engine = SyncEngine(
            store: store, configuration: ReplicaTestCase.configuration, logger: logger,
            server: server, incomingServer: server, objects: objects, timing: ReplicaTestCase.fastTiming)
        engine.start()
        self.engine = engine
    }

    func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now > deadline { XCTFail("timed out waiting until \(what)"); return }
            try await Task.sleep(for: .milliseconds(10)) // the poll interval, within the deadline
        }
    }

    func waitForOutbox(_ pending: Int = 0) async throws {
        try await waitUntil("the outbox holds \(pending) entries") { store.outboxCounts.pending == pending }
    }

    func testACreatedFileGoesUpAsBlocksAndItsEntriesLeaveTheOutbox() async throws {
        let folder = try store.create("docs")
        let file = try store.create("a.txt", "hello from the fake", in: folder)
        XCTAssertEqual(store.outboxCounts.pending, 2)
        startEngine()
        try await waitForOutbox()

        XCTAssertEqual(Set(server.tree().keys), ["docs/", "docs/a.txt"])
        XCTAssertEqual(objects.text(of: "docs/a.txt", on: server), "hello from the fake")
        XCTAssertTrue(objects.state.withLock { $0.objects.keys.contains { $0.hasPrefix("tree/packs/") } }, "the blocks went up in a pack")
        // The temporary rows became the server's identifiers, the file's contents with them.
        let permanent = server.tree()["docs/a.txt"]!.id
        XCTAssertEqual(store.currentRow(file), permanent)
        XCTAssertEqual(store.currentRow(folder), server.tree()["docs/"]!.id)
        XCTAssertEqual(store.incomingItem(permanent)?.parentRow, server.tree()["docs/"]!.id)
        XCTAssertNotNil(store.incomingItem(permanent)?.contentKey, "the object it went up as is noted")
        XCTAssertEqual(store.text(ofRow: permanent), "hello from the fake")
        XCTAssertEqual(server.state.withLock { $0.log.map(\.kind) }, [.create, .create])
    }

    /// Schema 18: a bucket that keeps versions. The pack is recorded with the version its PUT
    /// made and read as that version: bytes PUT over the key later are never read.
    func testAPackIsReadAsTheVersionItsUploadMadeWhateverIsPutOverItsKey() async throws {
        objects.state.withLock { $0.versioned = true }
        _ = try store.create("v.txt", "the bytes as written")
        startEngine()
        try await waitForOutbox()
        let key = try XCTUnwrap(server.tree()["v.txt"]?.contentKey)
        let places = server.state.withLock { Array($0.blocks.values) }
        XCTAssertFalse(places.isEmpty)
        XCTAssert(places.allSatisfy { $0.version != nil }, "each place has its pack's version: \(places)")
        // Its writer's keys PUT over the pack (a new version; the recorded one stays).
        objects.state.withLock { s in for place in places { s.objects[place.pack] = Data("replaced!".utf8) } }
        let fetcher = ContentFetcher(server: server, objects: objects, bucket: "bucket", prefix: "tree", logger: logger)
        let path = NSTemporaryDirectory() + "/docfs-version-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await fetcher.download(key: key, to: path)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "the bytes as written")
        // A recorded version that is gone is a place gone, never the current bytes read instead.
        objects.state.withLock { $0.versions = [:] }
        do {
            try await fetcher.download(key: key, to: path)
            XCTFail("read without its version")
        } catch is DownloadVerifier.Mismatch {}
    }

    func testAnotherReplicasFileIsAppliedHereWithItsContents() async throws {
        objects.put("tree/objects/theirs", "made elsewhere")
        let folder = try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "shared", kind: .folder,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o755,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)), content: nil)
        let file = try await server.createItem(
            operationID: UUID(), parentID: folder.itemID, name: "note.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o640,
                creationTime: FileTime(totalNanoseconds: 2),
                modificationTime: FileTime(totalNanoseconds: 3)),
            content: RemoteContent(key: "tree/objects/theirs", size: 14))
        startEngine()
        try await waitUntil("the file is here") { store.text(ofRow: file.itemID) == "made elsewhere" }

        let item = try XCTUnwrap(store.incomingItem(file.itemID))
        XCTAssertEqual(item.name, "note.txt")
        XCTAssertEqual(item.parentRow, folder.itemID)
        XCTAssertEqual(item.posixPermissions, 0o640)
        XCTAssertEqual(item.kind, .file)
        XCTAssertEqual(store.incomingItem(folder.itemID)?.kind, .folder)
        XCTAssertEqual(store.path(ofRow: file.itemID), "/shared/note.txt")
        let latest = try await server.latestPosition()
        try await waitUntil("the anchor is at the server's last change") { try store.syncAnchor().position == latest }
        XCTAssertEqual(store.outboxCounts.pending, 0, "nothing is sent back")
    }

    func testAnEditBasedOnAnOlderVersionBecomesAConflictedCopy() async throws {
        objects.put("tree/objects/base", "base")
        objects.put("tree/objects/theirs", "theirs")
        let made = try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "notes.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)),
            content: RemoteContent(key: "tree/objects/base", size: 4))
        let row = made.itemID
        try store.addServerItem(
            ServerItem(
                id: row, parentID: ReplicaRows.root, name: "notes.txt", kind: .file, size: 4,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1), contentKey: "tree/objects/base"))
        let position = try await server.latestPosition()
        try store.setSyncAnchor(position, witness: try await server.change(at: position)?.operationID)
        // Another replica's version 2 reaches the server; this replica writes over version 1.
        _ = try await server.newContentVersion(
            operationID: UUID(), itemID: row, expectedVersion: 1,
            content: RemoteContent(key: "tree/objects/theirs", size: 6),
            modificationTime: FileTime(totalNanoseconds: 2))
        try store.write("mine", to: row, base: 1)
        startEngine()
        try await waitForOutbox()
        try await waitUntil("the item holds the server's version here") { store.text(ofRow: row) == "theirs" }

        XCTAssertEqual(objects.text(of: "notes.txt", on: server), "theirs", "the version the server had first keeps the name")
        let copies = server.tree().filter { $0.key.hasPrefix("notes (conflicted copy from ") && $0.key.hasSuffix(").txt") }
        XCTAssertEqual(copies.count, 1, "\(server.tree().keys)")
        let copy = try XCTUnwrap(copies.first)
        XCTAssertEqual(objects.text(of: copy.key, on: server), "mine")
        XCTAssertEqual(store.forks, [InMemoryReplicaStore.Fork(row: row, copyRow: copy.value.id, name: copy.key, parentRow: ReplicaRows.root)])
        XCTAssertEqual(store.text(ofRow: copy.value.id), "mine", "the copy holds this replica's version")
        XCTAssertEqual(Set(store.conflictRows), [row, copy.value.id], "both noted for docfs status")
    }

    func testARefusedCreateIsSetAsideWhileTheOthersGoOnAndARetrySendsIt() async throws {
        server.reject(name: "bad.txt")
        try store.create("one.txt", "1")
        let bad = try store.create("bad.txt", "refused")
        try store.create("two.txt", "2")
        startEngine()
        try await waitUntil("the others are on the server") { Set(server.tree().keys) == ["one.txt", "two.txt"] }
        try await waitForOutbox(1)
        try await waitUntil("the item says why") { store.syncError(of: store.currentRow(bad)) != nil }
        XCTAssertTrue(store.syncError(of: store.currentRow(bad))!.contains("bad.txt"), store.syncError(of: store.currentRow(bad))!)
        XCTAssertEqual(store.outboxWaiting(rows: [bad])[bad]?.count, 1, "its change stays in the outbox")

        server.allow(name: "bad.txt")
        store.retry(bad)
        try await waitForOutbox()
        XCTAssertEqual(objects.text(of: "bad.txt", on: server), "refused")
        XCTAssertNil(store.syncError(of: store.currentRow(bad)))
        XCTAssertEqual(store.currentRow(bad), server.tree()["bad.txt"]?.id)
    }
}
