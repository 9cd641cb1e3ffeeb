import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Many writers, listers, readers and renamers on one folder at once: everything lands intact
/// and nothing deadlocks (a hang ends in a killed daemon, a lazy unmount and a failure, never
/// in a stuck suite: every command runs under the fixture's timeout).
final class ConcurrencyTests: MountTestCase {

    func testEightCopiersWithListersReadersAndRenamersAllAtOnce() throws {
        for tree in 0..<8 {
            for i in 0..<40 {
                let size = [0, 1, 4_095, 4_096, 65_537, 300_000][(tree + i) % 6] + i
                try fx.writeSource("t\(tree)/d\(i % 3)/f\(i).bin", testBytes(size, seed: UInt64(tree * 1000 + i)))
            }
        }
        XCTAssertEqual(fx.sh("mkdir mnt/shared && printf seed > mnt/shared/seed.txt").status, 0)
        let r = fx.sh(
            """
            set -u
            for t in 0 1 2 3 4 5 6 7; do
              ( cp -r src/t$t mnt/shared/t$t || echo "cp t$t failed" ) &
            done
            for l in 1 2; do
              ( for k in $(seq 40); do ls -lR mnt/shared > /dev/null 2>&1; find mnt/shared -type f > /dev/null 2>&1; done ) &
            done
            ( for k in $(seq 60); do cat mnt/shared/seed.txt > /dev/null || echo "read seed failed"; \
                cat mnt/shared/t*/d*/f1.bin > /dev/null 2>&1; done ) &
            for n in 1 2; do
              ( printf "renamer $n" > mnt/shared/ren-$n-0 || echo "create ren-$n failed"
                for k in $(seq 150); do mv mnt/shared/ren-$n-$((k - 1)) mnt/shared/ren-$n-$k || echo "mv ren-$n-$k failed"; done ) &
            done
            ( mkdir mnt/shared/box && for k in $(seq 100); do mv mnt/shared/box mnt/shared/box2 && mv mnt/shared/box2 mnt/shared/box || echo "box move failed"; done ) &
            wait
            """, timeout: 180)
        XCTAssertFalse(r.timedOut, "deadlock or hang: \(r)")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "", "failures reported by the workers:\n\(r.stdout)\nlog:\n\(fx.log.suffix(3000))")
        for tree in 0..<8 {
            let diff = fx.sh("diff -r src/t\(tree) mnt/shared/t\(tree)")
            XCTAssertEqual(diff.status, 0, "tree t\(tree) is not intact: \(diff)")
        }
        XCTAssertEqual(fx.list(fx.m("shared")), ["box", "ren-1-150", "ren-2-150", "seed.txt"] + (0..<8).map { "t\($0)" })
        XCTAssertBytes(fx.readFile(fx.m("shared/ren-1-150")), Array("renamer 1".utf8))
        XCTAssertBytes(fx.readFile(fx.m("shared/ren-2-150")), Array("renamer 2".utf8))
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log.suffix(3000))")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        try fx.mount()
        let again = fx.sh("for t in 0 1 2 3 4 5 6 7; do diff -r src/t$t mnt/shared/t$t || exit 1; done")
        XCTAssertEqual(again.status, 0, "after a remount: \(again)")
    }

    /// Lookups of one folder side by side (`FUSE_PARALLEL_DIROPS`, asked for by default): with a
    /// cold cache, six processes look up the same names at once (one inode, several lookups in
    /// flight), two list the folder and one removes other names meanwhile (a name removed between `ls`'s
    /// listing and its lstat is the one error allowed, as on ext4). Every answer is right,
    /// the kernel's lookup counts add up (the folder empties and the store checks clean).
    func testManyProcessesLookUpNamesOfOneFolderAtOnce() throws {
        XCTAssertEqual(
            fx.sh("mkdir mnt/many && cd mnt/many && for i in $(seq 300); do printf %0${i}d 0 > f$i; done && for i in $(seq 200); do : > gone$i; done")
                .status, 0)
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log.suffix(3000))")
        try fx.mount()
        let r = fx.sh(
            """
            set -u
            for p in 1 2 3 4 5 6; do
              ( for i in $(seq 300); do [ "$(stat -c %s mnt/many/f$i)" = "$i" ] || echo "f$i wrong in $p"; done ) &
            done
            for l in 1 2; do ( for k in $(seq 10); do ls -l mnt/many 2>&1 > /dev/null | grep -v "gone[0-9]*': No such file or directory"; done ) & done
            ( for i in $(seq 200); do rm mnt/many/gone$i || echo "rm gone$i failed"; done ) &
            wait
            """, timeout: 180)
        XCTAssertFalse(r.timedOut, "deadlock or hang: \(r)")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "", "failures reported by the workers:\n\(r.stdout)\nlog:\n\(fx.log.suffix(3000))")
        XCTAssertEqual(fx.list(fx.m("many"))?.count, 300)
        XCTAssertEqual(fx.sh("rm mnt/many/f* && rmdir mnt/many").status, 0)
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log.suffix(3000))")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
    }
}
