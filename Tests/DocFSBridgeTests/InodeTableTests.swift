import XCTest
@testable import DocFSBridge
import DocFSProvider

final class InodeTableTests: XCTestCase {
    func testRootIsOneAndNeverForgotten() {
        let t = InodeTable()
        XCTAssertEqual(t.identifier(InodeTable.rootIno), .rootContainer)
        t.forget(InodeTable.rootIno, 100)
        XCTAssertEqual(t.identifier(InodeTable.rootIno), .rootContainer)
    }

    func testLookupCountsKeepANodeAlive() {
        let t = InodeTable()
        let a = t.remember(ItemIdentifier("a"))
        XCTAssertEqual(t.remember(ItemIdentifier("a")).ino, a.ino)
        t.forget(a.ino, 1)
        XCTAssertNotNil(t.node(a.ino))
        t.forget(a.ino, 1)
        XCTAssertNil(t.node(a.ino))
        // a new node gets a new number: numbers are never reused within a mount
        XCTAssertNotEqual(t.remember(ItemIdentifier("a")).ino, a.ino)
    }

    func testOpenHandlesOutliveForget() {
        let t = InodeTable()
        let a = t.remember(ItemIdentifier("a"))
        t.retainOpen(a)
        t.forget(a.ino, 1)
        XCTAssertNotNil(t.node(a.ino))
        XCTAssertTrue(t.releaseOpen(a))
        XCTAssertNil(t.node(a.ino))
    }

    func testPendingFileBindsToItsImportedIdentifierWithoutChangingInode() {
        let t = InodeTable()
        let n = t.addCopyIn(CopyIn(parent: InodeTable.rootIno, name: "new.txt", attributes: CopyInTests.attributes))
        XCTAssertNil(t.identifier(n.ino))
        XCTAssertTrue(t.pendingChild(parent: InodeTable.rootIno, name: "new.txt") === n)
        t.movePending(n, toParent: InodeTable.rootIno, name: "renamed.txt")
        XCTAssertNil(t.pendingChild(parent: InodeTable.rootIno, name: "new.txt"))
        XCTAssertEqual(t.pendingChildren(of: InodeTable.rootIno).map(\.name), ["renamed.txt"])
        let landed = t.bind(n, to: ItemIdentifier("tmp-1"))
        XCTAssertEqual(landed?.placement?.name, "renamed.txt")
        XCTAssertNil(t.copyIn(of: n))
        XCTAssertEqual(t.identifier(n.ino), ItemIdentifier("tmp-1"))
        XCTAssertTrue(t.pendingChildren(of: InodeTable.rootIno).isEmpty)
        // the provider swaps its temporary identifier for a permanent one: same inode
        t.replaceIdentifier(ItemIdentifier("tmp-1"), with: ItemIdentifier("42"))
        XCTAssertEqual(t.identifier(n.ino), ItemIdentifier("42"))
        XCTAssertEqual(t.remember(ItemIdentifier("42")).ino, n.ino)
    }

    func testDetachedIdentifierGetsAFreshNode() {
        let t = InodeTable()
        let a = t.remember(ItemIdentifier("7"))
        t.detach(ItemIdentifier("7"))
        XCTAssertNotEqual(t.remember(ItemIdentifier("7")).ino, a.ino)
    }

    func testDroppedPendingFileLeavesTheListing() {
        let t = InodeTable()
        let n = t.addCopyIn(CopyIn(parent: 5, name: "x", attributes: CopyInTests.attributes))
        t.dropPending(n)
        XCTAssertNil(t.pendingChild(parent: 5, name: "x"))
        // Still open somewhere: its owner and mode stay, but a close imports nothing.
        XCTAssertEqual(t.copyIn(of: n)?.ownerID, 1000)
        XCTAssertNil(t.copyIn(of: n)?.placement)
    }
}
