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

    /// The clock file times are taken from (the kernel's and the daemon's: coarse), in ns.
    func now() -> Int64 {
        var t = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &t)
        return ns(t)
    }

    /// Lets the clock pass the staged files the daemon's pool made ahead (at the first create),
    /// so a time taken from one of them shows as earlier than what follows.
    func letTheClockPassThePool(_ label: String) {
        XCTAssertEqual(fx.sh(": > mnt/warm-\(label)").status, 0)
        let made = now()
        XCTAssertTrue(waitUntil(5) { now() > made + 20_000_000 }, "the clock moves")
    }

    /// Mounts again with `options` (none: the default) unless this is the first round.
    func mountRound(_ options: [String]) throws {
        guard !options.isEmpty else { return }
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.mount(extra: options)
    }

    /// Issue 38: an empty file created and closed without a write has the create's times (the
    /// pool's staged file was made earlier), with segments (the copy in memory) and without (a
    /// staged file); so does a file truncated by O_TRUNC and closed without a write.
    func testAnEmptyFileHasTheTimesOfItsCreate() throws {
        for options in [[], ["-o", "nosegments"]] {
            let label = options.isEmpty ? "default" : "nosegments"
            try mountRound(options)
            letTheClockPassThePool(label)
            XCTAssertEqual(fx.sh("mkdir mnt/\(label)").status, 0)
            let before = try XCTUnwrap(times(fx.m(label)))
            XCTAssertEqual(fx.sh(": > mnt/\(label)/empty").status, 0)
            let file = try XCTUnwrap(times(fx.m("\(label)/empty"))), after = try XCTUnwrap(times(fx.m(label)))
            XCTAssertGreaterThanOrEqual(ns(file.modified), ns(before.modified), "\(label): mtime not earlier than the folder's change before it")
            XCTAssertGreaterThanOrEqual(ns(file.changed), ns(before.changed), "\(label): ctime too")
            XCTAssertLessThanOrEqual(ns(file.modified), ns(after.modified), "\(label): not later than the folder's change it made")
            XCTAssertEqual(ns(file.modified), ns(file.changed), "\(label): mtime == ctime")

            // An existing file emptied by O_TRUNC, no write: a new version, dated now.
            XCTAssertEqual(fx.sh("printf x > mnt/\(label)/full").status, 0)
            letTheClockPassThePool(label + "-again")
            let truncatedAt = now()
            XCTAssertEqual(fx.sh(": > mnt/\(label)/full").status, 0)
            let emptied = try XCTUnwrap(times(fx.m("\(label)/full")))
            XCTAssertGreaterThanOrEqual(ns(emptied.modified), truncatedAt, "\(label): O_TRUNC dates the file")
            XCTAssertEqual(fx.stat(fx.m("\(label)/full")).st.st_size, 0)
        }
    }

    /// Issue 38: `: > stamp` in a Makefile recipe leaves a stamp newer than its prerequisite, so
    /// the second `make` has nothing to do.
    func testAStampMadeByARecipeIsUpToDateOnTheSecondMake() throws {
        for options in [[], ["-o", "nosegments"]] {
            let label = options.isEmpty ? "default" : "nosegments"
            try mountRound(options)
            XCTAssertEqual(fx.sh("mkdir mnt/\(label) && printf 'stamp: input\\n\\t: > stamp\\n' > mnt/\(label)/Makefile").status, 0)
            letTheClockPassThePool(label)
            XCTAssertEqual(fx.sh("echo data > mnt/\(label)/input").status, 0)
            let first = fx.sh("make -C mnt/\(label)")
            XCTAssertEqual(first.status, 0, "\(label): \(first)")
            XCTAssert(first.stdout.contains(": > stamp"), "\(label): the first make runs the recipe: \(first)")
            let question = fx.sh("make -q -C mnt/\(label) stamp")
            XCTAssertEqual(question.status, 0, "\(label): make -q says stamp is up to date: \(question)")
            let second = fx.sh("make -C mnt/\(label)")
            XCTAssertEqual(second.status, 0, "\(label): \(second)")
            XCTAssertFalse(second.stdout.contains(": > stamp"), "\(label): the second make has nothing to do: \(second)")
        }
    }
}
