import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// A store bigger than the daemon's working set, mounted: every item is there for `find` and
/// `ls -lR`, random lookups and a copy in answer right, and the daemon's memory stays well below
/// what the whole tree in memory took. (No timings: `make bench-scale` measures those.)
final class ScaleMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    static let items = 30_000

    /// The daemon's resident memory in KiB.
    func residentKiB() -> Int {
        guard let pid = fx.daemonPID,
            let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return -1 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
    }

    func testAStoreLargerThanTheWorkingSetIsWalkedWholeInBoundedMemory() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("the store's working set") }
        let scale = (fx.bin as NSString).deletingLastPathComponent + "/docfs-scale"
        guard FileManager.default.isExecutableFile(atPath: scale) else { throw XCTSkip("no docfs-scale beside \(fx.bin)") }
        let populated = runProcess(
            scale,
            [
                "populate", fx.store, "--items", String(Self.items), "--big-folder", "5000",
                "--per-folder", "500",
            ],
            cwd: fx.dir, timeout: 300, outDir: fx.dir)
        XCTAssertEqual(populated.status, 0, "\(populated)")
        // "populated STORE with N items …"
        let words = populated.stdout.split(separator: " ")
        let total = words.firstIndex(of: "with").flatMap { Int(words[$0 + 1]) } ?? -1
        XCTAssertGreaterThan(total, Self.items - 100, "\(populated)")
        try fx.mount(extra: ["-o", "cache_items=2000"])
        let atMount = residentKiB()

        // Every item, through find and ls -lR.
        let found = fx.sh("find mnt -mindepth 1 | wc -l", timeout: 300)
        XCTAssertEqual(found.stdout.trimmingCharacters(in: .whitespacesAndNewlines), String(total), "\(found)")
        let listed = fx.sh("ls -lR mnt | grep -c '^[-d]'", timeout: 300)
        XCTAssertEqual(listed.stdout.trimmingCharacters(in: .whitespacesAndNewlines), String(total), "\(listed)")
        let big = fx.sh("ls mnt/big | wc -l && ls mnt/big | sort -c && stat -c %h mnt/tree/d0000", timeout: 120)
        XCTAssertEqual(big.stdout, "5000\n12\n", "\(big)")
        // Lookups of names not walked yet in this mount's cache, and of names that are not there.
        let probes = fx.sh("stat -c %s mnt/big/f0004999.txt mnt/tree/d0001/s05/f0499.txt && ! stat mnt/big/nothing 2>/dev/null")
        XCTAssertEqual(probes.stdout, "0\n0\n", "\(probes)")
        // A copy in, a rename and a delete in the big folder, then the walk again.
        for i in 0..<200 { try fx.writeSource("in/f\(i).txt", Array("file \(i)\n".utf8)) }
        let changed = fx.sh(
            "cp -r src/in mnt/big/in && mv mnt/big/f0000000.txt mnt/big/renamed.txt && rm mnt/big/f0000001.txt && diff -r src/in mnt/big/in && ls mnt/big | wc -l"
        )
        XCTAssertEqual(changed.stdout, "5000\n", "\(changed)")
        let after = residentKiB()
        // The whole tree in memory took about 1 KiB an item in the store alone (30 MiB here) and
        // the bridge ~0.35 KiB per inode the kernel held (all of them after ls -lR): 40 MiB and
        // more. With 2,000 items cached and 4,000 kernel inodes the growth is a floor of some
        // 20 MiB (SQLite's page caches, code pages, allocator) that more items do not raise.
        print("scale: RSS \(atMount) KiB at mount, \(after) KiB after the walks of \(Self.items) items")
        XCTAssertLessThan(after - atMount, Self.items, "resident memory grew by \(after - atMount) KiB")

        // A remount (clean) sees the same, and docfs check is content.
        XCTAssertTrue(try fx.remount())
        let again = fx.sh("find mnt -mindepth 1 | wc -l", timeout: 300)
        XCTAssertEqual(again.stdout.trimmingCharacters(in: .whitespacesAndNewlines), String(total + 201 - 1), "\(again)")
        XCTAssertTrue(fx.stopDaemon())
        let check = fx.docfs(["check", fx.store], timeout: 300)
        XCTAssertEqual(check.status, 0, "\(check)")
    }
}
