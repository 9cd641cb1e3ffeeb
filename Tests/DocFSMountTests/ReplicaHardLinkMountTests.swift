import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Hard links across replicas (schema 12, `RemoteSchema+Links`): a name made on one replica is a
/// further name of the same file on the other (one inode, `st_nlink` 2), an edit through either
/// name is that file's, a name removed or renamed on one is so on the other; the server refuses
/// a name no replica could have made and the tree stays whole; an older server refuses links.
/// One name of several goes to the trash and back on one replica and so on the other (schema 13).
final class ReplicaHardLinkMountTests: ReplicaTestCase {
    func inode(_ path: String) -> (ino: UInt64, links: UInt64)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (UInt64(st.st_ino), UInt64(st.st_nlink))
    }

    func testALinkOnOneReplicaIsOneFileWithTwoNamesOnTheOther() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/d mnt/e && printf one > mnt/d/a").status, 0)
        try waitForQuiet(r, b)

        let made = r.fx.sh("ln mnt/d/a mnt/e/b")
        XCTAssertEqual(made.status, 0, "\(made)")
        eventually("B shows A's link as a second name of the same file", timeout: 60) {
            guard let first = inode(b.mnt + "/d/a"), let second = inode(b.mnt + "/e/b") else { return false }
            return first.ino == second.ino && first.links == 2 && second.links == 2
        }
        XCTAssertEqual(contents(b.mnt + "/e/b"), "one")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_items WHERE link_of IS NOT NULL AND NOT deleted"), 1,
            "the server keeps the name as a name row")

        // An edit through either name on B is the one file's, on A under both names.
        XCTAssertEqual(r.fx.sh("printf two > '\(b.mnt)/e/b'").status, 0)
        eventually("A reads B's edit through the link under both names", timeout: 60) {
            contents(r.mnt + "/d/a") == "two" && contents(r.mnt + "/e/b") == "two"
        }
        XCTAssertEqual(r.fx.sh("printf three > '\(b.mnt)/d/a'").status, 0)
        eventually("A reads B's edit through the first name", timeout: 60) { contents(r.mnt + "/e/b") == "three" }
        XCTAssertEqual(
            try r.count("SELECT count(DISTINCT item_id) FROM docfs_versions v JOIN docfs_items i ON i.id = v.item_id WHERE i.name = 'a'"), 1,
            "the edits are versions of one item")

        // A rename of the further name.
        XCTAssertEqual(r.fx.sh("mv mnt/e/b mnt/d/c").status, 0)
        eventually("B shows the renamed name, still the same file", timeout: 60) {
            guard let first = inode(b.mnt + "/d/a"), let moved = inode(b.mnt + "/d/c") else { return false }
            return !exists(b.mnt + "/e/b") && first.ino == moved.ino && moved.links == 2
        }

        // The file's first name goes on A: the other stays on B, one name now.
        XCTAssertEqual(r.fx.sh("rm mnt/d/a").status, 0)
        eventually("B keeps the other name with the contents", timeout: 60) {
            !exists(b.mnt + "/d/a") && contents(b.mnt + "/d/c") == "three" && inode(b.mnt + "/d/c")?.links == 1
        }
        // And a link made on B, unlinked on B: A follows.
        XCTAssertEqual(r.fx.sh("ln '\(b.mnt)/d/c' '\(b.mnt)/e/again'").status, 0)
        eventually("A shows B's link", timeout: 60) {
            inode(r.mnt + "/e/again")?.ino == inode(r.mnt + "/d/c")?.ino && inode(r.mnt + "/d/c")?.links == 2
        }
        XCTAssertEqual(r.fx.sh("rm '\(b.mnt)/e/again'").status, 0)
        eventually("A drops B's removed name", timeout: 60) { !exists(r.mnt + "/e/again") && inode(r.mnt + "/d/c")?.links == 1 }
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(Set(try r.serverTree().keys), ["/d", "/e", "/d/c"])
    }

    func testOneNameTrashedOnOneReplicaIsTrashedAndRestoredOnTheOther() throws {
        let r = try makeRemote(mount: false)
        try r.fx.mount(extra: ["--trash"])
        let b = try makeSecond(r, extra: ["--trash"])
        XCTAssertEqual(r.fx.sh("mkdir mnt/d && printf one > mnt/d/a && ln mnt/d/a mnt/d/b").status, 0)
        try waitForQuiet(r, b)

        let trashed = r.fx.sh("mv mnt/d/b mnt/.Trash/")
        XCTAssertEqual(trashed.status, 0, "\(trashed)\n\(r.logTail())")
        eventually("B shows the name in its trash, the same file as the other name", timeout: 60) {
            guard let kept = inode(b.mnt + "/d/a"), let inTrash = inode(b.mnt + "/.Trash/b") else { return false }
            return !exists(b.mnt + "/d/b") && kept.ino == inTrash.ino && kept.links == 2 && inTrash.links == 2
        }
        XCTAssertEqual(contents(b.mnt + "/.Trash/b"), "one")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_items WHERE link_of IS NOT NULL AND trashed_ns IS NOT NULL AND NOT deleted"), 1,
            "the server keeps the name in its trash")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_items WHERE name = 'a' AND trashed_ns IS NULL AND NOT deleted"), 1,
            "the item stays where it is")

        // B restores it: A has it back, the same file under both names.
        let restored = r.fx.sh("mv '\(b.mnt)/.Trash/b' '\(b.mnt)/d/b'")
        XCTAssertEqual(restored.status, 0, "\(restored)")
        eventually("A has the name back", timeout: 60) {
            guard let first = inode(r.mnt + "/d/a"), let back = inode(r.mnt + "/d/b") else { return false }
            return !exists(r.mnt + "/.Trash/b") && first.ino == back.ino && back.links == 2
        }

        // The file's own (first) name goes to the trash and back the same way.
        XCTAssertEqual(r.fx.sh("mv mnt/d/a mnt/.Trash/").status, 0)
        eventually("B shows the first name in its trash, the same file as the other", timeout: 60) {
            guard let kept = inode(b.mnt + "/d/b"), let inTrash = inode(b.mnt + "/.Trash/a") else { return false }
            return !exists(b.mnt + "/d/a") && kept.ino == inTrash.ino && kept.links == 2
        }
        XCTAssertEqual(r.fx.sh("mv '\(b.mnt)/.Trash/a' '\(b.mnt)/d/a'").status, 0)
        eventually("A has the first name back", timeout: 60) {
            guard let first = inode(r.mnt + "/d/a"), let other = inode(r.mnt + "/d/b") else { return false }
            return !exists(r.mnt + "/.Trash/a") && first.ino == other.ino && first.links == 2
        }

        // Trashed again and removed from the trash: only the name goes, everywhere.
        XCTAssertEqual(r.fx.sh("mv mnt/d/b mnt/.Trash/ && rm mnt/.Trash/b").status, 0)
        eventually("B drops just the name", timeout: 60) {
            !exists(b.mnt + "/.Trash/b") && !exists(b.mnt + "/d/b") && inode(b.mnt + "/d/a")?.links == 1
        }
        XCTAssertEqual(contents(b.mnt + "/d/a"), "one")
        try waitForQuiet(r, b)
        assertSameTrees(r, b)
        XCTAssertEqual(Set(try r.serverTree().keys), ["/d", "/d/a"])
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE link_of IS NOT NULL AND NOT deleted"), 0)
    }

    /// Links made on a replica away from the server meet what another replica did meanwhile: a
    /// name taken there is suffixed as any name; a link to a file deleted there is refused, and
    /// the name leaves the replica that made it with one log line (nothing refused stays half-done).
    func testLinksMadeAwayFollowTheConflictRules() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/d && printf one > mnt/d/f && printf two > mnt/d/g").status, 0)
        try waitForQuiet(r, b)
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15), "the daemon is still running after docfs unmount")
        XCTAssertEqual(r.fx.sh("rm '\(b.mnt)/d/f' && printf B > '\(b.mnt)/d/taken'").status, 0)
        eventually("B's changes on the server", timeout: 60) {
            let tree = (try? r.serverTree()) ?? [:]
            return tree["/d/f"] == nil && tree["/d/taken"] != nil
        }
        try servers.stopPostgres()
        addTeardownBlock { [servers] in try? servers?.startPostgres() }
        try r.fx.mount()
        XCTAssertEqual(r.fx.sh("ln mnt/d/f mnt/d/linked && ln mnt/d/g mnt/d/taken").status, 0, "links made away from the server")
        try servers.startPostgres()
        try waitForQuiet(r, b)
        // B's LISTEN went with PostgreSQL's stop, so both may look quiet before B's catch-up after
        // the restart has read the link A sent (seen once in `make test`).
        eventually("B has the link A made away", timeout: 60) { inode(b.mnt + "/d/taken 2") != nil }

        XCTAssertFalse(exists(r.mnt + "/d/f") || exists(r.mnt + "/d/linked"), "\(names(r.mnt + "/d"))")
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["refused the hard link"]).isEmpty, r.logTail())
        for mnt in [r.mnt, b.mnt] {
            XCTAssertEqual(contents(mnt + "/d/taken"), "B", "\(mnt): the other replica's file keeps its name")
            XCTAssertEqual(inode(mnt + "/d/taken 2")?.ino, inode(mnt + "/d/g")?.ino, "\(mnt): the link is suffixed: \(names(mnt + "/d"))")
            XCTAssertEqual(inode(mnt + "/d/g")?.links, 2)
        }
        assertSameTrees(r, b)
        // A replica made now gets the names from the server's listing.
        let c = try makeSecond(r, name: "third")
        XCTAssertEqual(inode(c.mnt + "/d/taken 2")?.ino, inode(c.mnt + "/d/g")?.ino, "\(names(c.mnt + "/d"))")
        XCTAssertEqual(inode(c.mnt + "/d/g")?.links, 2)
        XCTAssertEqual(contents(c.mnt + "/d/taken 2"), "two")
    }

    func testTheServerRefusesANameNoReplicaCouldMakeAndTheTreeStaysWhole() throws {
        let r = try makeRemote()
        XCTAssertEqual(
            r.fx.sh("mkdir mnt/shared && printf a > mnt/shared/a.txt && printf g > mnt/shared/gone.txt && ln mnt/shared/a.txt mnt/shared/b.txt")
                .status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(r.fx.sh("rm mnt/shared/gone.txt").status, 0)
        try r.waitUntilUploaded()
        _ = try r.replicaArguments(role: "hostile")
        let hostile = r.roleName("hostile")
        let before = try r.serverTree()
        let shared = try XCTUnwrap(before["/shared"]?.id), file = try XCTUnwrap(before["/shared/a.txt"]?.id)
        let name = try XCTUnwrap(before["/shared/b.txt"]?.id)
        let gone = try r.count("SELECT id FROM docfs_items WHERE name = 'gone.txt' AND deleted")
        let link = { (fields: String) in #"{"op":"\#(UUID())","kind":"link",\#(fields)}"# }

        try assertOperationRefused(
            r, hostile, "a link to a folder", link(#""item":\#(shared),"parent":\#(shared),"name":"x""#),
            "folders cannot be hard-linked")
        try assertOperationRefused(
            r, hostile, "a link into a missing folder", link(#""item":\#(file),"parent":999999999,"name":"x""#),
            "is not on the server")
        try assertOperationRefused(
            r, hostile, "a link into a file", link(#""item":\#(file),"parent":\#(file),"name":"x""#),
            "is not a directory")
        try assertOperationRefused(
            r, hostile, "a link with a / in its name", link(#""item":\#(file),"parent":\#(shared),"name":"a/b""#),
            "is not a valid item name")
        try assertOperationRefused(
            r, hostile, "a link named ..", link(#""item":\#(file),"parent":\#(shared),"name":"..""#),
            "is not a valid item name")
        try assertOperationRefused(
            r, hostile, "a link to a deleted file", link(#""item":\#(gone),"parent":\#(shared),"name":"x""#),
            "is not on the server")
        try assertOperationRefused(
            r, hostile, "a link to a name", link(#""item":\#(name),"parent":\#(shared),"name":"x""#),
            "not an item")
        try assertOperationRefused(
            r, hostile, "an unlink of an item", #"{"op":"\#(UUID())","kind":"unlink","item":\#(file)}"#,
            "is an item, not one of its further names")
        try assertOperationRefused(
            r, hostile, "an edit of a name row", #"{"op":"\#(UUID())","kind":"attributes","item":\#(name),"mode":511}"#,
            "is a further name of item")
        try assertOperationRefused(
            r, hostile, "a delete of a name row", #"{"op":"\#(UUID())","kind":"delete","item":\#(name)}"#,
            "is a further name of item")

        let after = try r.serverTree()
        XCTAssertEqual(Set(after.keys), Set(before.keys), "the tree is as the replica left it")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE link_of IS NOT NULL"), 1, "no name row was added")
        XCTAssertEqual(inode(r.mnt + "/shared/a.txt")?.links, 2)
    }

    func testAnOlderServerRefusesLinksWithOneLineUntilItIsUpgraded() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf one > mnt/a").status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15), "the daemon is still running after docfs unmount")
        // The server as schema 11 left it (before names, and before packs kept their versions:
        // such a server takes a pack without one).
        _ = try servers.psql(
            r.databaseURL, "DELETE FROM docfs_schema_migrations WHERE version >= 12; DELETE FROM docfs_meta WHERE key = 'pack_versions'")
        try r.fx.mount()
        XCTAssertEqual(r.fx.sh("printf two > mnt/b").status, 0)
        try r.waitUntilUploaded()
        let refused = r.fx.sh("ln mnt/a mnt/c")
        XCTAssertNotEqual(refused.status, 0)
        XCTAssert(refused.stderr.contains("Operation not permitted"), "\(refused)")
        XCTAssertFalse(exists(r.mnt + "/c"))
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["`docfs remote setup` to upgrade it"]).isEmpty, r.logTail())

        let setup = r.fx.docfs(
            [
                "remote", "setup", "--remote", r.databaseURL, "--objects", "s3://\(r.bucket)/\(r.prefix)",
                "--s3-endpoint", servers.s3Endpoint,
            ], env: r.awsEnvironment(secret: servers.secretKey))
        XCTAssertEqual(setup.status, 0, "\(setup)")
        // The idle replica asks the server again: links are taken without a remount.
        eventually("a link taken once the server is upgraded", timeout: 30) { r.fx.sh("ln mnt/a mnt/c").status == 0 }
        try r.waitUntilUploaded()
        XCTAssertNotNil(try r.serverTree()["/c"])
    }
}
