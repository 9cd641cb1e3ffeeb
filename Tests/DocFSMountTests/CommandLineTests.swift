import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// `docfs mount` / `unmount` as a user runs them: clear refusals, daemon mode.
final class CommandLineTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    func testSecondMountOfSameStoreFails() throws {
        try fx.mount()
        try FileManager.default.createDirectory(atPath: fx.dir + "/mnt2", withIntermediateDirectories: true)
        let r = fx.docfs(["mount", fx.store, fx.dir + "/mnt2", "-o", "auto_unmount"], timeout: 30)
        XCTAssertNotEqual(r.status, 0, "\(r)")
        let msg = r.stderr.lowercased()
        XCTAssert(msg.contains("already mounted") || msg.contains("in use"), "\(r)")
        XCTAssert(r.stderr.hasPrefix("docfs: "), "\(r)")
        XCTAssertFalse(Mounts.isMounted(fx.dir + "/mnt2"))
        XCTAssertTrue(fx.isMounted, "the first mount must stay")
        XCTAssertEqual(fx.list(fx.mnt), [])
    }

    func testMountOntoMissingMountpointFails() {
        let missing = fx.dir + "/no-such-mountpoint"
        let r = fx.docfs(["mount", fx.store, missing], timeout: 30)
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.hasPrefix("docfs: "), "\(r)")
        XCTAssert(r.stderr.contains("no-such-mountpoint"), "message must name the mountpoint: \(r)")
        let msg = r.stderr.lowercased()
        XCTAssert(
            msg.contains("does not exist") || msg.contains("no such") || msg.contains("missing")
                || msg.contains("not found"), "\(r)")
        XCTAssertFalse(Mounts.isMounted(missing))
    }

    func testMountOfMissingStoreFails() {
        let r = fx.docfs(["mount", fx.dir + "/no-such-store", fx.mnt], timeout: 30)
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.hasPrefix("docfs: "), "\(r)")
        XCTAssert(r.stderr.contains("no-such-store"), "message must name the store: \(r)")
        XCTAssertFalse(fx.isMounted)
    }

    func testInitRefusesNonEmptyDirectory() throws {
        try fx.writeSource("x", [1])
        let r = fx.docfs(["init", fx.src], timeout: 30)
        XCTAssertNotEqual(r.status, 0, "\(r)")
        XCTAssert(r.stderr.hasPrefix("docfs: "), "\(r)")
    }

    func testDaemonModeReturnsOnceLiveAndUnmountRemovesIt() throws {
        let r = fx.docfs(["mount", fx.store, fx.mnt, "-o", "auto_unmount"], timeout: 30)
        XCTAssertEqual(r.status, 0, "\(r)")
        // No polling: the mount must be live when the command returns.
        XCTAssertTrue(fx.isMounted, "mount not in /proc/self/mounts right after `docfs mount` returned: \(r)")
        // The daemon: from "(pid N)" if printed, else the process naming our unique mountpoint.
        var daemons = Proc.mentioning(fx.mnt)
        if let range = (r.stdout + r.stderr).range(of: #"pid (\d+)"#, options: .regularExpression),
            let pid = pid_t((r.stdout + r.stderr)[range].dropFirst(4))
        {
            XCTAssert(daemons.contains(pid), "reported pid \(pid) is not a live process naming \(fx.mnt): \(daemons)")
            daemons = [pid]
        }
        XCTAssertFalse(daemons.isEmpty, "no daemon process found for \(fx.mnt)")

        XCTAssertErrno(fx.writeFile(fx.m("hello.txt"), Array("hi".utf8)), 0)
        XCTAssertEqual(fx.list(fx.mnt), ["hello.txt"])

        let u = fx.docfs(["unmount", fx.mnt], timeout: 30)
        XCTAssertEqual(u.status, 0, "\(u)")
        XCTAssertFalse(fx.isMounted, "still mounted after `docfs unmount`")
        for pid in daemons {
            XCTAssertTrue(Proc.waitGone(pid, seconds: 10), "daemon \(pid) still running after unmount")
        }
        // And the data is there at the next mount.
        try fx.mount()
        XCTAssertBytes(fx.readFile(fx.m("hello.txt")), Array("hi".utf8))
    }

    func testInfoDescribesAnItem() throws {
        try fx.mount()
        XCTAssertErrno(fx.writeFile(fx.m("info.txt"), Array("twelve bytes".utf8)), 0)
        let r = fx.docfs(["info", fx.m("info.txt")], timeout: 30)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(r.stdout.contains("12"), "size missing: \(r)")
        XCTAssert(r.stdout.contains("public.plain-text"), "type missing: \(r)")
    }
}
