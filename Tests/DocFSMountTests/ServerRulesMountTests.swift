import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The layout's rules on the server (RemoteSchema version 3): a replica's layout folders are the
/// server's items, named alike on every replica, and a replica whose own rules are out of date
/// cannot put into a folder what the server's layout refuses.
final class ServerRulesMountTests: ReplicaTestCase {
    static let layout = """
        folders:
          - path: Notes
            allowedContentTypes: [public.plain-text]
          - path: Archive
            capabilities: [read, enumerate]
        """

    func testTheServerRefusesWhatItsLayoutRefusesFromAReplicaWithAnOldLayout() throws {
        let layoutFile = NSTemporaryDirectory() + "docfs-layout-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml"
        try Self.layout.write(toFile: layoutFile, atomically: true, encoding: .utf8)
        defer { unlink(layoutFile) }
        let r = try makeRemote(extraInitArguments: ["--layout", layoutFile])
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
        XCTAssertThrowsError(try r.servers.psql(r.databaseURL, """
            INSERT INTO docfs_items (parent_id, name, kind, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode)
            VALUES (\(archive), 'sneaked', 'directory', 0, 0, 0, 0, 0, 0, 493)
            """)) { error in XCTAssertTrue("\(error)".contains("does not allow adding items to /Archive"), "\(error)") }

        // B's stored layout loses its rules (as a replica made with an older layout would have).
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        let script = r.fx.dir + "/old-layout.py"
        try """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1])
            db.execute("UPDATE meta SET value = ? WHERE key = 'layout'", ('{"trash":false,"types":[],"folders":[]}',))
            db.commit()
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let tamper = r.fx.sh("python3 '\(script)' '\(b.store)/store.sqlite'")
        XCTAssertEqual(tamper.status, 0, "\(tamper)")
        try mountSecond(r, b)
        let png = ContentTypeMountTests.png.map { String(format: "\\%03o", $0) }.joined()
        XCTAssertEqual(r.fx.sh("printf '\(png)' > '\(b.mnt)/Notes/photo.png' && printf ok > '\(b.mnt)/Notes/ok.txt'").status, 0,
                       "B's old rules take both")

        // The server takes the text and refuses the PNG: B keeps it, marked; A never sees it.
        eventually("A has ok.txt") { contents(r.mnt + "/Notes/ok.txt") == "ok" }
        eventually("B's photo.png is marked refused") {
            (r.xattr(b.mnt + "/Notes/photo.png", "user.docfs.sync") ?? "").contains("takes only public.plain-text")
        }
        XCTAssertFalse(exists(r.mnt + "/Notes/photo.png"))
        XCTAssertEqual(try r.count("SELECT count(*) FROM docfs_items WHERE name = 'photo.png'"), 0)
        let log = contents(b.store + "/docfs.log") ?? ""
        XCTAssertTrue(log.contains("photo.png") && log.contains("takes only"), "B's log names the refused file and the rule")
    }
}
