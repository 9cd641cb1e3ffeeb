import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The kernel's FUSE passthrough (issue 38): a stored file opened read-only is read by the kernel
/// from the store itself, byte for byte what was written, and the daemon sees no read request;
/// `-o passthrough=off` reads through the daemon again; a writer waits for passthrough readers
/// to close (EBUSY when they stay); a daemon without CAP_SYS_ADMIN falls back with one log line.
final class PassthroughMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    /// Passthrough needs the kernel's offer (6.9+) and root's capability: skip where either is
    /// missing (the fallback test below covers that case).
    func mountExpectingPassthrough(_ extra: [String] = []) throws {
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0,passthrough"] + extra)
        let said = fx.logLines(waitingFor: { $0.contains("passthrough on") || $0.contains("passthrough off") })
        if let line = said.first, line.contains("passthrough off") {
            throw XCTSkip("this kernel or process offers no passthrough: \(line)")
        }
    }

    /// The daemon's request count for `op` (its metrics text, as curl fetches it).
    func requests(_ op: String) throws -> Int {
        let port = try MetricsScrape.port(of: fx)
        let r = fx.sh("curl -sf http://127.0.0.1:\(port)/metrics")
        guard r.status == 0 else { throw FixtureError("scrape failed: \(r)") }
        let lines = r.stdout.split(separator: "\n").filter {
            $0.hasPrefix("docfs_fuse_requests") && $0.contains("op=\"\(op)\"") && !$0.hasPrefix("#")
        }
        return lines.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
    }

    /// Writes `big` (a content file of its own) and `small` (kept in a segment), then remounts, so
    /// that no handle of the writes is left when the reads start.
    func storeFiles(big: [UInt8], small: [UInt8], extra: [String]) throws {
        try fx.mount()
        XCTAssertErrno(fx.writeFile(fx.m("big.bin"), big), 0)
        XCTAssertErrno(fx.writeFile(fx.m("small.txt"), small), 0)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.writeSource("big.bin", big)
        try fx.writeSource("small.txt", small)
    }

    func testPassthroughReadsAreByteExactAndNeverReachTheDaemon() throws {
        let big = testBytes(12 << 20, seed: 38), small = testBytes(3000, seed: 39)
        try storeFiles(big: big, small: small, extra: [])
        try mountExpectingPassthrough()
        let before = try requests("read")
        for _ in 0..<2 {
            XCTAssertEqual(fx.sh("cmp \(fx.src)/big.bin \(fx.m("big.bin"))").status, 0)
        }
        // Readers at the same time share the backing file.
        let held = open(fx.m("big.bin"), O_RDONLY)
        XCTAssertGreaterThanOrEqual(held, 0)
        XCTAssertEqual(fx.sh("cmp \(fx.src)/big.bin \(fx.m("big.bin"))").status, 0)
        close(held)
        // Random reads and a mapping go to the backing file too.
        let r = fx.sh("""
            python3 -c '
            import mmap, os, random, sys
            a = open(sys.argv[1], "rb").read(); f = open(sys.argv[2], "rb")
            for _ in range(200):
                o = random.randrange(len(a)); n = random.randrange(1, 70000)
                assert os.pread(f.fileno(), n, o) == a[o:o + n], o
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            assert m[:] == a
            ' \(fx.src)/big.bin \(fx.m("big.bin"))
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(try requests("read") - before, 0, "the kernel read the file itself; log:\n\(fx.log)")
        XCTAssertGreaterThanOrEqual(try requests("open"), 3)
        // A small file read from inside a segment is the daemon's to read.
        XCTAssertEqual(fx.sh("cmp \(fx.src)/small.txt \(fx.m("small.txt"))").status, 0)
        XCTAssertGreaterThan(try requests("read"), before, "a segment's small file is read through the daemon")
        // Attributes are the stored file's.
        let st = fx.stat(fx.m("big.bin"))
        XCTAssertEqual(st.errno, 0)
        XCTAssertEqual(Int(st.st.st_size), big.count)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    func testPassthroughOffReadsThroughTheDaemon() throws {
        let big = testBytes(4 << 20, seed: 40)
        try storeFiles(big: big, small: [1, 2, 3], extra: [])
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0,passthrough=off"])
        XCTAssertEqual(fx.sh("cmp \(fx.src)/big.bin \(fx.m("big.bin"))").status, 0)
        XCTAssertGreaterThan(try requests("read"), 0, "reads go through the daemon")
        XCTAssertFalse(fx.log.contains("passthrough on"), fx.log)
        XCTAssertEqual(fx.docfs(["mount", fx.store, fx.dir + "/other", "-o", "passthrough=maybe"]).status == 0, false)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    /// A file the kernel reads through passthrough cannot also be written through the daemon:
    /// the writer waits for the reader, and a reader that stays makes it EBUSY. Closing and then
    /// writing (the usual order) always works, however soon the writer opens.
    func testWritersWaitForPassthroughReaders() throws {
        let big = testBytes(1 << 20, seed: 41)
        try storeFiles(big: big, small: [1], extra: [])
        try mountExpectingPassthrough()
        let path = fx.m("big.bin")
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        var byte: UInt8 = 0
        XCTAssertEqual(pread(reader, &byte, 1, 5), 1)
        XCTAssertEqual(byte, big[5])
        let started = Date()
        XCTAssertErrno(fx.openErrno(path, O_WRONLY | O_APPEND), EBUSY)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 1.5, "it waited for the reader first")
        // Closed in time: the writer gets the file. The pause is the point (the reader closes
        // while the writer is waiting for it); should load make the close come before the open
        // starts waiting, the open succeeds all the same (a reader closed just before is never
        // in the way), so the assertion holds either way.
        let closer = Thread { usleep(300_000); close(reader) }
        closer.start()
        let writer = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        XCTAssertEqual(write(writer, "tail", 4), 4)
        XCTAssertEqual(close(writer), 0)
        // Read, then append at once, many times: the reader's release is never in the way for long.
        let r = fx.sh("for i in $(seq 1 30); do cat \(path) > /dev/null && printf x >> \(path) || exit 1; done")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertBytes(fx.readFile(path), big + Array("tail".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 30))
        // The attributes follow the new contents.
        let st = fx.stat(path)
        XCTAssertEqual(Int(st.st.st_size), big.count + 34)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    /// Without CAP_SYS_ADMIN (in the initial user namespace) the daemon may not register backing
    /// files: one log line, reads through the daemon, nothing else changes. A user namespace of
    /// its own gives the daemon every capability there and none the kernel's check accepts.
    func testWithoutTheCapabilityReadsFallBackWithOneLogLine() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("needs the store (remounts)") }
        let big = testBytes(2 << 20, seed: 42)
        try storeFiles(big: big, small: [1], extra: [])
        guard access("/usr/bin/unshare", X_OK) == 0 else { throw XCTSkip("needs unshare(1)") }
        let log = fx.dir + "/nocap.txt"
        // The daemon in the foreground inside the namespace, stopped by the unmount there; the
        // whole shell is bounded by timeout(1) and the wait for the mount by a deadline.
        let r = fx.sh("""
            timeout -s KILL 90 unshare -Urm --propagation private sh -c '
              "$DOCFS" mount store mnt -f -o auto_unmount,passthrough --log-level debug > \(log) 2>&1 & pid=$!
              i=0; until grep -q " $PWD/mnt " /proc/self/mounts; do
                i=$((i+1)); [ $i -gt 400 ] && { kill -9 $pid; echo "no mount"; exit 2; }
                kill -0 $pid 2>/dev/null || { echo "daemon ended"; exit 2; }
                sleep 0.05
              done
              cmp src/big.bin mnt/big.bin; s=$?
              umount mnt; wait $pid; exit $s'
            """, timeout: 120)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        if r.status == 2 || text.contains("Operation not permitted") {
            throw XCTSkip("no FUSE mount in a user namespace here: \(r) \(text)")
        }
        XCTAssertEqual(r.status, 0, "\(r)\n\(text)")
        let lines = text.split(separator: "\n").filter { $0.contains("passthrough") }
        XCTAssertEqual(lines.count, 1, text)
        XCTAssert(lines.first?.contains("passthrough off") == true && lines.first?.contains("CAP_SYS_ADMIN") == true, text)
    }
}
