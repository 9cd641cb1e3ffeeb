import XCTest
@testable import DocFSBridge
import DocFSProvider

final class CopyInTests: XCTestCase {
    static let attributes = NewItemAttributes(ownerID: 1000, groupID: 100, posixPermissions: 0o644)

    func testANewFileLandsWithItsCreatorsAttributesAndTheStagedModificationTime() {
        let now = FileTime(seconds: 1_700_000_000, nanoseconds: 5)
        let c = CopyIn(parent: 7, name: "a.txt", attributes: Self.attributes, now: now)
        XCTAssertEqual(c.placement, CopyIn.Placement(parent: 7, name: "a.txt"))
        XCTAssertEqual(c.ownerID, 1000)
        XCTAssertEqual(c.groupID, 100)
        XCTAssertEqual(c.permissionBits, 0o644)
        let written = FileTime(seconds: 1_700_000_100, nanoseconds: 9)
        let landed = c.importAttributes(stagedModificationTime: written)
        XCTAssertEqual(landed.accessTime, now, "the access time starts at create")
        XCTAssertEqual(landed.modificationTime, written, "the modification time is the staged file's")
        XCTAssertEqual(landed.ownerID, 1000)
    }

    func testChmodChownAndAccessTimeBeforeTheImportAreCarriedByIt() {
        var c = CopyIn(parent: 1, name: "a", attributes: Self.attributes)
        let atime = FileTime(seconds: 42, nanoseconds: 0)
        c.apply(
            AttributeChanges(
                posixPermissions: 0o4755, ownerID: 0, groupID: 0,
                modificationTime: FileTime(seconds: 1, nanoseconds: 0), accessTime: atime))
        let landed = c.importAttributes(stagedModificationTime: FileTime(seconds: 99, nanoseconds: 0))
        XCTAssertEqual(landed.posixPermissions, 0o4755)
        XCTAssertEqual(landed.ownerID, 0)
        XCTAssertEqual(landed.groupID, 0)
        XCTAssertEqual(landed.accessTime, atime)
        // The modification time set by utimensat went to the staged file, which the import reads.
        XCTAssertEqual(landed.modificationTime, FileTime(seconds: 99, nanoseconds: 0))
        c.apply(AttributeChanges(groupID: 5))
        XCTAssertEqual(c.ownerID, 0, "a change leaves the fields it does not name")
        XCTAssertEqual(c.groupID, 5)
    }

    func testExtendedAttributesFollowSetxattrFlagsAndLimits() throws {
        var c = CopyIn(parent: 1, name: "a", attributes: Self.attributes)
        try c.setExtendedAttribute("user.a", to: Data("1".utf8), mode: .create)
        XCTAssertEqual(c.extendedAttributes["user.a"], Data("1".utf8))
        XCTAssertThrowsError(try c.setExtendedAttribute("user.a", to: Data("2".utf8), mode: .create)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, EEXIST)
        }
        XCTAssertThrowsError(try c.setExtendedAttribute("user.b", to: Data("2".utf8), mode: .replace)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, ENODATA)
        }
        try c.setExtendedAttribute("user.a", to: Data("3".utf8), mode: .replace)
        XCTAssertEqual(c.extendedAttributes["user.a"], Data("3".utf8))
        try c.setExtendedAttribute("user.a", to: nil, mode: .upsert)
        XCTAssertTrue(c.extendedAttributes.isEmpty)
        XCTAssertThrowsError(try c.setExtendedAttribute("user.a", to: nil, mode: .upsert)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, ENODATA, "removing what is not set")
        }
        XCTAssertThrowsError(try c.setExtendedAttribute("user.docfs.tags", to: Data(), mode: .upsert)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, EPERM, "docfs's own names wait for the item")
        }
        XCTAssertThrowsError(try c.setExtendedAttribute("trusted.x", to: Data(), mode: .upsert)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, EOPNOTSUPP)
        }
        XCTAssertThrowsError(try c.setExtendedAttribute("user.big", to: Data(count: ExtendedAttributes.maxValueBytes + 1), mode: .upsert)) {
            XCTAssertEqual(($0 as? ProviderError)?.errno, E2BIG)
        }
        XCTAssertTrue(c.extendedAttributes.isEmpty, "nothing refused is half-done")
    }

    func testARenameMovesTheIndexedPlacement() {
        let t = InodeTable()
        let n = t.addCopyIn(CopyIn(parent: 1, name: "a", attributes: Self.attributes))
        t.movePending(n, toParent: 9, name: "b")
        XCTAssertNil(t.pendingChild(parent: 1, name: "a"))
        XCTAssertTrue(t.pendingChild(parent: 9, name: "b") === n)
        XCTAssertEqual(t.copyIn(of: n)?.placement, CopyIn.Placement(parent: 9, name: "b"))
        _ = try? t.updateCopyIn(n) { $0.apply(AttributeChanges(posixPermissions: 0o600)) }
        XCTAssertEqual(t.copyIn(of: n)?.permissionBits, 0o600)
        XCTAssertEqual(t.copyIn(of: n)?.placement?.name, "b", "an attribute change keeps the placement")
    }
}
