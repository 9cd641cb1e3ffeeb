import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// `mount -t fuse.docfs memory: MNT`: mount(8) runs the helper (`/sbin/mount.fuse.docfs`, a link
/// to docfs, as `make install` puts it) with the source `memory:`, which mounts the in-memory
/// provider as `docfs mount memory: MNT` does — a daemon in the background, gone at umount.
/// The store-path forms of the helper are in `CitizenTests`.
final class MemoryMountHelperTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    private var helper: SystemMountHelper?

    override func setUpWithError() throws {
        // mount(8) mounts a source that is not in /etc/fstab for root only, and the helper is
        // linked into /sbin.
        guard getuid() == 0 else { throw XCTSkip("mount -t fuse.docfs needs root (mount(8) and a link in /sbin)") }
        try super.setUpWithError()
    }

    override func tearDown() {
        SystemMountHelper.tearDown(fx, helper)
        helper = nil
        super.tearDown()
    }

    /// The daemon serving the mountpoint (its command line names it).
    private func daemonPID() -> pid_t? { Proc.mentioning(fx.mnt).first }

    /// `umount MNT` unmounts, and the daemon then exits by itself.
    private func umountAndWaitForDaemon(file: StaticString = #filePath, line: UInt = #line) {
        let pid = daemonPID()
        XCTAssertNotNil(pid, "no daemon names \(fx.mnt) on its command line", file: file, line: line)
        let r = fx.sh("umount mnt")
        XCTAssertEqual(r.status, 0, "umount: \(r)", file: file, line: line)
        XCTAssertFalse(fx.isMounted, "still mounted after umount", file: file, line: line)
        if let pid {
            XCTAssertTrue(Proc.waitGone(pid, seconds: 15), "the daemon \(pid) did not exit after umount", file: file, line: line)
        }
    }

    private func mountLine() -> String? {
        let text = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init).first {
            let fields = $0.split(separator: " ")
            return fields.count > 2 && Mounts.unescape(String(fields[1])) == fx.mnt
        }
    }

    func testMountTypeFuseDocfsMountsTheInMemoryProvider() throws {
        helper = try SystemMountHelper(docfs: fx.bin)
        let mount = "mount -t fuse.docfs memory: \"$PWD/mnt\" -o rw,nofail,noexec,x-systemd.automount,trash,log_file=\"$PWD/helper.log\""
        var r = fx.sh(mount)
        XCTAssertEqual(r.status, 0, "mount -t fuse.docfs memory: \(r)")
        XCTAssertTrue(fx.isMounted)
        let line = mountLine() ?? ""
        XCTAssertTrue(line.contains(" fuse.docfs "), line)
        XCTAssertTrue(line.contains("noexec"), "noexec reached the kernel: \(line)")
        XCTAssertTrue(line.hasPrefix("docfs:memory: "), "the source as /proc/mounts shows it: \(line)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: fx.dir + "/helper.log"), "-o log_file=PATH is where the daemon logs")

        // An empty tree that takes everything, with the trash -o trash asked for.
        XCTAssertEqual(fx.list(fx.mnt), [".Trash"])
        XCTAssertEqual(fx.mkdirErrno(fx.m("Docs")), 0)
        XCTAssertEqual(fx.writeFile(fx.m("Docs/hello.txt"), Array("hello\n".utf8)), 0)
        XCTAssertBytes(fx.readFile(fx.m("Docs/hello.txt")), Array("hello\n".utf8))
        XCTAssertEqual(fx.unlinkErrno(fx.m("Docs/hello.txt")), 0)
        XCTAssertEqual(fx.list(fx.m(".Trash")), ["hello.txt"], "rm trashes")
        // The store directory of the fixture is not what was mounted.
        XCTAssertEqual(fx.list(fx.store + "/contents"), [], "nothing was written to a store")

        // Asked again (mount -a does for an fstab line it cannot match): already mounted, not an
        // error, and the tree is the one already there.
        r = fx.sh(mount)
        XCTAssertEqual(r.status, 0, "mounting again: \(r)")
        XCTAssertTrue(r.stderr.contains("already mounted"), r.stderr)
        XCTAssertEqual(fx.list(fx.m("Docs")), [])
        umountAndWaitForDaemon()

        // Nothing survives an unmount: mounted again, the tree is empty.
        r = fx.sh(mount)
        XCTAssertEqual(r.status, 0, "mount after umount: \(r)")
        XCTAssertEqual(fx.list(fx.mnt), [".Trash"])
        XCTAssertEqual(fx.list(fx.m(".Trash")), [])
        umountAndWaitForDaemon()
    }
}
