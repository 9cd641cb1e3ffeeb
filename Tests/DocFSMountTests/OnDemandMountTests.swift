import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// Contents on demand (README's *Remote*): `init --remote` of a tree takes its metadata only,
/// a file downloads when opened (a read waits for its range), `docfs evict` and `docfs pin`,
/// `--cache-size`, and a read of an evicted file while the server hangs fails with EIO.
final class OnDemandMountTests: ReplicaTestCase {
    /// Bytes of contents the store holds: its content files and downloads in progress.
    func localBytes(_ store: String) -> Int64 {
        var total: Int64 = 0
        for folder in ["contents", "staging"] {
            let path = store + "/" + folder
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                var st = stat()
                if lstat(path + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG { total += Int64(st.st_size) }
            }
        }
        return total
    }

    func status(_ path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    func writeRandom(_ path: String, bytes: Int) throws {
        var generator = SystemRandomNumberGenerator()
        var buffer = [UInt8](repeating: 0, count: bytes)
        for i in 0..<bytes { buffer[i] = UInt8.random(in: 0...255, using: &generator) }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(buffer).write(to: URL(fileURLWithPath: path))
    }

    func testInitTakesTheMetadataAndFilesDownloadWhenOpened() throws {
        let r = try makeRemote()
        let big = 6 << 20
        try writeRandom(r.fx.src + "/t/big.bin", bytes: big)
        try writeRandom(r.fx.src + "/t/sub/small.bin", bytes: 10_000)
        XCTAssertEqual(r.fx.sh("printf hello > src/t/sub/hello.txt && : > src/t/empty.txt && cp -r src/t mnt/").status, 0)
        try r.waitUntilUploaded()

        let b = try makeSecond(r)
        XCTAssertEqual(localBytes(b.store), 0, "init took the metadata only")
        let file = b.mnt + "/t/big.bin"
        let before = try XCTUnwrap(status(file))
        XCTAssertEqual(Int(before.st_size), big, "ls -l shows the true size")
        XCTAssertEqual(before.st_blocks, 0, "du shows nothing here")
        XCTAssertEqual(r.xattr(file, "user.docfs.downloaded"), "no")
        XCTAssertEqual(r.xattr(b.mnt + "/t/empty.txt", "user.docfs.downloaded"), "yes", "an empty file has nothing to fetch")
        XCTAssertEqual(r.fx.sh("du -k '\(file)' | cut -f1").stdout.trimmingCharacters(in: .whitespacesAndNewlines), "0")

        // A read in the middle of the file waits for its range only, and gets the right bytes.
        let slice = r.fx.sh(
            "dd if='\(file)' bs=4096 skip=1000 count=16 status=none > slice-b && dd if=src/t/big.bin bs=4096 skip=1000 count=16 status=none > slice-a && cmp slice-a slice-b"
        )
        XCTAssertEqual(slice.status, 0, "\(slice)")
        let diff = r.fx.sh("diff -r src/t '\(b.mnt)/t'")
        XCTAssertEqual(diff.status, 0, "every file reads right: \(diff)")
        eventually("big.bin is downloaded") { r.xattr(file, "user.docfs.downloaded") == "yes" }
        XCTAssertGreaterThan(status(file)?.st_blocks ?? 0, 0, "du shows it once it is here")
        XCTAssertEqual(localBytes(b.store), Int64(big + 10_000 + 5))

        // The store is consistent with files on the server only (B's remaining one is evicted).
        XCTAssertEqual(r.fx.docfs(["evict", b.mnt + "/t/sub/hello.txt"]).status, 0)
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt]).status, 0)
        let check = r.fx.docfs(["check", b.store])
        XCTAssertEqual(check.status, 0, "docfs check of a store with evicted files: \(check)")
        try mountSecond(r, b)
        XCTAssertEqual(contents(b.mnt + "/t/sub/hello.txt"), "hello")
    }

    /// Chunks of 64 KiB (`DOCFS_DOWNLOAD_CHUNK`): the end of a file, then its middle, then its
    /// start are read first, each fetched by a ranged request ahead of the rest, and the file
    /// put together from chunks out of order is byte-exact. (That such a read does not wait
    /// for the bytes before it is `ChunkedDownloadTests`, with a server held on purpose.)
    func testReadsFarIntoAFileFetchTheirRangeFirst() throws {
        let r = try makeRemote()
        let size = (3 << 20) + 1234
        try writeRandom(r.fx.src + "/far.bin", bytes: size)
        XCTAssertEqual(r.fx.sh("cp src/far.bin mnt/").status, 0)
        try r.waitUntilUploaded()
        let b = try makeSecond(r, env: ["DOCFS_DOWNLOAD_CHUNK": "65536"])
        let file = b.mnt + "/far.bin"
        XCTAssertEqual(r.xattr(file, "user.docfs.downloaded"), "no")
        for (skip, count) in [(size / 4096 - 1, 2), (400, 40), (0, 3)] {
            let slice = r.fx.sh(
                "dd if='\(file)' bs=4096 skip=\(skip) count=\(count) status=none > b.part && dd if=src/far.bin bs=4096 skip=\(skip) count=\(count) status=none > a.part && cmp a.part b.part"
            )
            XCTAssertEqual(slice.status, 0, "4 KiB blocks \(skip)..<\(skip + count): \(slice)")
        }
        XCTAssertEqual(r.fx.sh("cmp src/far.bin '\(file)'").status, 0)
        eventually("far.bin is downloaded") { r.xattr(file, "user.docfs.downloaded") == "yes" }
        XCTAssertEqual(localBytes(b.store), Int64(size), "one whole copy, no chunk twice")
        XCTAssertEqual(r.fx.sh("cmp src/far.bin '\(file)'").status, 0, "read again from the store's copy")
    }

    func testEvictAndPin() throws {
        let r = try makeRemote()
        let b = try makeSecond(r)
        try writeRandom(r.fx.src + "/d/a.bin", bytes: 300_000)
        try writeRandom(r.fx.src + "/d/b.bin", bytes: 200_000)
        XCTAssertEqual(r.fx.sh("mkdir -p src/d/s && printf c > src/d/s/c.txt && cp -r src/d mnt/").status, 0)
        try r.waitUntilUploaded()
        let a = r.mnt

        // evict a file: ls -l keeps its size, du drops it, reading brings it back.
        let local = localBytes(r.fx.store)
        let evict = r.fx.docfs(["evict", a + "/d/a.bin"])
        XCTAssertEqual(evict.status, 0, "\(evict)")
        XCTAssertEqual(r.xattr(a + "/d/a.bin", "user.docfs.downloaded"), "no")
        XCTAssertEqual(status(a + "/d/a.bin")?.st_size, 300_000)
        XCTAssertEqual(status(a + "/d/a.bin")?.st_blocks, 0)
        XCTAssertEqual(localBytes(r.fx.store), local - 300_000)
        XCTAssertEqual(r.fx.sh("cmp src/d/a.bin mnt/d/a.bin").status, 0)
        eventually("a.bin is back") { r.xattr(a + "/d/a.bin", "user.docfs.downloaded") == "yes" }

        // evict a folder: everything below it.
        XCTAssertEqual(r.fx.docfs(["evict", a + "/d"]).status, 0)
        for name in ["a.bin", "b.bin", "s/c.txt"] {
            XCTAssertEqual(r.xattr(a + "/d/" + name, "user.docfs.downloaded"), "no", name)
        }
        XCTAssertEqual(r.fx.sh("diff -r src/d mnt/d").status, 0)

        // pin on B: downloaded before the command returns, without a read; never evicted.
        eventually("B has the folder") { exists(b.mnt + "/d/s/c.txt") }
        XCTAssertEqual(r.xattr(b.mnt + "/d/a.bin", "user.docfs.downloaded"), "no", "B has the metadata only")
        let pin = r.fx.docfs(["pin", b.mnt + "/d"])
        XCTAssertEqual(pin.status, 0, "\(pin)")
        for name in ["a.bin", "b.bin", "s/c.txt"] {
            XCTAssertEqual(r.xattr(b.mnt + "/d/" + name, "user.docfs.downloaded"), "yes", name)
        }
        XCTAssertEqual(r.xattr(b.mnt + "/d", "user.docfs.pinned"), "yes")
        XCTAssertEqual(r.xattr(b.mnt + "/d/s/c.txt", "user.docfs.pinned"), "yes", "pinned through its folder")
        let refused = r.fx.docfs(["evict", b.mnt + "/d/a.bin"])
        XCTAssertNotEqual(refused.status, 0, "a pinned file is not evicted")
        XCTAssertTrue(refused.stderr.contains("cannot evict"), refused.stderr)
        XCTAssertEqual(r.xattr(b.mnt + "/d/a.bin", "user.docfs.downloaded"), "yes")
        // A file another replica adds to a pinned folder arrives with its contents.
        XCTAssertEqual(r.fx.sh("printf new > mnt/d/s/new.txt").status, 0)
        eventually("B has new.txt, downloaded") { r.xattr(b.mnt + "/d/s/new.txt", "user.docfs.downloaded") == "yes" }
        XCTAssertEqual(contents(b.mnt + "/d/s/new.txt"), "new")
        // Unpinned, it can go.
        XCTAssertEqual(r.fx.docfs(["pin", "--remove", b.mnt + "/d"]).status, 0)
        XCTAssertNil(r.xattr(b.mnt + "/d", "user.docfs.pinned"))
        XCTAssertEqual(r.fx.docfs(["evict", b.mnt + "/d"]).status, 0)
        XCTAssertEqual(r.xattr(b.mnt + "/d/a.bin", "user.docfs.downloaded"), "no")

        // Contents not on the server yet stay, with a clear refusal.
        try servers.stopPostgres()
        defer { try? servers.startPostgres() }
        XCTAssertEqual(r.fx.sh("printf waiting > mnt/d/pending.txt").status, 0)
        let pending = r.fx.docfs(["evict", a + "/d/pending.txt"])
        XCTAssertNotEqual(pending.status, 0)
        XCTAssertTrue(pending.stderr.contains("not on the server yet"), pending.stderr)
        XCTAssertEqual(contents(a + "/d/pending.txt"), "waiting")
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["pending.txt is kept"]).isEmpty, "one log line names the file and why: \(r.logTail())")
        try servers.startPostgres()
        try r.waitUntilUploaded()
        XCTAssertEqual(r.fx.docfs(["evict", a + "/d/pending.txt"]).status, 0, "uploaded now")
        XCTAssertEqual(contents(a + "/d/pending.txt"), "waiting")
    }

    func testCacheSizeKeepsTheLocalContentsUnderTheLimit() throws {
        let r = try makeRemote(mount: false)
        let limit: Int64 = 1 << 20
        try r.fx.mount(extra: ["--cache-size", "1M"])
        var files: [String] = []
        for folder in 0..<2 {
            for i in 0..<12 {
                let name = "t/f\(folder)/file\(i).bin"
                try writeRandom(r.fx.src + "/" + name, bytes: 128 << 10)
                files.append(name)
            }
        }
        XCTAssertEqual(r.fx.sh("cp -r src/t mnt/").status, 0, "3 MiB copied into a mount limited to 1 MiB")
        try r.waitUntilUploaded()
        eventually("the contents here shrink under the limit once uploaded") { localBytes(r.fx.store) <= limit }
        // Read back one by one: each download makes room first, so the limit holds throughout
        // (a file whose last reader is still being released can hold it over for that moment).
        for name in files {
            let read = r.fx.sh("cmp 'src/\(name)' 'mnt/\(name)'")
            XCTAssertEqual(read.status, 0, "\(name): \(read)")
            eventually("under the limit after reading \(name)", timeout: 10) { localBytes(r.fx.store) <= limit }
        }
        let diff = r.fx.sh("diff -r src/t mnt/t")
        XCTAssertEqual(diff.status, 0, "\(diff)")
        eventually("under the limit after diff -r", timeout: 10) { localBytes(r.fx.store) <= limit }
        let refused = r.fx.docfs(["mount", r.fx.dir + "/plain", r.fx.dir + "/nowhere", "--cache-size", "lots"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("--cache-size"), refused.stderr)
    }

    func testReadingAnEvictedFileWhileTheServerHangsFailsWithEIO() throws {
        let r = try makeRemote(mount: false)
        try r.fx.mount(env: ["DOCFS_DOWNLOAD_TIMEOUT": "3"])
        try writeRandom(r.fx.src + "/f.bin", bytes: 200_000)
        XCTAssertEqual(r.fx.sh("cp src/f.bin mnt/").status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(r.fx.docfs(["evict", r.mnt + "/f.bin"]).status, 0)
        // moto stopped (SIGSTOP): connections are accepted and never answered.
        let pidText = try String(contentsOfFile: servers.serversDir + "/moto.pid", encoding: .utf8)
        let moto = try XCTUnwrap(pid_t(pidText.trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertEqual(kill(moto, SIGSTOP), 0)
        var resumed = false
        defer { if !resumed { kill(moto, SIGCONT) } }
        let read = r.fx.sh("cat mnt/f.bin > /dev/null", timeout: 60)
        XCTAssertFalse(read.timedOut)
        XCTAssertNotEqual(read.status, 0)
        XCTAssertTrue(read.stderr.contains("Input/output error"), read.stderr)
        XCTAssertFalse(r.logLines(mentioningAnyOf: ["no bytes of the contents arrived"]).isEmpty, r.logTail())
        XCTAssertEqual(r.fx.sh("ls -l mnt/f.bin").status, 0, "the rest of the mount answers")
        kill(moto, SIGCONT)
        resumed = true
        let again = r.fx.sh("cmp src/f.bin mnt/f.bin", timeout: 90)
        XCTAssertEqual(again.status, 0, "read once the server answers: \(again)")
    }
}
