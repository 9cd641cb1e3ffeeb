import Foundation
import XCTest

/// `--upload-limit` / `--download-limit` (and `-o upload_limit=`, `download_limit=`): taken by a
/// replica's mount, whose bytes still arrive whole both ways; refused with one line where there
/// is no server. The rate itself is checked on a computed clock (RateLimitTests).
final class TransferLimitMountTests: ReplicaTestCase {
    func testLimitedTransfersKeepEveryByte() throws {
        let r = try makeRemote(mount: false)
        try r.fx.mount(extra: ["--upload-limit", "4M", "-o", "download_limit=4M"])
        XCTAssertEqual(r.fx.sh("head -c 3145728 /dev/urandom > src/big.bin && cp src/big.bin mnt/").status, 0)
        try r.waitUntilUploaded(timeout: 120)
        let evict = r.fx.docfs(["evict", r.fx.m("big.bin")])
        XCTAssertEqual(evict.status, 0, "\(evict)")
        XCTAssertEqual(r.fx.sh("cmp src/big.bin mnt/big.bin").status, 0, "read back through the limited download")
    }

    func testLimitsAreRefusedWithoutAServerOrWithABadRate() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("a store of its own") }
        let fx = try MountFixture()
        defer { fx.teardown() }
        let plain = fx.docfs(["mount", fx.store, fx.mnt, "--upload-limit", "1M"])
        XCTAssertNotEqual(plain.status, 0)
        XCTAssertTrue(plain.stderr.contains("are for a replica"), plain.stderr)
        let bad = fx.docfs(["mount", fx.store, fx.mnt, "--download-limit", "fast"])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("bytes per second"), bad.stderr)
        XCTAssertFalse(fx.isMounted)
    }
}
