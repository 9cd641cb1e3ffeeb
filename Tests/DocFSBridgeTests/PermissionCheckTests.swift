import Glibc
import XCTest
@testable import DocFSBridge
import DocFSProvider

/// The mode-bit and ownership rules, row by row as ext4 answers them (generic_permission,
/// check_sticky, chown_ok / chgrp_ok, setattr_prepare, inode_init_owner).
final class PermissionCheckTests: XCTestCase {
    let owner = Caller(uid: 1000, gid: 1000)
    let member = Caller(uid: 1001, gid: 1001, groups: [1000, 3000])
    let other = Caller(uid: 1002, gid: 1002)
    let root = Caller(uid: 0, gid: 0)

    /// What the rules read, and nothing else: they are checked apart from where it comes from.
    private struct Subject: PermissionSubject {
        var ownerID: UInt32
        var groupID: UInt32
        var permissionBits: UInt16
        var isFolder: Bool
    }
    private func file(_ mode: UInt16, owner: UInt32 = 1000, group: UInt32 = 1000) -> Subject {
        Subject(ownerID: owner, groupID: group, permissionBits: mode, isFolder: false)
    }
    private func folder(_ mode: UInt16, owner: UInt32 = 1000, group: UInt32 = 1000) -> Subject {
        Subject(ownerID: owner, groupID: group, permissionBits: mode, isFolder: true)
    }
    private func errno(_ body: () throws(ProviderError) -> Void) -> Int32 {
        do { try body(); return 0 } catch { return error.errno }
    }
    private let r = PermissionCheck.read, w = PermissionCheck.write, x = PermissionCheck.execute

    func testOwnerGroupAndOtherEachGetTheirOwnBits() {
        let f = file(0o640)
        XCTAssertTrue(PermissionCheck.allows(r | w, on: f, for: owner))
        XCTAssertTrue(PermissionCheck.allows(r, on: f, for: member))
        XCTAssertFalse(PermissionCheck.allows(w, on: f, for: member))
        XCTAssertFalse(PermissionCheck.allows(r, on: f, for: other))
        // The owner class is decided first: an owner without bits is refused even if others may.
        XCTAssertFalse(PermissionCheck.allows(r, on: file(0o044), for: owner))
        XCTAssertTrue(PermissionCheck.allows(r, on: file(0o044), for: other))
        // A member of the group gets the group bits, never the other bits.
        XCTAssertFalse(PermissionCheck.allows(r, on: file(0o604), for: member))
        XCTAssertTrue(PermissionCheck.allows(r, on: file(0o604), for: other))
    }

    func testSupplementaryGroupsCount() {
        XCTAssertTrue(PermissionCheck.allows(r, on: file(0o640, owner: 5, group: 3000), for: member))
        XCTAssertFalse(PermissionCheck.allows(r, on: file(0o640, owner: 5, group: 3001), for: member))
    }

    func testRootBypassesModeBitsButNotAMissingExecuteBit() {
        XCTAssertTrue(PermissionCheck.allows(r | w, on: file(0o000), for: root))
        XCTAssertFalse(PermissionCheck.allows(x, on: file(0o644), for: root))
        XCTAssertTrue(PermissionCheck.allows(x, on: file(0o001), for: root))
        XCTAssertTrue(PermissionCheck.allows(r | w | x, on: folder(0o000), for: root))
    }

