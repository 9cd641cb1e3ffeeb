import Foundation
import Glibc
import XCTest

/// The example provider in Examples/ArchiveProvider (built with the tests): a tar archive's
/// contents mounted read-only through the DocFS library, compared with the same archive
/// extracted by tar.
final class ArchiveExampleTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    func testATarArchiveMountsReadOnlyWithItsContentsModesAndTimes() throws {
        let archiveBin = URL(fileURLWithPath: fx.bin).deletingLastPathComponent().appendingPathComponent("docfs-archive").path
        guard access(archiveBin, X_OK) == 0 else { throw XCTSkip("docfs-archive is not built next to \(fx.bin)") }
        let long = String(repeating: "long-name-", count: 12) + "end.txt" // over 100 bytes: a GNU 'L' record
        var r = fx.sh(
            """
            set -e
            mkdir -p src/docs/sub && cd src
            printf 'hello\\n' > docs/a.txt && head -c 70000 /dev/urandom > docs/sub/blob.bin
            printf 'x' > 'docs/\(long)' && ln -s a.txt docs/link && chmod 640 docs/a.txt
            touch -d '2020-05-06 07:08:09' docs/a.txt
            tar --format=gnu -cf ../archive.tar docs
            cd .. && mkdir extracted && tar -xf archive.tar -C extracted
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        let log = fx.dir + "/archive.log"
        let child = try Child(archiveBin, [fx.dir + "/archive.tar", fx.mnt], cwd: fx.dir, stdout: log, stderr: log)
        addTeardownBlock { [mnt = fx.mnt] in
            if Mounts.isMounted(mnt) { MountFixture.lazyUnmount(mnt) }
            if !child.wait(seconds: 5) { child.signal(SIGKILL); child.wait(seconds: 5) }
        }
        let deadline = Date().addingTimeInterval(20)
        while !Mounts.isMounted(fx.mnt) {
            XCTAssertFalse(child.hasExited, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
            if child.hasExited || Date() > deadline { return }
            usleep(20_000)
        }
        r = fx.sh(
            """
            diff -r extracted/docs mnt/docs && echo same
            stat -c '%a %Y' mnt/docs/a.txt
            readlink mnt/docs/link
            touch mnt/docs/new 2>&1 | grep -q 'Read-only' && echo EROFS
            rm mnt/docs/a.txt 2>&1 | grep -q 'Read-only\\|denied\\|not permitted' && echo refused
            ls mnt/docs | wc -l
            """)
        XCTAssertEqual(r.stdout, "same\n440 1588748889\na.txt\nEROFS\nrefused\n4\n", "\(r)")
        // umount ends the example's daemon by itself.
        XCTAssertEqual(fx.sh("fusermount3 -u mnt").status, 0)
        XCTAssertTrue(child.wait(seconds: 10), "docfs-archive still running after unmount")
    }
}
