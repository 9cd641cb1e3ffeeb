import XCTest
import DocFSProvider
import DocFSWire
@testable import DocFSStore
@testable import DocFSReplica

/// The incoming apply's decisions (`IncomingApply`), run against the store in memory.
final class IncomingApplyTests: XCTestCase {
    var store: InMemoryReplicaStore!

    override func setUpWithError() throws { store = try InMemoryReplicaStore() }
    override func tearDown() { store.remove() }

    /// The server's item as the incoming sync hands it over.
    func server(
        _ row: Int64, in parent: Int64 = ReplicaRows.root, _ name: String, _ kind: ItemKind = .file,
        deleted: Bool = false
    ) -> ServerItem {
        ServerItem(
            id: row, parentID: parent, name: name, kind: kind, creationTime: FileTime(totalNanoseconds: 1),
            modificationTime: FileTime(totalNanoseconds: 1), deleted: deleted)
    }

    /// An item this replica has from the server already.
    func have(_ row: Int64, in parent: Int64 = ReplicaRows.root, _ name: String, _ kind: ItemKind = .file) throws {
        try store.addServerItem(
            ServerItem(
                id: row, parentID: parent, name: name, kind: kind,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)))
    }

    func testAFolderMovedBelowItselfIsDeferred() throws {
        try have(10, "a", .folder)
        try have(11, in: 10, "b", .folder)
        let result = try store.applyIncoming([server(10, in: 11, "a", .folder)])
        XCTAssertEqual(result.deferred, [10])
        XCTAssertEqual(result.applied, 0)
        XCTAssertEqual(store.incomingItem(10)?.parentRow, ReplicaRows.root, "the folder stays where it is")
    }

    func testAnItemWithAChangeOfThisReplicaWaitingIsLeftPending() throws {
        try have(20, "notes.txt")
        try store.write("mine", to: 20, base: 1)
        let result = try store.applyIncoming([server(20, "renamed.txt")])
        XCTAssertEqual(result.pending, [20])
        XCTAssertEqual(result.applied, 0)
        XCTAssertEqual(store.incomingItem(20)?.name, "notes.txt")
    }

    func testAFileOpenForWritingKeepsOtherReplicasChangesAside() throws {
        try have(21, "open.txt")
        store.state.withLock { _ = $0.held.insert(21) }
        let result = try store.applyIncoming([server(21, "moved.txt"), server(21, "open.txt", deleted: true)])
        XCTAssertEqual(result.pending, [21])
        XCTAssertEqual(store.incomingItem(21)?.name, "open.txt")
    }

    func testANewItemHereStepsAsideAndKeepsItsCreateUnderItsNewName() throws {
        let mine = try store.create("a.txt", "mine")
        let result = try store.applyIncoming([server(30, "a.txt")])
        XCTAssertEqual(result.applied, 1)
        XCTAssertEqual(result.movedAside, [], "not on the server yet: nothing of it to fetch")
        XCTAssertEqual(store.incomingItem(30)?.name, "a.txt")
        let aside = try XCTUnwrap(store.incomingItem(mine)?.name)
        XCTAssertNotEqual(aside, "a.txt")
        let create = try XCTUnwrap(store.state.withLock { $0.outbox.first { $0.row == mine && $0.kind == .create } })
        XCTAssertEqual(create.name, aside, "the waiting create goes up under the name it has here")
    }

    func testAnItemOnTheServerStepsAsideAndIsFetchedAgain() throws {
        try have(31, "b.txt")
        let result = try store.applyIncoming([server(32, "b.txt")])
        XCTAssertEqual(result.movedAside, [31])
        XCTAssertEqual(store.incomingItem(32)?.name, "b.txt")
        XCTAssertNotEqual(store.incomingItem(31)?.name, "b.txt")
    }

    func testAFolderDeletedElsewhereThatHoldsANewItemHereStays() throws {
        try have(40, "kept", .folder)
        let mine = try store.create("new.txt", "mine", in: 40)
        let result = try store.applyIncoming([server(40, "kept", .folder, deleted: true)])
        XCTAssertEqual(result.applied, 0)
        XCTAssertEqual(store.incomingItem(40)?.kind, .folder)
        XCTAssertEqual(store.incomingItem(mine)?.parentRow, 40)
    }

    func testDeletionsApplyChildrenBeforeTheirFolder() throws {
        try have(50, "gone", .folder)
        try have(51, in: 50, "inner", .folder)
        try have(52, in: 51, "file.txt")
        let result = try store.applyIncoming([
            server(50, "gone", .folder, deleted: true), server(51, in: 50, "inner", .folder, deleted: true),
            server(52, in: 51, "file.txt", deleted: true),
        ])
        XCTAssertEqual(result.applied, 3)
        for row: Int64 in [50, 51, 52] { XCTAssertNil(store.incomingItem(row)) }
    }

    func testAParentNotHereIsReportedMissing() throws {
        let result = try store.applyIncoming([
            server(61, in: 60, "orphan.txt"), server(63, in: 62, "child", .folder),
            server(62, "parent", .folder),
        ])
        XCTAssertEqual(result.missingParents, [60], "a parent in the same batch is applied first")
        XCTAssertEqual(result.applied, 2)
        XCTAssertNil(store.incomingItem(61))
        XCTAssertEqual(store.path(ofRow: 63), "/parent/child")
    }

    func testTheSameStateAsHereIsNotAppliedAgain() throws {
        try have(70, "same.txt")
        XCTAssertEqual(try store.applyIncoming([server(70, "same.txt")]).applied, 0)
        XCTAssertEqual(try store.applyIncoming([server(70, "other.txt")]).applied, 1)
    }

    // MARK: Conflicted copies (`ConflictedCopy`)

    func testAConflictedCopyTakesItsNameFromANewItemHereNotFromOneOnTheServer() throws {
        try have(80, "doc.txt")
        let mine = try store.create("doc (copy).txt", "mine")
        try store.forkConflictedCopy(of: 80, as: 81, name: "doc (copy).txt", parentRow: ReplicaRows.root, sending: 1)
        XCTAssertEqual(store.forks.last?.name, "doc (copy).txt")
        let aside = try XCTUnwrap(store.incomingItem(mine)?.name)
        XCTAssertNotEqual(aside, "doc (copy).txt", "the new item here steps aside")
        XCTAssertEqual(store.state.withLock { $0.outbox.first { $0.row == mine }?.name }, aside)

        try have(82, "other.txt")
        try store.forkConflictedCopy(of: 80, as: 83, name: "other.txt", parentRow: ReplicaRows.root, sending: 2)
        XCTAssertNotEqual(store.forks.last?.name, "other.txt", "the copy is suffixed here")
        XCTAssertEqual(store.incomingItem(82)?.name, "other.txt", "an item on the server keeps its name")
    }

    func testAConflictedCopyAlreadyHereKeepsItsName() throws {
        try have(90, "a.txt")
        try have(91, "a (copy).txt")
        try store.forkConflictedCopy(of: 90, as: 91, name: "a (copy).txt", parentRow: ReplicaRows.root, sending: 1)
        XCTAssertEqual(store.forks, [InMemoryReplicaStore.Fork(row: 90, copyRow: 91, name: "a (copy).txt", parentRow: ReplicaRows.root)])
    }
}
