import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// `docfs mount -o segments=SIZE` (issue 28; on by default with 256 KiB since issue 38): small files copied in are stored in the store's
/// segments, larger ones (also those that grow past SIZE while written) get a content file, a
/// small file opened again for writing gets a content file of its own, and `kill -9` during a
/// copy of many small files leaves each complete or absent, with the store consistent.
final class SegmentMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }
    static let bound = 64 << 10
    let options = ["-o", "segments=64K"]

    override func setUpWithError() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("segments are the store's") }
        try super.setUpWithError()
        try fx.mount(extra: options)
    }

    var contentFiles: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: fx.store + "/contents")) ?? []).sorted() }

    var segmentBytes: Int64 {
        let dir = fx.store + "/segments"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).reduce(0) { total, name in
            let size = (try? FileManager.default.attributesOfItem(atPath: dir + "/" + name)[.size] as? Int64) ?? nil
            return total + (size ?? 0)
        }
    }

    /// Writes `bytes` to a new file in `chunk`-byte writes (so a file crosses the bound while written).
    func writeInChunks(_ path: String, _ bytes: [UInt8], chunk: Int) -> Int32 {
        fx.guarded("write \(path)") {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
            if fd < 0 { return errno }
            var off = 0
            while off < bytes.count {
                let n = bytes[off..<min(off + chunk, bytes.count)].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n < 0 { let e = errno; close(fd); return e }
                off += n
            }
            return close(fd) == 0 ? 0 : errno
        }
    }

    func assertConsistentAfterStop(_ when: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(fx.stopDaemon(), "clean stop \(when); log:\n\(fx.log)", file: file, line: line)
        let r = fx.docfs(["check", fx.store])
        XCTAssertEqual(r.status, 0, "docfs check \(when): \(r)", file: file, line: line)
        XCTAssert(r.stdout.contains("is consistent"), "\(r)", file: file, line: line)
    }

    func testFilesAcrossTheBoundAndASmallFileWrittenAgain() throws {
        let sizes = ["empty": 0, "tiny": 100, "at-bound": Self.bound, "past-bound": Self.bound + 1, "grows": 300_000]
        var expected: [String: [UInt8]] = [:]
        for (index, (name, size)) in sizes.sorted(by: { $0.key < $1.key }).enumerated() {
            let bytes = testBytes(size, seed: UInt64(40 + index))
            XCTAssertErrno(writeInChunks(fx.m(name), bytes, chunk: 4096), 0, name)
            expected[name] = bytes
        }
        // Only the two files past the bound have content files; the rest are in a segment.
        XCTAssertEqual(contentFiles.count, 2, "\(contentFiles)")
        XCTAssertGreaterThanOrEqual(segmentBytes, Int64(Self.bound + 100))
        for (name, bytes) in expected { XCTAssertBytes(fx.readFile(fx.m(name)), bytes, name) }

        // A small file opened again for writing: appended to, it gets a content file of its own.
        let more = Array(" and more".utf8)
        XCTAssertErrno(fx.writeFile(fx.m("tiny"), more, flags: O_WRONLY | O_APPEND), 0)
        expected["tiny"]! += more
        XCTAssertEqual(contentFiles.count, 3, "\(contentFiles)")
        XCTAssertBytes(fx.readFile(fx.m("tiny")), expected["tiny"]!, "tiny after the append")
        // Overwritten in place (O_TRUNC) with a small file again, and renamed over another.
        let again = testBytes(5000, seed: 77)
        XCTAssertErrno(fx.writeFile(fx.m("at-bound"), again), 0)
        expected["at-bound"] = again
        XCTAssertErrno(fx.renameErrno(fx.m("empty"), fx.m("grows")), 0)
        expected["grows"] = expected.removeValue(forKey: "empty")
        for (name, bytes) in expected { XCTAssertBytes(fx.readFile(fx.m(name)), bytes, name) }

        assertConsistentAfterStop("after writes across the bound")
        try fx.mount(extra: options)
        XCTAssertEqual(fx.list(fx.mnt), expected.keys.sorted())
        for (name, bytes) in expected { XCTAssertBytes(fx.readFile(fx.m(name)), bytes, "\(name) after a remount") }
        // Without segments, what the segments hold is still read.
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount(extra: ["-o", "nosegments"])
        for (name, bytes) in expected { XCTAssertBytes(fx.readFile(fx.m(name)), bytes, "\(name) mounted without segments") }
    }

    /// Issue 38: segments are on by default (256 KiB), and `-o nosegments` gives every new file
    /// a content file of its own, as before.
    func testSegmentsAreTheDefaultAndNosegmentsTurnsThemOff() throws {
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount()
        let bound = 256 << 10
        var expected: [String: [UInt8]] = [:]
        for (name, size) in [("small", 1000), ("at-default-bound", bound), ("past-default-bound", bound + 1)] {
            let bytes = testBytes(size, seed: UInt64(size))
            XCTAssertErrno(fx.writeFile(fx.m(name), bytes), 0, name)
            expected[name] = bytes
        }
        XCTAssertEqual(contentFiles.count, 1, "only the file past 256 KiB has a content file by default: \(contentFiles)")
        XCTAssertGreaterThanOrEqual(segmentBytes, Int64(bound + 1000))
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount(extra: ["-o", "nosegments"])
        let plain = testBytes(1000, seed: 3)
        XCTAssertErrno(fx.writeFile(fx.m("small-without"), plain), 0)
        expected["small-without"] = plain
        XCTAssertEqual(contentFiles.count, 2, "with -o nosegments a small file gets a content file: \(contentFiles)")
        for (name, bytes) in expected { XCTAssertBytes(fx.readFile(fx.m(name)), bytes, name) }
        assertConsistentAfterStop("after mounts with and without segments")
    }

    /// cp -r of many small files killed half way: each file there is complete, the rest absent.
    func testKill9DuringACopyOfSmallFilesLeavesThemCompleteOrAbsent() throws {
        let count = 600
        func bytes(_ i: Int) -> [UInt8] { testBytes(200 + (i * 131) % 6000, seed: UInt64(5000 + i)) }
        for i in 0..<count { try fx.writeSource("tree/d\(i % 9)/f\(i).bin", bytes(i)) }
        let out = fx.dir + "/cp.txt"
        let copier = try Child("/bin/sh", ["-c", "exec cp -r src/tree mnt/tree"], cwd: fx.dir, stdout: out, stderr: out)
        defer { copier.signalGroup(SIGKILL); copier.wait(seconds: 10) }
        // Caught after at least ~100 files reached the segment (watched from outside the mount).
        waitUntil(60) { segmentBytes >= 100 * 3000 || copier.hasExited }
        let midway = !copier.hasExited
        fx.kill9()
        XCTAssertTrue(copier.wait(seconds: 30), "cp must not hang once the daemon is gone")
        try fx.mount(extra: options)
        var present = 0
        for i in 0..<count {
            let got = fx.readFile(fx.m("tree/d\(i % 9)/f\(i).bin"))
            if got.errno == ENOENT { continue }
            present += 1
            XCTAssertBytes(got, bytes(i), "tree/d\(i % 9)/f\(i).bin")
        }
        XCTAssertGreaterThanOrEqual(present, 50, "the copy was killed after about 100 imports")
        if midway { XCTAssertLessThan(present, count, "killed half way, yet every file is there") }
        let r = fx.sh(
            "cd mnt && find . -type f | sed 's|^./||' | sort > ../found.txt && cd ../src && find tree -type f | sort > ../all.txt && comm -23 ../found.txt ../all.txt"
        )
        XCTAssertEqual(r.stdout, "", "files in the tree that are not in the source: \(r)")
        assertConsistentAfterStop("after kill -9 during cp -r of small files")
    }

    /// The daemon dies after a small file's bytes reached the segment and before its journal
    /// entry: the file is absent, the files before it are complete, and the entry is dead bytes.
    /// On a default mount (segments on since issue 38).
    func testACrashBetweenTheAppendAndTheJournalLeavesTheFileAbsent() throws {
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount(env: ["DOCFS_FAULT": "segment-append:abort@3"])
        XCTAssertErrno(fx.writeFile(fx.m("one"), Array("one".utf8)), 0)
        XCTAssertErrno(fx.writeFile(fx.m("two"), Array("two".utf8)), 0)
        XCTAssertNotEqual(fx.writeFile(fx.m("three"), Array("three".utf8)), 0, "close() of the third file cannot succeed")
        XCTAssertNotNil(fx.waitForDaemonExit(seconds: 30), "the daemon crashed at the fault point")
        fx.kill9()
        try fx.mount()
        XCTAssertEqual(fx.list(fx.mnt), ["one", "two"])
        XCTAssertBytes(fx.readFile(fx.m("two")), Array("two".utf8), "two")
        XCTAssertErrno(fx.writeFile(fx.m("three"), Array("three, again".utf8)), 0)
        XCTAssertBytes(fx.readFile(fx.m("three")), Array("three, again".utf8), "three written again")
        assertConsistentAfterStop("after a crash between the append and the journal")
    }
}