    func testChangingAFolderNeedsWriteAndSearch() {
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireChange(in: folder(0o755), for: other) }, EACCES)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireChange(in: folder(0o775), for: other) }, EACCES)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireChange(in: folder(0o733), for: other) }, 0)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireChange(in: folder(0o555), for: root) }, 0)
    }

    func testStickyFolderLetsOnlyOwnersRemove() {
        let tmp = folder(0o1777, owner: 0, group: 0)
        let mine = file(0o644, owner: 1002, group: 1002)
        let theirs = file(0o666)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireStickyOwner(item: mine, folder: tmp, for: other) }, 0)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireStickyOwner(item: theirs, folder: tmp, for: other) }, EPERM)
        XCTAssertEqual(errno { () throws(ProviderError) in try PermissionCheck.requireStickyOwner(item: theirs, folder: tmp, for: root) }, 0)
        // The folder's owner may remove anything in it.
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireStickyOwner(item: mine, folder: folder(0o1777), for: owner)
            }, 0)
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireStickyOwner(item: theirs, folder: folder(0o777, owner: 0), for: other)
            }, 0)
    }

    func testUserAttributes() {
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: true, on: file(0o644), kind: .file, for: other)
            }, EACCES)
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: false, on: file(0o644), kind: .file, for: other)
            }, 0)
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: true, on: folder(0o1777), kind: .folder, for: other)
            }, EPERM)
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: true, on: file(0o777), kind: .symlink, for: owner)
            }, EPERM)
        XCTAssertEqual(
            errno { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: false, on: file(0o777), kind: .fifo, for: owner)
            }, ENODATA)
    }

    func testNewItemsBelongToTheCallerOrInheritTheSetGroupIDFoldersGroup() {
        let plain = OwnershipRules.newItem(mode: 0o644, kind: .file, in: folder(0o755, owner: 0, group: 0), by: other)
        XCTAssertEqual([plain.ownerID, plain.groupID, UInt32(plain.posixPermissions)], [1002, 1002, 0o644])
        let shared = folder(0o2775, owner: 0, group: 3000)
        let sub = OwnershipRules.newItem(mode: 0o755, kind: .folder, in: shared, by: other)
        XCTAssertEqual([sub.groupID, UInt32(sub.posixPermissions)], [3000, 0o2755])
        // A file asking for set-group-ID with group execute in a group its maker is not in loses it.
        let f = OwnershipRules.newItem(mode: 0o2755, kind: .file, in: shared, by: other)
        XCTAssertEqual(UInt32(f.posixPermissions), 0o755)
        XCTAssertEqual(UInt32(OwnershipRules.newItem(mode: 0o2755, kind: .file, in: shared, by: member).posixPermissions), 0o2755)
        XCTAssertEqual(UInt32(OwnershipRules.newItem(mode: 0o2755, kind: .file, in: shared, by: root).posixPermissions), 0o2755)
    }

    func testChmodIsForTheOwnerAndDropsSetGroupIDOutsideTheGroup() throws {
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chmod(file(0o644), to: 0o600, by: other) }, EPERM)
        XCTAssertEqual(try OwnershipRules.chmod(file(0o644, group: 4000), to: 0o2755, by: owner), 0o755)
        XCTAssertEqual(try OwnershipRules.chmod(file(0o644), to: 0o2755, by: owner), 0o2755)
        XCTAssertEqual(try OwnershipRules.chmod(file(0o644, group: 4000), to: 0o2755, by: root), 0o2755)
    }

    func testChownAndChgrp() throws {
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chown(file(0o644), owner: 1002, group: nil, by: owner) }, EPERM)
        // Giving it to oneself again is allowed (chown_ok), and so is a group one belongs to.
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chown(file(0o644), owner: 1000, group: nil, by: owner) }, 0)
        let byMember = file(0o644, owner: 1001, group: 1001)
        XCTAssertEqual(try OwnershipRules.chown(byMember, owner: nil, group: 3000, by: member).groupID, 3000)
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chown(byMember, owner: nil, group: 4000, by: member) }, EPERM)
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chown(file(0o644), owner: nil, group: 1000, by: member) }, EPERM)
        XCTAssertEqual(try OwnershipRules.chown(file(0o644), owner: 7, group: 8, by: root).ownerID, 7)
        // A chowned file loses set-user-ID, and set-group-ID with group execute, even by root.
        XCTAssertEqual(try OwnershipRules.chown(file(0o6755), owner: 7, group: nil, by: root).posixPermissions, 0o755)
        XCTAssertEqual(try OwnershipRules.chown(file(0o2745), owner: 7, group: nil, by: root).posixPermissions, nil)
        XCTAssertEqual(try OwnershipRules.chown(folder(0o2775), owner: 7, group: nil, by: root).posixPermissions, nil)
        // chown(path, -1, -1): anyone, unless it would clear a set-ID bit, which is the owner's
        // change; the same clearing before a non-owner's write goes through.
        XCTAssertEqual(try OwnershipRules.chown(file(0o644), owner: nil, group: nil, by: other).posixPermissions, nil)
        XCTAssertEqual(errno { () throws(ProviderError) in _ = try OwnershipRules.chown(file(0o2755), owner: nil, group: nil, by: member) }, EPERM)
        XCTAssertEqual(try OwnershipRules.chown(file(0o2755), owner: nil, group: nil, by: member, beforeWrite: true).posixPermissions, 0o755)
        XCTAssertEqual(try OwnershipRules.chown(file(0o2745), owner: nil, group: nil, by: other, beforeWrite: true).posixPermissions, 0o745)
        XCTAssertEqual(try OwnershipRules.chown(file(0o2745), owner: nil, group: nil, by: member).posixPermissions, nil)
        XCTAssertEqual(try OwnershipRules.chown(file(0o4755), owner: nil, group: nil, by: root).posixPermissions, 0o755)
    }

    func testTimes() {
        XCTAssertEqual(
            errno { () throws(ProviderError) in try OwnershipRules.setTimes(file(0o666), explicit: true, bothNow: false, by: other) }, EPERM)
        XCTAssertEqual(errno { () throws(ProviderError) in try OwnershipRules.setTimes(file(0o666), explicit: false, bothNow: true, by: other) }, 0)
        XCTAssertEqual(
            errno { () throws(ProviderError) in try OwnershipRules.setTimes(file(0o644), explicit: false, bothNow: true, by: other) }, EACCES)
        XCTAssertEqual(errno { () throws(ProviderError) in try OwnershipRules.setTimes(file(0o644), explicit: false, bothNow: false, by: other) }, 0)
        XCTAssertEqual(errno { () throws(ProviderError) in try OwnershipRules.setTimes(file(0o400), explicit: true, bothNow: false, by: owner) }, 0)
    }

    func testWritesClearSetIDForAllButRoot() {
        XCTAssertEqual(OwnershipRules.clearingSetID(file(0o6755), forWriter: other), 0o755)
        // Set-group-ID without group execute goes only for a writer outside the file's group.
        XCTAssertEqual(OwnershipRules.clearingSetID(file(0o2745), forWriter: other), 0o745)
        XCTAssertEqual(OwnershipRules.clearingSetID(file(0o2745), forWriter: member), nil)
        XCTAssertEqual(OwnershipRules.clearingSetID(file(0o6755), forWriter: root), nil)
    }

    func testAModeGivenBackKeepsOnlyPermissionBits() throws {
        // A provider's mode with file-type bits above 0o7777: the rules read, and a cleared mode
        // sent back carries, only the permission bits.
        let typed = Item(
            identifier: ItemIdentifier("i"), parentIdentifier: .rootContainer, filename: "i", kind: .file, contentType: .data,
            creationDate: Date(timeIntervalSince1970: 0), contentModificationDate: Date(timeIntervalSince1970: 0), capabilities: [],
            posixPermissions: 0o104755, ownerID: 1000, groupID: 1000)
        XCTAssertEqual(typed.permissionBits, 0o4755)
        XCTAssertEqual(OwnershipRules.clearingSetID(typed, forWriter: other), 0o755)
        XCTAssertEqual(try OwnershipRules.chown(typed, owner: 7, group: nil, by: root).posixPermissions, 0o755)
    }

    func testNamesBelowAFolderAreCachedOnlyWhenEveryoneMaySearchIt() {
        XCTAssertTrue(folder(0o755).searchableByAll)
        XCTAssertTrue(folder(0o711).searchableByAll)
        XCTAssertFalse(folder(0o750).searchableByAll)
        XCTAssertFalse(folder(0o700).searchableByAll)
    }
}
