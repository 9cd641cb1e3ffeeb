import XCTest
import Foundation
import Synchronization
import Logging
import DocFSProvider
@testable import DocFSStore
@testable import DocFSReplica

/// What a writer holds back and what its close releases (`HeldWriters`), against the store in
/// memory: the decisions the store forwards the bridge's opens and closes to.
final class HeldWritersTests: XCTestCase {
    var store: InMemoryReplicaStore!
    var writers: HeldWriters!
    /// What closes asked the engine to fetch again, in order.
    final class Fetched: Sendable {
        let rows = Mutex<[[Int64]]>([])
        func withLock<T>(_ body: (inout [[Int64]]) -> T) -> T { rows.withLock { body(&$0) } }
    }
    let fetched = Fetched()

    override func setUp() async throws {
        store = try InMemoryReplicaStore()
        writers = HeldWriters.watching(store)
        writers.setRefresh { [fetched] rows in fetched.withLock { $0.append(rows) } }
    }

    override func tearDown() async throws {
        store?.remove()
    }

    func testOneWatchPerStoreAcrossEngines() {
        XCTAssertTrue(HeldWriters.watching(store) === writers, "a second engine finds the writers the first one's mount holds")
    }

    func testACloseReleasesTheRowAndTheFoldersAboveChildrenFirst() throws {
        let top = try store.create("top")
        let inner = try store.create("inner", in: top)
        let file = try store.create("a.txt", "mine", in: inner)
        XCTAssertFalse(store.keepAsideForWriter(file), "nothing holds a file no writer opened")

        store.openForWriting(file)
        XCTAssertTrue(store.keepAsideForWriter(file))
        XCTAssertEqual(store.heldBackRows(), [file], "noted with the change kept aside")
        store.closeForWriting(file)
        XCTAssertEqual(fetched.withLock { $0 }, [[file, inner, top]])

        // A close with nothing kept aside asks for nothing.
        store.openForWriting(file)
        store.closeForWriting(file)
        XCTAssertEqual(fetched.withLock { $0 }.count, 1)
        XCTAssertFalse(writers.isHeld(file))
    }

    func testOnlyTheLastOfTwoWritersReleases() throws {
        let file = try store.create("a.txt", "mine")
        store.openForWriting(file)
        store.openForWriting(file)
        XCTAssertTrue(store.keepAsideForWriter(file))
        store.closeForWriting(file)
        XCTAssertEqual(fetched.withLock { $0 }, [], "another writer still holds it")
        XCTAssertTrue(writers.isHeld(file))
        XCTAssertTrue(store.keepAsideForWriter(file), "a further change waits too")
        store.closeForWriting(file)
        XCTAssertEqual(fetched.withLock { $0 }, [[file]])
    }

    func testARowKeptAsideAgainIsNotCleared() throws {
        let file = try store.create("a.txt", "mine")
        let other = try store.create("b.txt", "mine")
        store.openForWriting(file)
        store.openForWriting(other)
        XCTAssertTrue(store.keepAsideForWriter(file))
        XCTAssertTrue(store.keepAsideForWriter(other))
        store.closeForWriting(file)
        store.closeForWriting(other)
        XCTAssertEqual(fetched.withLock { $0 }, [[file], [other]])

        // Before the fetch is applied, the file is opened again and a newer change kept aside.
        store.openForWriting(file)
        XCTAssertTrue(store.keepAsideForWriter(file))
        writers.clearFetched([file, other])
        XCTAssertEqual(store.heldBackRows(), [file], "the newer change is still to fetch after a crash")
        store.closeForWriting(file)
        writers.clearFetched([file])
        XCTAssertEqual(store.heldBackRows(), [])
    }

