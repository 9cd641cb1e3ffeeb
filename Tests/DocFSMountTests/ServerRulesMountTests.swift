import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// The layout's rules on the server (RemoteSchema versions 3 and 4): a replica's layout folders
/// are the server's items, named alike on every replica, and a replica whose own rules are out
/// of date can neither put into a folder what the server's layout refuses nor rename, delete or
/// write what its capabilities do not allow.
final class ServerRulesMountTests: ReplicaTestCase {
    static let layout = """
        folders:
          - path: Notes
            allowedContentTypes: [public.plain-text]
          - path: Archive
            capabilities: [read, enumerate]
          - path: Frozen
            contents: [read]
          - path: Pictures
            allowedContentTypes: [image/png]
        """

    func makeRemoteWithLayout() throws -> RemoteMount {
        let layoutFile = NSTemporaryDirectory() + "docfs-layout-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml"
        try Self.layout.write(toFile: layoutFile, atomically: true, encoding: .utf8)
        defer { unlink(layoutFile) }
        return try makeRemote(extraInitArguments: ["--layout", layoutFile])
    }

    /// Runs a Python script on a replica's SQLite store (unmounted): as a replica made by an
    /// older docfs, or with an older layout, would have it.
    func tamper(_ r: RemoteMount, _ store: String, _ sql: String, _ arguments: String = "()") {
        let script = r.fx.dir + "/tamper-\(UInt32.random(in: 0...UInt32.max)).py"
        try? """
        import sqlite3, sys
        db = sqlite3.connect(sys.argv[1])
        db.execute(\"\"\"\(sql)\"\"\", \(arguments))
        db.commit()
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let result = r.fx.sh("python3 '\(script)' '\(store)/store.sqlite'")
        XCTAssertEqual(result.status, 0, "\(result)")
    }

    func testTheServerRefusesWhatItsLayoutRefusesFromAReplicaWithAnOldLayout() throws {
        let r = try makeRemoteWithLayout()
        let b = try makeSecond(r)
        // The layout's folders are the server's items: one identifier on both replicas.
        let notes = try XCTUnwrap(r.identifier(r.mnt + "/Notes"))
        XCTAssertLessThan(notes, 1 << 40, "a permanent identifier")
        XCTAssertEqual(r.identifier(b.mnt + "/Notes"), notes)
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE name IN ('Notes', 'Archive') AND NOT deleted"), 2)
        // and keep their capabilities there: Archive takes nothing new on B either.
        XCTAssertNotEqual(r.fx.sh("mkdir '\(b.mnt)/Archive/new'").status, 0)
        XCTAssertNotEqual(r.fx.sh("printf x > '\(b.mnt)/Notes/photo.png'").status, 0, "B's own rules refuse a PNG in Notes")

        // The server itself refuses what its layout refuses, whoever asks (here psql).
        let archive = try XCTUnwrap(r.identifier(r.mnt + "/Archive"))
        XCTAssertThrowsError(
            try r.servers.psql(
                r.databaseURL,
                """
                INSERT INTO docfs_items (parent_id, name, kind, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode)
                VALUES (\(archive), 'sneaked', 'directory', 0, 0, 0, 0, 0, 0, 493)
                """)
        ) { error in XCTAssertTrue("\(error)".contains("does not allow adding items to /Archive"), "\(error)") }

        // B's stored layout loses its rules (as a replica made with an older layout would have).
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        tamper(r, b.store, "UPDATE meta SET value = ? WHERE key = 'layout'", "('{\"trash\":false,\"types\":[],\"folders\":[]}',)")
        try mountSecond(r, b)
        let png = ContentTypeMountTests.png.map { String(format: "\\%03o", $0) }.joined()
        XCTAssertEqual(
            r.fx.sh(
                "printf '\(png)' > '\(b.mnt)/Notes/photo.png' && printf ok > '\(b.mnt)/Notes/ok.txt' && printf text > '\(b.mnt)/Pictures/notes.txt'"
            ).status, 0,
            "B's old rules take all three")

        // The server takes the text and refuses the PNG: B keeps it, marked; A never sees it.
        eventually("A has ok.txt") { contents(r.mnt + "/Notes/ok.txt") == "ok" }
        eventually("B's photo.png is marked refused") {
            (r.xattr(b.mnt + "/Notes/photo.png", "user.docfs.sync") ?? "").contains("takes only public.plain-text")
        }
        XCTAssertFalse(exists(r.mnt + "/Notes/photo.png"))
        // An allowed type given as a MIME type: checked by the server as the replicas resolved it.
        eventually("B's Pictures/notes.txt is marked refused") {
            (r.xattr(b.mnt + "/Pictures/notes.txt", "user.docfs.sync") ?? "").contains("/Pictures takes only public.png")
        }
        XCTAssertFalse(exists(r.mnt + "/Pictures/notes.txt"))
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE name = 'photo.png'"), 0)
        let log = contents(b.store + "/docfs.log") ?? ""
        XCTAssertTrue(log.contains("photo.png") && log.contains("takes only"), "B's log names the refused file and the rule")
    }

    func testTheServerRefusesRenamesDeletesAndEditsTheItemsCapabilitiesDoNotAllow() throws {
        let r = try makeRemoteWithLayout()
        XCTAssertEqual(
            r.fx.sh("printf a > mnt/Frozen/a.txt && printf b > mnt/Frozen/b.txt && printf c > mnt/Frozen/c.txt").status, 0,
            "Frozen takes new files; what is in it is read-only")
        XCTAssertNotEqual(r.fx.sh("mv mnt/Frozen/a.txt mnt/Frozen/a2.txt").status, 0, "A's own rules refuse the rename")
        try r.waitUntilUploaded()
        let b = try makeSecond(r)
        XCTAssertEqual(contents(b.mnt + "/Frozen/c.txt"), "c")

        // The server keeps the items' capabilities itself, and refuses whoever asks (here psql).
        let frozen = try XCTUnwrap(r.identifier(r.mnt + "/Frozen"))
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM docfs_items WHERE parent_id = \(frozen) AND caps = '[\"read\"]'::jsonb AND NOT deleted"), 3,
            "\((try? r.servers.psql(r.databaseURL, "SELECT id, name, caps, deleted FROM docfs_items")) ?? [])")
        let a = try XCTUnwrap(r.identifier(r.mnt + "/Frozen/a.txt"))
        XCTAssertThrowsError(try r.servers.psql(r.databaseURL, "UPDATE docfs_items SET name = 'sneaked.txt' WHERE id = \(a)")) { error in
            XCTAssertTrue("\(error)".contains("does not allow renaming /Frozen/a.txt"), "\(error)")
        }

        // B's items lose their capabilities' limits (as on a replica with an older layout).
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        tamper(r, b.store, "UPDATE item SET caps = 65535 WHERE parent = (SELECT id FROM item WHERE name = 'Frozen')")
        try mountSecond(r, b)
        let changed = r.fx.sh(
            "mv '\(b.mnt)/Frozen/a.txt' '\(b.mnt)/Frozen/a2.txt' && rm '\(b.mnt)/Frozen/b.txt' && printf changed > '\(b.mnt)/Frozen/c.txt'")
        XCTAssertEqual(changed.status, 0, "B's old rules allow all three: \(changed)")

        // The server refuses all three: B's rename and delete are undone; B's edit goes beside the
        // file as a conflicted copy (Frozen takes new files), and the file keeps the server's version.
        eventually("B's rename is undone") { exists(b.mnt + "/Frozen/a.txt") && !exists(b.mnt + "/Frozen/a2.txt") }
        eventually("B's delete is undone") { contents(b.mnt + "/Frozen/b.txt") == "b" }
        func copyName(_ mnt: String) -> String? {
            ((try? FileManager.default.contentsOfDirectory(atPath: mnt + "/Frozen")) ?? []).first { $0.hasPrefix("c (conflicted copy from ") }
        }
        eventually("B's edit is in a conflicted copy on A") { copyName(r.mnt).map { contents(r.mnt + "/Frozen/" + $0) == "changed" } ?? false }
        let copy = try XCTUnwrap(copyName(b.mnt))
        XCTAssertEqual(contents(b.mnt + "/Frozen/" + copy), "changed", "B's edit is not lost: \(contents(b.store + "/docfs.log") ?? "")")
        eventually("B's c.txt has the server's version") { contents(b.mnt + "/Frozen/c.txt") == "c" }
        XCTAssertTrue(
            (r.xattr(b.mnt + "/Frozen/c.txt", "user.docfs.conflict") ?? "").contains("does not allow writing /Frozen/c.txt"),
            r.xattr(b.mnt + "/Frozen/c.txt", "user.docfs.conflict") ?? "no conflict noted")
        XCTAssertTrue(
            (r.xattr(b.mnt + "/Frozen/a.txt", "user.docfs.conflict") ?? "").contains("does not allow renaming"),
            r.xattr(b.mnt + "/Frozen/a.txt", "user.docfs.conflict") ?? "no conflict noted")
        // A never saw any of it.
        XCTAssertEqual(contents(r.mnt + "/Frozen/a.txt"), "a")
        XCTAssertEqual(contents(r.mnt + "/Frozen/b.txt"), "b")
        XCTAssertEqual(contents(r.mnt + "/Frozen/c.txt"), "c")
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE name = 'a2.txt'"), 0)
        XCTAssertNotEqual(r.fx.sh("printf x >> 'mnt/Frozen/\(copy)'").status, 0, "the copy is read-only too, as what else is in Frozen")
        let log = contents(b.store + "/docfs.log") ?? ""
        XCTAssertTrue(log.contains("does not allow deleting /Frozen/b.txt"), "B's log names the refused delete and the rule")
    }
}
