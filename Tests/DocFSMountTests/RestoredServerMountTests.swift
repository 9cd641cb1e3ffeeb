import Foundation
import XCTest

/// The server's database restored from a backup while other replicas go on writing: `pg_restore`
/// rewinds the identifiers and change log positions, so the others' new items take identifiers
/// a replica that was away still holds. That replica notices when it comes back, keeps what the
/// server lost in `STORE/recovered/`, and changes nothing of the others'.
final class RestoredServerMountTests: ReplicaTestCase {
    func testARestoreIsNoticedAfterOtherReplicasWroteAndNothingIsMixedUp() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf 'in the backup' > mnt/f0.txt").status, 0)
        try r.waitUntilUploaded()
        let dump = try r.dumpDatabase()
        XCTAssertEqual(r.fx.sh("for i in 1 2 3 4 5; do printf \"a$i after the backup\" > mnt/a$i.txt; done").status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15))

        try r.restoreDatabase(from: dump)

        // Two other replicas write after the restore, more than A did.
        let b = try makeSecond(r, name: "b")
        let c = try makeSecond(r, name: "c")
        XCTAssertEqual(
            r.fx.sh("for i in $(seq 1 20); do printf \"c$i from C\" > '\(c.mnt)'/c$i.txt; done; printf 'b1 from B' > '\(b.mnt)'/b1.txt").status, 0)
        eventually("B and C have sent everything", timeout: 120) {
            [b, c].allSatisfy { (self.statusFields(r, $0.mnt)?["pending"] as? NSNumber)?.intValue == 0 }
        }
        let before = try r.serverTree()
        XCTAssertTrue(
            before.keys.contains { $0.hasPrefix("/a") } == false, "the restored server has none of A's later files: \(before.keys.sorted())")

        // A comes back: it notices, keeps its five files aside, and takes the server's tree.
        try r.fx.mount()
        let status = try r.waitForStatus("the restore reported", timeout: 120) { $0.raw.contains("\"restore\":\"") && $0.pending == 0 }
        XCTAssertTrue(status.raw.contains("5 file(s)"), status.raw)
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["restored to an earlier point"]).isEmpty, r.logTail())
        try waitForQuiet(r, b, others: [c])
        let recovered = try FileManager.default.contentsOfDirectory(atPath: r.fx.store + "/recovered")
        XCTAssertEqual(recovered.count, 1, "\(recovered)")
        for i in 1...5 {
            XCTAssertEqual(contents(r.fx.store + "/recovered/\(recovered[0])/a\(i).txt"), "a\(i) after the backup")
        }
        let onA = try r.localTree(r.mnt), onB = try r.localTree(b.mnt), onC = try r.localTree(c.mnt)
        XCTAssertEqual(Set(onA.keys), Set(onB.keys), "A holds the server's tree")
        for (path, entry) in onB {
            XCTAssertEqual(onA[path]?.sha256, entry.sha256, "\(path) on A")
            XCTAssertEqual(onC[path]?.sha256, entry.sha256, "\(path) on C")
        }
        XCTAssertEqual(contents(c.mnt + "/c1.txt"), "c1 from C")

        // A's changes now reach the items it shows, and only those.
        XCTAssertEqual(r.fx.sh("chmod 600 mnt/c1.txt && printf 'changed on A' > mnt/c2.txt").status, 0)
        try waitForQuiet(r, b, others: [c])
        eventually("C sees A's edit of c2.txt") { self.contents(c.mnt + "/c2.txt") == "changed on A" }
        XCTAssertEqual(r.fx.stat(c.mnt + "/c1.txt").st.st_mode & 0o777, 0o600)
        XCTAssertEqual(r.fx.stat(c.mnt + "/c3.txt").st.st_mode & 0o777, 0o644)
        XCTAssertEqual(contents(c.mnt + "/c3.txt"), "c3 from C")
        XCTAssertEqual(contents(b.mnt + "/b1.txt"), "b1 from B")
    }

    /// What the restored server lost, where no other item took its identifier, goes back to the
    /// server at its path: another replica sees it again; a name taken there since gets the
    /// conflicted-copy treatment; recovered/ is left empty.
    func testWhatTheRestoredServerLostIsPutBackAtItsPaths() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("printf 'in the backup' > mnt/f0.txt && printf 'g0 in the backup' > mnt/g0.txt").status, 0)
        try r.waitUntilUploaded()
        let dump = try r.dumpDatabase()
        XCTAssertEqual(
            r.fx.sh("mkdir mnt/docs && printf 'inside a lost folder' > mnt/docs/inner.txt && printf 'mine, after the backup' > mnt/clash.txt").status,
            0)
        try r.waitUntilUploaded()
        XCTAssertEqual(try r.unmount().status, 0)
        XCTAssertNotNil(r.fx.waitForDaemonExit(seconds: 15))

        try r.restoreDatabase(from: dump)

        // B takes the name clash.txt by a rename (no new identifier that could be one of A's).
        let b = try makeSecond(r, name: "b")
        XCTAssertEqual(r.fx.sh("mv '\(b.mnt)'/g0.txt '\(b.mnt)'/clash.txt").status, 0)
        eventually("B has sent its rename", timeout: 120) { (self.statusFields(r, b.mnt)?["pending"] as? NSNumber)?.intValue == 0 }

        try r.fx.mount()
        let status = try r.waitForStatus("the restore reported", timeout: 120) { $0.raw.contains("\"restore\":\"") && $0.pending == 0 }
        XCTAssertTrue(
            status.raw.contains("3 item(s) of this replica it lost are put back at their paths (1 under a conflicted-copy name)"), status.raw)
        XCTAssertFalse(status.raw.contains("kept in"), status.raw)
        eventually("B sees A's lost items again", timeout: 120) {
            self.contents(b.mnt + "/docs/inner.txt") == "inside a lost folder"
                && ((try? FileManager.default.contentsOfDirectory(atPath: b.mnt)) ?? []).contains { $0.hasPrefix("clash (conflicted copy") }
        }
        let copy = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: b.mnt).first { $0.hasPrefix("clash (conflicted copy") })
        XCTAssertEqual(contents(b.mnt + "/" + copy), "mine, after the backup")
        XCTAssertEqual(contents(r.mnt + "/" + copy), "mine, after the backup")
        XCTAssertEqual(contents(b.mnt + "/clash.txt"), "g0 in the backup")
        XCTAssertEqual(contents(r.mnt + "/clash.txt"), "g0 in the backup")
        XCTAssertEqual(contents(r.mnt + "/docs/inner.txt"), "inside a lost folder")
        XCTAssertEqual(contents(b.mnt + "/f0.txt"), "in the backup")
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.store + "/recovered"), "recovered/ keeps only what could not be put back")
    }
}
