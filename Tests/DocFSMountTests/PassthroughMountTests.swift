import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's FUSE passthrough (issue 38): a stored file opened read-only is read by the kernel
/// from the store itself, byte for byte what was written, and the daemon sees no read request;
/// `-o passthrough=off` reads through the daemon again; a writer opening beside passthrough
/// readers joins them at once; a daemon without CAP_SYS_ADMIN falls back with one log line.
final class PassthroughMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    /// Passthrough needs the kernel's offer (6.9+) and root's capability: skip where either is
    /// missing (the fallback test below covers that case).
    func mountExpectingPassthrough(_ extra: [String] = []) throws {
        // On by default (`-o passthrough` is accepted too: see the kill -9 test).
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0"] + extra)
        try fx.skipUnlessPassthrough()
    }

    /// The daemon's request count for `op` (its metrics text, as curl fetches it).
    func requests(_ op: String) throws -> Int {
        try MetricsScrape.requests(op, of: fx)
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
        let r = fx.sh(
            """
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

    /// A writer opening a file that passthrough readers hold joins them at once (no wait, no
    /// EBUSY): the readers' backing file becomes the live file, and the readers see the writes as
    /// on ext4 (`tail -f`); the size follows. A kill -9 before the writer's close finds the
    /// version the writer replaced, byte-exact.
    func testAWriterJoinsPassthroughReadersAtOnce() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("needs the store (remounts)") }
        let big = testBytes(1 << 20, seed: 41)
        try storeFiles(big: big, small: [1], extra: [])
        try mountExpectingPassthrough()
        let path = fx.m("big.bin")
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var byte: UInt8 = 0
        XCTAssertEqual(pread(reader, &byte, 1, 5), 1)
        XCTAssertEqual(byte, big[5])
        let readsBefore = try requests("read")
        let started = Date()
        let writer = open(path, O_WRONLY | O_APPEND)
        let opened = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        // The old path waited 2 s for the reader, then failed: half of that is a wide margin.
        XCTAssertLessThan(opened, 1.0, "the writer joined the reader without waiting")
        XCTAssertEqual(write(writer, "tail", 4), 4)
        // The reader reads the written bytes, and its fstat says the new size.
        var got = [UInt8](repeating: 0, count: 4)
        XCTAssertTrue(
            waitUntil(10) { pread(reader, &got, 4, off_t(big.count)) == 4 && got == Array("tail".utf8) },
            "the reader sees the writer's bytes: \(got)")
        var st = Glibc.stat()
        XCTAssertTrue(waitUntil(10) { fstat(reader, &st) == 0 && Int(st.st_size) == big.count + 4 }, "size \(st.st_size)")
        // A reader opened now reads the live file too, through the kernel.
        XCTAssertBytes(fx.readFile(path), big + Array("tail".utf8))
        XCTAssertEqual(try requests("read") - readsBefore, 0, "the kernel read the live file itself")
        XCTAssertEqual(close(writer), 0)
        // A second writer joins the live file again (the reader still holds it); what it writes
        // before the kill is not closed, so the version its close would replace is what stays.
        let second = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(second, 0, "errno \(errno)")
        XCTAssertEqual(write(second, "lost", 4), 4)
        XCTAssertTrue(waitUntil(10) { pread(reader, &got, 4, off_t(big.count + 4)) == 4 && got == Array("lost".utf8) })
        fx.kill9()
        close(second)
        try fx.mount()
        XCTAssertBytes(fx.readFile(path), big + Array("tail".utf8), "the close that returned 0 is kept, byte-exact")
        // Read, then append at once, many times: the reader's release is never in the way for long,
        // and never ends the staged copy an append opened meanwhile (that lost about one append
        // in 500: hence the many rounds).
        let rounds = 300
        let r = fx.sh("for i in $(seq 1 \(rounds)); do cat \(path) > /dev/null && printf x >> \(path) || exit 1; done")
        XCTAssertEqual(r.status, 0, "\(r)")
        let kept = big + Array("tail".utf8)
        XCTAssertBytes(fx.readFile(path), kept + [UInt8](repeating: UInt8(ascii: "x"), count: rounds))
        // The attributes follow the new contents.
        let after = fx.stat(path)
        XCTAssertEqual(Int(after.st.st_size), kept.count + rounds)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        XCTAssert(check.stdout.contains("is consistent"), "\(check)")
    }

    /// A truncate by path while passthrough readers hold the file: they see it truncated (as on
    /// ext4), the new size is the stored version at once, and a writer opening next joins them.
    func testTruncateByPathBesidePassthroughReaders() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("needs the store") }
        let big = testBytes(1 << 20, seed: 48)
        try storeFiles(big: big, small: [1], extra: [])
        try mountExpectingPassthrough()
        let path = fx.m("big.bin")
        var reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { if reader >= 0 { close(reader) } }
        var got = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(pread(reader, &got, 16, 100), 16)
        XCTAssertEqual(truncate(path, 100), 0, "errno \(errno)")
        XCTAssertTrue(waitUntil(10) { pread(reader, &got, 16, 100) == 0 }, "the reader sees the file truncated")
        var st = Glibc.stat()
        XCTAssertEqual(fstat(reader, &st), 0)
        XCTAssertEqual(st.st_size, 100)
        let started = Date()
        let writer = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "the writer joined the reader without waiting")
        XCTAssertEqual(write(writer, "end", 3), 3)
        XCTAssertEqual(close(writer), 0)
        XCTAssertTrue(waitUntil(10) { pread(reader, &got, 16, 100) == 3 })
        XCTAssertBytes(fx.readFile(path), Array(big[0..<100]) + Array("end".utf8))
        close(reader)
        reader = -1
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        // The versions the truncate and the close made are the store's after a remount.
        try fx.mount()
        XCTAssertBytes(fx.readFile(path), Array(big[0..<100]) + Array("end".utf8))
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
    }

    /// `tail -f` beside a writer the kernel serves: what the writer appends shows in tail's
    /// output while both have the file open.
    func testTailFollowsAPassthroughWriter() throws {
        let first = Array("first line\n".utf8) + testBytes(300 << 10, seed: 47).map { $0 % 26 + 97 } + [10]
        try storeFiles(big: first, small: [1], extra: [])
        try mountExpectingPassthrough()
        let path = fx.m("big.bin")
        let out = fx.dir + "/tail.txt"
        let tail = try Child("/usr/bin/tail", ["-c", "+1", "-f", path], cwd: fx.dir, stdout: out, stderr: out)
        defer { tail.signalGroup(SIGKILL); tail.wait(seconds: 10) }
        func shown() -> Int { (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int) ?? 0 }
        XCTAssertTrue(waitUntil(30) { shown() >= first.count }, "tail showed the file")
        let writer = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        defer { close(writer) }
        for i in 0..<3 {
            let line = Array("appended \(i)\n".utf8)
            XCTAssertEqual(write(writer, line, line.count), line.count)
            XCTAssertTrue(
                waitUntil(30) { (try? String(contentsOfFile: out, encoding: .isoLatin1))?.hasSuffix("appended \(i)\n") == true },
                "tail -f shows append \(i)")
        }
        XCTAssertEqual(close(writer), 0)
        tail.signalGroup(SIGKILL)
        tail.wait(seconds: 10)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    // MARK: Writes

    /// A writer the kernel serves itself: random writes (dd conv=notrunc, pwrite past the end)
    /// land byte-exact with no write request reaching the daemon; stat while open and after close
    /// says the staged file's size and modification time.
    func testPassthroughWritesAreByteExactAndNeverReachTheDaemon() throws {
        let big = testBytes(6 << 20, seed: 43)
        try storeFiles(big: big, small: [1], extra: [])
        try fx.writeSource("chunk.bin", testBytes(64 << 10, seed: 44))
        try mountExpectingPassthrough()
        let before = try requests("write")
        // The reference copy gets the same writes.
        let dd = fx.sh(
            """
            set -e; cp src/big.bin ref.bin
            for i in $(seq 1 25); do
              n=$(( $(od -An -N2 -tu2 /dev/urandom) % 1600 ))
              for f in ref.bin mnt/big.bin; do dd if=src/chunk.bin of=$f bs=4k seek=$n count=$(( i % 16 + 1 )) conv=notrunc status=none; done
            done
            """)
        XCTAssertEqual(dd.status, 0, "\(dd)")
        XCTAssertEqual(fx.sh("cmp ref.bin mnt/big.bin").status, 0)
        // One handle: pwrites, growing the file; stat while it is open follows them.
        let r = fx.sh(
            """
            python3 -c '
            import os, random, sys, time
            ref = os.open("ref.bin", os.O_RDWR); f = os.open(sys.argv[1], os.O_RDWR)
            for i in range(300):
                data = os.urandom(random.randrange(1, 200000)); o = random.randrange(7 << 20)
                os.pwrite(ref, data, o); os.pwrite(f, data, o)
            t0 = time.time_ns(); os.pwrite(ref, b"end", 8 << 20); os.pwrite(f, b"end", 8 << 20)
            size = os.fstat(ref).st_size
            st = os.stat(sys.argv[1]); fs = os.fstat(f)
            assert st.st_size == size and fs.st_size == size, (st.st_size, fs.st_size, size)
            assert st.st_mtime_ns >= t0 - 20_000_000, (st.st_mtime_ns, t0)
            os.close(f); os.close(ref)
            after = os.stat(sys.argv[1])
            assert after.st_size == size, (after.st_size, size)
            assert after.st_mtime_ns == st.st_mtime_ns, (after.st_mtime_ns, st.st_mtime_ns)
            ' \(fx.m("big.bin"))
            """)
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        XCTAssertEqual(fx.sh("cmp ref.bin mnt/big.bin").status, 0)
        XCTAssertEqual(try requests("write") - before, 0, "the kernel wrote the staged file itself; log:\n\(fx.log)")
        // The count is real: a new file (create) is still written through the daemon.
        XCTAssertErrno(fx.writeFile(fx.m("new.bin"), testBytes(100_000, seed: 47)), 0)
        XCTAssertGreaterThan(try requests("write"), before, "a create's writes reach the daemon")
        // A truncate by path while nothing is open, then the same after a remount.
        XCTAssertEqual(fx.sh("truncate -s 5000000 ref.bin && truncate -s 5000000 mnt/big.bin && cmp ref.bin mnt/big.bin").status, 0)
        XCTAssertTrue(try fx.remount(), "remount; log:\n\(fx.log)")
        XCTAssertEqual(fx.sh("cmp ref.bin mnt/big.bin").status, 0)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }

    /// close(2) commits; a write through a dup'd descriptor afterwards must not change that
    /// version in place (the store's contents file the first close made keeps its bytes) and
    /// lands in the next version at the last close. A reader opened meanwhile sees the writes,
    /// and O_APPEND and ftruncate through the writer work.
    func testWriteThroughADupAfterCloseLandsInANewVersion() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("looks at the store's contents files") }
        let big = testBytes(1 << 20, seed: 45)
        try storeFiles(big: big, small: [1], extra: [])
        try mountExpectingPassthrough()
        let before = try requests("write")
        let r = fx.sh(
            """
            python3 -c '
            import os, sys
            path, contents = sys.argv[1], sys.argv[2]
            fd = os.open(path, os.O_RDWR); dup = os.dup(fd)
            os.pwrite(fd, b"first", 0)
            os.close(fd)
            assert open(path, "rb").read(5) == b"first"
            # The contents file the close committed.
            held = [os.open(os.path.join(d, n), os.O_RDONLY) for d, _, names in os.walk(contents) for n in names]
            held = [h for h in held if os.pread(h, 5, 0) == b"first"]
            assert len(held) == 1, len(held)
            os.pwrite(dup, b"SECOND", 0)
            assert open(path, "rb").read(6) == b"SECOND", "a reader sees the writes"
            assert os.pread(held[0], 5, 0) == b"first", "the committed version was written in place"
            os.ftruncate(dup, 100)
            os.close(dup)
            a = os.open(path, os.O_WRONLY | os.O_APPEND); os.write(a, b"tail"); os.close(a)
            ' \(fx.m("big.bin")) \(fx.store)/contents
            """)
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        XCTAssertBytes(fx.readFile(fx.m("big.bin")), Array("SECOND".utf8) + Array(big[6..<100]) + Array("tail".utf8))
        XCTAssertEqual(try requests("write") - before, 0, "log:\n\(fx.log)")
        XCTAssertTrue(try fx.remount(), "remount; log:\n\(fx.log)")
        XCTAssertBytes(fx.readFile(fx.m("big.bin")), Array("SECOND".utf8) + Array(big[6..<100]) + Array("tail".utf8))
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
    }

    /// kill -9 of the daemon while the kernel writes a staged file: the file is its old version
    /// or the whole new one after a remount, nothing staged is left, and `docfs check` agrees.
    func testKill9DuringAPassthroughWriteLeavesTheFileWhole() throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("needs the store (remounts)") }
        let old = testBytes(2 << 20, seed: 46)
        try storeFiles(big: old, small: [1], extra: [])
        try mountExpectingPassthrough()
        let staging = fx.store + "/staging"
        func largestStaged() -> Int64 {
            let names = (try? FileManager.default.subpathsOfDirectory(atPath: staging)) ?? []
            return names.map { name -> Int64 in
                var st = Glibc.stat()
                return Glibc.lstat(staging + "/" + name, &st) == 0 && st.st_mode & S_IFMT == S_IFREG ? Int64(st.st_size) : 0
            }.max() ?? 0
        }
        let out = fx.dir + "/writer.txt"
        let writer = try Child(
            "/bin/sh",
            [
                "-c",
                """
                exec python3 -c '
                import time
                with open("mnt/big.bin", "wb", buffering=0) as f:
                    for i in range(200):
                        f.write(bytes([i % 251]) * (1 << 20))
                        time.sleep(0.01)  # the point: paced so that the kill lands mid-write
                '
                """,
            ], cwd: fx.dir, stdout: out, stderr: out)
        defer { writer.signalGroup(SIGKILL); writer.wait(seconds: 10) }
        XCTAssertTrue(waitUntil(60) { largestStaged() >= 16 << 20 || writer.hasExited }, "the write never got going")
        let midway = !writer.hasExited
        fx.kill9()
        XCTAssertTrue(writer.wait(seconds: 30), "the writer must not hang once the daemon is gone")
        try fx.mount(extra: ["-o", "passthrough"])
        let now = fx.readFile(fx.m("big.bin"))
        XCTAssertErrno(now.errno, 0)
        let new = (0..<200).flatMap { [UInt8](repeating: UInt8($0 % 251), count: 1 << 20) }
        if midway {
            XCTAssert(now.bytes == old || now.bytes == new, "big.bin is torn: \(now.bytes?.count ?? -1) bytes")
        } else {
            XCTAssert(now.bytes == new, "the writer closed before the kill: the new version")
        }
        XCTAssertTrue(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        let check = fx.docfs(["check", fx.store])
        XCTAssertEqual(check.status, 0, "\(check)")
        XCTAssert(check.stdout.contains("is consistent"), "\(check)")
        XCTAssertEqual(largestStaged(), 0, "no staged data left")
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
        let r = fx.sh(
            """
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

/// A passthrough writer's contents are still judged at close: refused there with the errno and
/// log line of any writer, and the file reads as its stored version again.
final class PassthroughRefusalMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }
    override class var layout: String? {
        """
        folders:
          - path: Notes
            allowedContentTypes: [public.text]
        """
    }

    func testARefusedTypeIsStillRefusedAtClose() throws {
        let good = Array("Grüße ✓\n".utf8)
        try fx.mount()
        XCTAssertErrno(fx.writeFile(fx.m("Notes/good.txt"), good), 0)
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0,passthrough"])
        try fx.skipUnlessPassthrough()
        let before = try MetricsScrape.requests("write", of: fx)
        // Latin-1, not UTF-8: refused at close with EIO, as through the daemon.
        XCTAssertErrno(fx.writeFile(fx.m("Notes/good.txt"), [0x47, 0x72, 0xFC, 0xDF, 0x65, 0x0A], flags: O_WRONLY | O_TRUNC), EIO)
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), good)
        XCTAssertEqual(Int(fx.stat(fx.m("Notes/good.txt")).st.st_size), good.count)
        let lines = fx.logLines { $0.contains("refused") && $0.contains("/Notes/good.txt") }
        XCTAssertEqual(lines.count, 1, "log:\n\(fx.log)")
        XCTAssertTrue(lines.first?.contains("EIO") ?? false, lines.joined(separator: "\n"))
        // A valid edit goes through.
        XCTAssertErrno(fx.writeFile(fx.m("Notes/good.txt"), Array("v2 ✓\n".utf8), flags: O_WRONLY | O_TRUNC), 0)
        XCTAssertBytes(fx.readFile(fx.m("Notes/good.txt")), Array("v2 ✓\n".utf8))
        XCTAssertEqual(try MetricsScrape.requests("write", of: fx) - before, 0, "both writers were the kernel's; log:\n\(fx.log)")
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
    }
}
