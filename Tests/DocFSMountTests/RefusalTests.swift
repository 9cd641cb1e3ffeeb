import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Capabilities from the layout are enforced, with the errno README.md's *Refusals* table gives,
/// nothing is left behind, the daemon logs why, and `stat` mode bits tell the truth.
final class RefusalTests: MountTestCase {
    /// Like the demo layout, plus `Drop`: you may add to it, but what lands there can only be read.
    override class var layout: String? {
        """
        trash: false
        folders:
          - path: Inbox
            capabilities: [read, enumerate, add]
            contents: [read, rename, delete, trash]
          - path: Archive
            capabilities: [read, enumerate]
            contents: [read]
          - path: Drop
            capabilities: [read, enumerate, add]
            contents: [read]
          - path: Projects
        """
    }

    let payload = testBytes(5_000, seed: 77)

    // With --allow-other, so that a user other than root can ask access(2) (what mode bits mean
    // for root differs: it passes them, as on ext4).
    override class var mountsInSetUp: Bool { false }

    override func setUpWithError() throws {
        try super.setUpWithError()
        chmod(fx.dir, 0o755)
        do { try fx.mount(extra: ["--allow-other"]) } catch { fx.teardown(); throw error }
    }

    /// Puts `Drop/a.pdf` in place (adding is allowed there) and checks it landed.
    func dropFile() throws {
        try fx.writeSource("a.pdf", payload)
        let r = fx.sh("cp src/a.pdf mnt/Drop/a.pdf")
        XCTAssertEqual(r.status, 0, "setup: cp into Drop (which allows add) failed: \(r)")
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload, "setup: Drop/a.pdf")
        if r.status != 0 { throw FixtureError("setup failed") }
    }

    func testLayoutFoldersExist() {
        XCTAssertEqual(fx.list(fx.mnt), ["Archive", "Drop", "Inbox", "Projects"])
    }

    func testCpIntoFolderWithoutAddIsPermissionDeniedAndLeavesNothing() throws {
        try fx.writeSource("notes.pdf", Array("notes\n".utf8))
        let r = fx.sh("cp src/notes.pdf mnt/Archive/")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Permission denied"), "\(r)")
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
        XCTAssertErrno(fx.stat(fx.m("Archive/notes.pdf")).errno, ENOENT)
    }

    func testCreateInFolderWithoutAddGivesEACCES() {
        XCTAssertErrno(fx.openErrno(fx.m("Archive/x.pdf"), O_WRONLY | O_CREAT | O_TRUNC), EACCES)
        XCTAssertErrno(fx.openErrno(fx.m("Archive/y.pdf"), O_WRONLY | O_CREAT | O_EXCL), EACCES)
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
    }

    func testMkdirInFolderWithoutAddGivesEACCES() {
        XCTAssertErrno(fx.mkdirErrno(fx.m("Archive/sub")), EACCES)
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
    }

    func testInboxAcceptsCopiesAndDeletes() throws {
        try fx.writeSource("report.pdf", payload)
        let r = fx.sh("cp src/report.pdf mnt/Inbox/ && rm mnt/Inbox/report.pdf")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(fx.list(fx.m("Inbox")), [])
    }

    func testRenameInPlaceWithoutRenameGivesEPERM() throws {
        try dropFile()
        let r = fx.sh("mv mnt/Drop/a.pdf mnt/Drop/b.pdf")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertErrno(fx.renameErrno(fx.m("Drop/a.pdf"), fx.m("Drop/c.pdf")), EPERM)
        XCTAssertEqual(fx.list(fx.m("Drop")), ["a.pdf"])
    }

    func testRenameOfFolderWithoutRenameGivesEPERM() {
        XCTAssertErrno(fx.renameErrno(fx.m("Archive"), fx.m("Archive2")), EPERM)
        XCTAssertEqual(fx.list(fx.mnt), ["Archive", "Drop", "Inbox", "Projects"])
    }

    func testMoveOutWithoutReparentGivesEPERM() throws {
        try dropFile()
        XCTAssertErrno(fx.renameErrno(fx.m("Drop/a.pdf"), fx.m("Projects/a.pdf")), EPERM)
        XCTAssertEqual(fx.list(fx.m("Drop")), ["a.pdf"])
        XCTAssertEqual(fx.list(fx.m("Projects")), [])
    }

    func testMoveIntoFolderWithoutAddGivesEACCES() {
        XCTAssertErrno(fx.writeFile(fx.m("Projects/p.pdf"), payload), 0)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/p.pdf"), fx.m("Archive/p.pdf")), EACCES)
        XCTAssertEqual(fx.list(fx.m("Projects")), ["p.pdf"])
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
    }

    func testOpenForWriteWithoutWriteGivesEACCES() throws {
        try dropFile()
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_WRONLY), EACCES, "O_WRONLY")
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_RDWR), EACCES, "O_RDWR")
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_WRONLY | O_APPEND), EACCES, "O_APPEND")
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_WRONLY | O_TRUNC), EACCES, "O_TRUNC")
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_RDONLY), 0, "O_RDONLY")
        let r = fx.sh("echo more >> mnt/Drop/a.pdf")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Permission denied"), "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload, "contents must be unchanged")
    }

    func testTruncateWithoutWriteGivesEACCES() throws {
        try dropFile()
        XCTAssertErrno(fx.errnoOf("truncate") { truncate(fx.m("Drop/a.pdf"), 0) }, EACCES)
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload)
    }

    func testRemoveWithoutDeleteGivesEPERM() throws {
        try dropFile()
        let r = fx.sh("rm -f mnt/Drop/a.pdf")
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.contains("Operation not permitted"), "\(r)")
        XCTAssertErrno(fx.unlinkErrno(fx.m("Drop/a.pdf")), EPERM)
        XCTAssertEqual(fx.list(fx.m("Drop")), ["a.pdf"])
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload)
    }

    func testRmdirOfFolderWithoutDeleteGivesEPERM() {
        XCTAssertErrno(fx.rmdirErrno(fx.m("Archive")), EPERM)
        XCTAssertEqual(fx.list(fx.mnt), ["Archive", "Drop", "Inbox", "Projects"])
    }

    func testRefusalIsLoggedOnceWithPathAndErrno() {
        XCTAssertErrno(fx.openErrno(fx.m("Archive/logged-refusal.pdf"), O_WRONLY | O_CREAT | O_EXCL), EACCES)
        let lines = fx.logLines { $0.contains("refused") && $0.contains("Archive/logged-refusal.pdf") }
        XCTAssertEqual(lines.count, 1, "log lines naming the refused path:\n\(lines.joined(separator: "\n"))\nlog:\n\(fx.log)")
        XCTAssert(lines.first?.contains("EACCES") == true, "\(lines)")
    }

    func testStatModeBitsShowNoWriteWhereRefused() throws {
        try dropFile()
        let archive = fx.stat(fx.m("Archive")).st.st_mode
        XCTAssertEqual(archive & 0o222, 0, "Archive mode \(String(archive, radix: 8)) must have no w (no add)")
        XCTAssertNotEqual(archive & 0o444, 0, "Archive must be readable")
        let drop = fx.stat(fx.m("Drop/a.pdf")).st.st_mode
        XCTAssertEqual(drop & 0o222, 0, "Drop/a.pdf mode \(String(drop, radix: 8)) must have no w (no write)")
        XCTAssertNotEqual(drop & 0o444, 0, "Drop/a.pdf must be readable")
        let projects = fx.stat(fx.m("Projects")).st.st_mode
        XCTAssertNotEqual(projects & 0o200, 0, "Projects mode \(String(projects, radix: 8)) must have w")
        let inbox = fx.stat(fx.m("Inbox")).st.st_mode
        XCTAssertNotEqual(inbox & 0o200, 0, "Inbox allows add: mode \(String(inbox, radix: 8)) must have w")
    }

    /// access(2) answers from the mode bits, which show what the capabilities refuse: for the
    /// items' owner, `test -w` agrees with what writing then does. Root passes the bits (as on
    /// ext4 for a 0555 folder or a 0444 file; the kernel answers access(2) itself, with
    /// default_permissions), and the write itself is then refused all the same.
    func testTestDashWAgreesWithCapabilities() throws {
        try dropFile()
        let probe = """
            test -w mnt/Archive && echo Archive:w || echo Archive:-
            test -w mnt/Drop/a.pdf && echo a.pdf:w || echo a.pdf:-
            test -w mnt/Projects && echo Projects:w || echo Projects:-
            test -r mnt/Drop/a.pdf && echo a.pdf:r || echo a.pdf:-
            """
        var r = fx.sh("chown 2001:2001 mnt/Archive mnt/Drop/a.pdf mnt/Projects")
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        r = fx.sh("setpriv --reuid=2001 --regid=2001 --clear-groups sh -c '\(probe)'")
        XCTAssertEqual(r.stdout, "Archive:-\na.pdf:-\nProjects:w\na.pdf:r\n", "the owner: \(r)")
        r = fx.sh(probe)
        XCTAssertEqual(r.stdout, "Archive:w\na.pdf:w\nProjects:w\na.pdf:r\n", "root: \(r)")
        XCTAssertErrno(fx.openErrno(fx.m("Drop/a.pdf"), O_WRONLY), EACCES)
        XCTAssertNotEqual(fx.sh("touch mnt/Archive/new").status, 0)
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload)
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
    }

    func testMoveOverAnItemWithoutDeleteGivesEPERM() throws {
        try dropFile()
        XCTAssertErrno(fx.writeFile(fx.m("Projects/a.pdf"), Array("replacement".utf8)), 0)
        XCTAssertErrno(fx.renameErrno(fx.m("Projects/a.pdf"), fx.m("Drop/a.pdf")), EPERM)
        XCTAssertBytes(fx.readFile(fx.m("Drop/a.pdf")), payload)
        XCTAssertEqual(fx.list(fx.m("Projects")), ["a.pdf"])
    }

    func testRefusedCpIsLoggedWithPathAndErrno() throws {
        try fx.writeSource("refused.pdf", payload)
        XCTAssertNotEqual(fx.sh("cp src/refused.pdf mnt/Archive/").status, 0)
        let lines = fx.logLines { $0.contains("refused") && $0.contains("Archive/refused.pdf") }
        XCTAssertFalse(lines.isEmpty, "no log line names Archive/refused.pdf; log:\n\(fx.log)")
        XCTAssert(lines.allSatisfy { $0.contains("EACCES") }, "\(lines)")
    }
}