    func testATemporaryRowBecomingPermanentKeepsTheHold() throws {
        let file = try store.create("a.txt", "mine")
        store.openForWriting(file)
        XCTAssertTrue(store.keepAsideForWriter(file))
        let entry = try XCTUnwrap(try store.outboxEntries(limit: 10, skipping: []).first)
        try store.completeOutbox([OutboxCompletion(entry: entry, permanentRow: 7)], refetch: [])

        XCTAssertTrue(writers.isHeld(7))
        XCTAssertFalse(writers.isHeld(file))
        XCTAssertTrue(writers.isKeptAside(7))
        store.closeForWriting(7)
        XCTAssertEqual(fetched.withLock { $0 }, [[7]])
    }
}

/// The anchor's position and witness, read and written together over the store's replica keys.
final class SyncAnchorTests: XCTestCase {
    func testRoundTripsWithAndWithoutWitnessInMemory() throws {
        let store = try InMemoryReplicaStore()
        defer { store.remove() }
        try roundTrip(store)
        XCTAssertEqual(try store.replicaMeta(["anchor"]), ["anchor": "12"])
    }

    func testRoundTripsWithAndWithoutWitnessInTheStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-anchor-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        try LocalStore.create(at: directory, layout: nil, folders: false)
        try LocalStore.linkRemote(
            at: directory,
            RemoteLink(
                postgres: "postgres://nobody@127.0.0.1:1/none", bucket: "bucket",
                prefix: "tree", endpoint: "http://127.0.0.1:1", region: "us-east-1",
                credentialsFile: nil))
        var store: LocalStore! = try LocalStore.open(at: directory, logger: Logger(label: "docfs.anchor.tests"))
        defer { store?.close() }
        try roundTrip(store.replica!)
        // The names stores on disk have, across a reopen.
        store.close()
        store = try LocalStore.open(at: directory, logger: Logger(label: "docfs.anchor.tests"))
        XCTAssertEqual(try store.replica!.replicaMeta(["anchor", "anchorOperation"]), ["anchor": "12"])
        XCTAssertEqual(try SyncAnchor.read(from: store.replica!), SyncAnchor(position: 12, witness: nil))
    }

    private func roundTrip(_ store: any ReplicaStore) throws {
        XCTAssertEqual(try SyncAnchor.read(from: store), SyncAnchor(position: 0, witness: nil), "none recorded yet")
        let witness = UUID()
        try SyncAnchor(position: 9, witness: witness).write(to: store)
        XCTAssertEqual(try SyncAnchor.read(from: store), SyncAnchor(position: 9, witness: witness))
        XCTAssertEqual(try store.replicaMeta(["anchorOperation"]), ["anchorOperation": witness.uuidString])
        // A position without a witness drops the older witness: it vouched for 9, not 12.
        try store.setSyncAnchor(12, witness: nil)
        let anchor = try store.syncAnchor()
        XCTAssertEqual(anchor.position, 12)
        XCTAssertNil(anchor.witness)
    }
}

/// The watch a mounted replica's store forwards writers to: set by the engine's init (before the
/// mount answers, `StoreMount`), the same after the engine stops and another starts.
final class HeldWritersInStoreTests: ReplicaTestCase {
    func testTheEngineHandsTheStoreItsWatchOnceAcrossRestarts() async throws {
        XCTAssertNil(store.replica?.state.writers, "no watch before an engine")
        let first = SyncEngine(
            store: store.replica!, configuration: Self.configuration, logger: logger,
            server: server, incomingServer: server, objects: objects, timing: Self.fastTiming)
        XCTAssertTrue(store.replica?.state.writers === first.writers, "set at the engine's init, before it starts")
        first.start()
        let file = try await store.importDocument(
            contents: Array("mine".utf8), named: "a.txt", toParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644))
        let row = try XCTUnwrap(store.row(for: file.identifier))
        store.contentsOpenedForWriting(of: file.identifier)
        await first.stop()

        startEngine()
        XCTAssertTrue(engine?.writers === first.writers)
        XCTAssertTrue(first.writers.isHeld(row), "the writer's hold outlives the engine")
        store.contentsClosedForWriting(of: file.identifier)
        XCTAssertFalse(first.writers.isHeld(row))
    }
}
