import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// What close() acknowledged is there after a clean remount and after `kill -9` of the daemon.
final class DurabilityTests: MountTestCase {

    func makeSources() throws {
        for i in 0..<20 {
            try fx.writeSource("tree/d\(i % 4)/f\(i).bin", testBytes(1_000 * i + 17, seed: UInt64(i)))
        }
        try fx.writeSource("tree/big.bin", testBytes(2 << 20, seed: 5))
        try fx.writeSource("tree/empty", [])
        try fx.writeSource("single.pdf", testBytes(70_001, seed: 6))
    }

    func copyIn() {
        let r = fx.sh("cp -r src/tree mnt/tree && cp src/single.pdf mnt/ && diff -r src/tree mnt/tree")
        XCTAssertEqual(r.status, 0, "\(r)")
    }

    func assertSameAfterwards(_ when: String, file: StaticString = #filePath, line: UInt = #line) {
        let r = fx.sh("diff -r src/tree mnt/tree && cmp src/single.pdf mnt/single.pdf && ls mnt")
        XCTAssertEqual(r.status, 0, "after \(when): \(r)\nlog:\n\(fx.log)", file: file, line: line)
        XCTAssertEqual(r.stdout, "single.pdf\ntree\n", "after \(when)", file: file, line: line)
    }

    func testCleanUnmountAndRemountKeepsEverything() throws {
        try makeSources()
        copyIn()
        let clean = try fx.remount()
        XCTAssertTrue(clean, "SIGTERM must unmount cleanly and exit 0; log:\n\(fx.log)")
        assertSameAfterwards("a clean remount")
    }

    func testKill9AfterCopyKeepsEverything() throws {
        try makeSources()
        copyIn()
        fx.kill9()
        XCTAssertFalse(fx.isMounted, "auto_unmount (or the fixture) must have removed the mount")
        try fx.mount()
        assertSameAfterwards("kill -9 and a remount")
    }

    func testRenamesAndDeletesSurviveKill9() throws {
        let r = fx.sh(
            """
            mkdir -p mnt/a/b && printf one > mnt/a/b/1 && printf two > mnt/a/2 && printf gone > mnt/a/3 \
            && mv mnt/a mnt/z && mv mnt/z/2 mnt/z/b/2 && rm mnt/z/3
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        fx.kill9()
        try fx.mount()
        let after = fx.sh("cd mnt && find . | sort && cat z/b/1 z/b/2")
        XCTAssertEqual(after.stdout, ".\n./z\n./z/b\n./z/b/1\n./z/b/2\nonetwo", "\(after)\nlog:\n\(fx.log)")
    }
}
