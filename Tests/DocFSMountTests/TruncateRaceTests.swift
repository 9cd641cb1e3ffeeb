import Foundation
import XCTest

/// The kernel sends a file's release after close() has returned, so a truncate by path can arrive
/// while the closed handle's staged copy still exists. It must neither fail nor be lost. (The
/// model test once caught the release dropping that copy in the middle of such a truncate: ENOENT.
/// That interleaving needs two request threads within microseconds and this test does not force
/// it; it checks the contract across many close-then-truncate rounds and a remount.)
final class TruncateRaceTests: MountTestCase {
    func testTruncateByPathRightAfterCloseIsNeitherRefusedNorLost() throws {
        let r = fx.sh(
            """
            python3 - <<'PY'
            import os
            p = "mnt/t.bin"
            with open(p, "wb") as f: f.write(b"x" * 100_000)
            for i in range(300):
                fd = os.open(p, os.O_RDWR)
                if i % 2: os.pwrite(fd, b"y", 0)
                os.close(fd)
                size = (i * 7919) % 100_000
                os.truncate(p, size)
                st = os.stat(p)
                assert st.st_size == size, (i, st.st_size, size)
                os.truncate(p, 100_000)
            with open(p, "rb") as f: data = f.read()
            assert len(data) == 100_000 and data[0:1] == b"y", (len(data), data[:1])
            print("ok")
            PY
            """, timeout: 120)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(r.stdout, "ok\n")
        XCTAssertTrue(try fx.remount())
        XCTAssertEqual(fx.sh("stat -c %s mnt/t.bin").stdout, "100000\n")
    }
}
