import Foundation
import XCTest

/// A file deleted or replaced while open behaves as on a local filesystem: its open descriptors
/// keep working (fstat with no links, reads, writes, ftruncate) and close() succeeds; the name is
/// gone at once and nothing of it stays in the store.
final class OpenUnlinkedTests: MountTestCase {
    func testUnlinkedWhileOpenForWritingKeepsWorkingUntilClose() throws {
        XCTAssertEqual(fx.sh("printf old > mnt/a.txt").status, 0)
        let r = fx.sh(
            """
            python3 - <<'PY'
            import os
            fd = os.open("mnt/a.txt", os.O_RDWR)
            os.write(fd, b"new contents")
            os.unlink("mnt/a.txt")
            st = os.fstat(fd)
            print("nlink", st.st_nlink, "size", st.st_size)
            os.pwrite(fd, b"!", st.st_size)
            os.ftruncate(fd, 5)
            print("read", os.pread(fd, 100, 0).decode())
            os.close(fd)
            print("closed", sorted(os.listdir("mnt")))
            PY
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "nlink 0 size 12\nread new c\nclosed []\n", "\(r)")
        XCTAssertTrue(try fx.remount())
        XCTAssertEqual(fx.list(fx.mnt), [])
        XCTAssertEqual(fx.stagedLeftovers(), [])
    }

    func testReplacedWhileOpenForReadingStillReadsTheOldContents() throws {
        XCTAssertEqual(fx.sh("printf one > mnt/a.txt && printf two > mnt/b.txt").status, 0)
        let r = fx.sh(
            """
            python3 - <<'PY'
            import os
            fd = os.open("mnt/a.txt", os.O_RDONLY)
            os.rename("mnt/b.txt", "mnt/a.txt")
            st = os.fstat(fd)
            print("nlink", st.st_nlink, "size", st.st_size, os.pread(fd, 10, 0).decode())
            os.close(fd)
            print(open("mnt/a.txt").read(), sorted(os.listdir("mnt")))
            PY
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "nlink 0 size 3 one\ntwo ['a.txt']\n", "\(r)")
    }
}
