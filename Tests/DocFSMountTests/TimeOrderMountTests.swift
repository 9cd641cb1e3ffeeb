import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Times in the order of the calls, as on ext4: a folder changes when an entry appears in it
/// (the create), not when the provider takes the file (the import at close), and a write sets a
/// file's modification and change times to one instant. Tools that compare times (make, rsync,
/// tar's tests) see what a local filesystem shows.
final class TimeOrderMountTests: MountTestCase {
    func times(_ path: String) -> (modified: timespec, changed: timespec)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (st.st_mtim, st.st_ctim)
    }

    func ns(_ t: timespec) -> Int64 { Int64(t.tv_sec) * 1_000_000_000 + Int64(t.tv_nsec) }

    func testAFolderIsNeverNewerThanAFileJustWrittenIntoIt() throws {
        // The create comes first, the last write next, the import at close last.
        let r = fx.sh("mkdir mnt/d && { printf x; printf y; } > mnt/d/f")
        XCTAssertEqual(r.status, 0, "\(r)")
        let folder = try XCTUnwrap(times(fx.m("d"))), file = try XCTUnwrap(times(fx.m("d/f")))
        XCTAssertLessThanOrEqual(ns(folder.modified), ns(file.modified), "the folder's mtime is the create's, before the file's last write")
        XCTAssertLessThanOrEqual(ns(folder.changed), ns(file.changed), "the folder's ctime too")
    }

    func testAWriteSetsModificationAndChangeTimesToOneInstant() throws {
        XCTAssertEqual(fx.sh("printf x > mnt/f && printf y >> mnt/f").status, 0)
        let appended = try XCTUnwrap(times(fx.m("f")))
        XCTAssertEqual(ns(appended.modified), ns(appended.changed), "after an append: mtime == ctime")
        XCTAssertEqual(fx.sh("printf z > mnt/g").status, 0)
        let created = try XCTUnwrap(times(fx.m("g")))
        XCTAssertEqual(ns(created.modified), ns(created.changed), "a new file: mtime == ctime")
        // A later chmod moves ctime alone.
        XCTAssertEqual(chmod(fx.m("g"), 0o600), 0)
        let changed = try XCTUnwrap(times(fx.m("g")))
        XCTAssertEqual(ns(changed.modified), ns(created.modified))
        XCTAssertGreaterThanOrEqual(ns(changed.changed), ns(created.changed))
    }
}
