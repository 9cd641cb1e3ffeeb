import Foundation
import XCTest

/// `docfs versions` on a mounted replica: the server's versions of a file listed, one restored
/// as the file's contents (a new version the server gets) or beside it, and `docfs remote gc`
/// keeping old versions for --keep-versions.
final class VersionHistoryMountTests: ReplicaTestCase {
    struct Listing: Decodable {
        struct Version: Decodable { var number: Int64; var size: Int64; var collected: Bool; var replica: String? }
        var current: Int64?
        var versions: [Version]
    }

    func listing(_ r: RemoteMount, _ path: String) throws -> Listing {
        let run = r.fx.docfs(["versions", path, "--json"], env: r.awsEnvironment(secret: servers.secretKey))
        guard run.status == 0 else { throw FixtureError("docfs versions: \(run)") }
        return try JSONDecoder().decode(Listing.self, from: Data(run.stdout.utf8))
    }

    func testVersionsAreListedRestoredAndKeptByGC() throws {
        let r = try makeRemote()
        let env = r.awsEnvironment(secret: servers.secretKey)
        for text in ["one", "two two", "three three three"] {
            XCTAssertEqual(r.fx.sh("printf '\(text)' > mnt/notes.txt").status, 0)
            try r.waitUntilUploaded()
        }
        var list = try listing(r, r.fx.m("notes.txt"))
        XCTAssertEqual(list.versions.map(\.size).suffix(3), [3, 7, 17], "\(list)")
        XCTAssertEqual(list.current, list.versions.last?.number)
        XCTAssertTrue(
            list.versions.allSatisfy { $0.replica?.hasSuffix(":" + URL(fileURLWithPath: r.fx.store).lastPathComponent) == true },
            "each version names the replica that sent it: \(list)")
        let first = try XCTUnwrap(list.versions.first { $0.size == 3 }).number
        let human = r.fx.docfs(["versions", r.fx.m("notes.txt")], env: env)
        XCTAssertEqual(human.status, 0, "\(human)")
        XCTAssertTrue(human.stdout.contains("current"), human.stdout)

        // Restored in place: an ordinary edit, which reaches the server as a new version.
        let restore = r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), String(first)], env: env)
        XCTAssertEqual(restore.status, 0, "\(restore)")
        XCTAssertEqual(contents(r.fx.m("notes.txt")), "one")
        try r.waitUntilUploaded()
        list = try listing(r, r.fx.m("notes.txt"))
        XCTAssertEqual(list.versions.last?.size, 3)
        XCTAssertEqual(list.current, list.versions.last?.number)
        // Beside it, under a new name; a name taken is refused.
        let second = try XCTUnwrap(list.versions.first { $0.size == 7 }).number
        let beside = r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), String(second), "--as", "notes v2.txt"], env: env)
        XCTAssertEqual(beside.status, 0, "\(beside)")
        XCTAssertEqual(contents(r.fx.m("notes v2.txt")), "two two")
        XCTAssertNotEqual(r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), String(second), "--as", "notes v2.txt"], env: env).status, 0)
        XCTAssertNotEqual(r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), "999"], env: env).status, 0)
        try r.waitUntilUploaded()

        // gc keeps old versions for --keep-versions (30 days), then removes them.
        XCTAssertEqual(r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0"], env: env).status, 0)
        XCTAssertFalse(try listing(r, r.fx.m("notes.txt")).versions.contains { $0.collected })
        XCTAssertEqual(r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0", "--keep-versions", "0"], env: env).status, 0)
        list = try listing(r, r.fx.m("notes.txt"))
        XCTAssertTrue(list.versions.contains { $0.collected }, "\(list)")
        XCTAssertFalse(list.versions.last!.collected, "the current version stays")
        let gone = try XCTUnwrap(list.versions.first { $0.collected }).number
        let refused = r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), String(gone)], env: env)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("removed by `docfs remote gc`"), refused.stderr)
        XCTAssertEqual(contents(r.fx.m("notes.txt")), "one", "a refused restore leaves the file as it was")
    }

    /// A writer opening a file the kernel's passthrough readers hold joins them at once, in
    /// place: the readers see its bytes, and the version it replaced is kept, byte-exact, as the
    /// server's previous version of the file.
    func testTheVersionAWriterReplacesBesidePassthroughReadersIsKept() throws {
        let r = try makeRemote()
        let env = r.awsEnvironment(secret: servers.secretKey)
        // Past the segment limit: a content file of its own, which the kernel reads itself.
        let old = testBytes(1 << 20, seed: 50)
        let path = r.fx.m("big.bin")
        XCTAssertErrno(r.fx.writeFile(path, old), 0)
        try r.waitUntilUploaded()
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var got = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        let started = Date()
        let writer = open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "no wait for the reader")
        XCTAssertEqual(pwrite(writer, "NEW!", 4, 0), 4)
        eventually("the reader sees the writer's bytes") { pread(reader, &got, 4, 0) == 4 && got == Array("NEW!".utf8) }
        XCTAssertEqual(close(writer), 0)
        try r.waitUntilUploaded()
        let list = try listing(r, path)
        XCTAssertGreaterThanOrEqual(list.versions.count, 2, "\(list)")
        let previous = list.versions[list.versions.count - 2].number
        let beside = r.fx.docfs(["versions", "restore", path, String(previous), "--as", "before.bin"], env: env)
        XCTAssertEqual(beside.status, 0, "\(beside)")
        XCTAssertBytes(r.fx.readFile(r.fx.m("before.bin")), old, "the replaced version, byte-exact")
        XCTAssertBytes(r.fx.readFile(path), Array("NEW!".utf8) + old[4...])
    }

    /// A writer beside passthrough readers of a file just written, whose version may still be
    /// waiting to be sent: no wait, and every version the server keeps is whole, the bytes
    /// before the write or after it (an upload reading the file while it became live reads
    /// the kept version again, `LiveDetaches`), never a mix of both.
    func testAWriterBesideReadersOfAVersionNotYetSentWaitsNotAndEveryVersionIsWhole() throws {
        let r = try makeRemote()
        let env = r.awsEnvironment(secret: servers.secretKey)
        // Several blocks: a mix of the two versions would show as old first bytes and new last ones.
        let old = testBytes(8 << 20, seed: 51)
        let path = r.fx.m("fresh.bin")
        XCTAssertErrno(r.fx.writeFile(path, old), 0)
        let reader = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var got = [UInt8](repeating: 0, count: 4)
        XCTAssertEqual(pread(reader, &got, 4, 0), 4)
        let started = Date()
        let writer = open(path, O_WRONLY)
        XCTAssertGreaterThanOrEqual(writer, 0, "errno \(errno)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1.0, "no wait for the reader")
        XCTAssertEqual(pwrite(writer, "NEW!", 4, 0), 4)
        XCTAssertEqual(pwrite(writer, "END!", 4, off_t(old.count - 4)), 4)
        eventually("the reader sees the writer's bytes") { pread(reader, &got, 4, 0) == 4 && got == Array("NEW!".utf8) }
        XCTAssertEqual(close(writer), 0)
        try r.waitUntilUploaded()
        let new = Array("NEW!".utf8) + old[4..<(old.count - 4)] + Array("END!".utf8)
        XCTAssertBytes(r.fx.readFile(path), new)
        let list = try listing(r, path)
        XCTAssertFalse(list.versions.isEmpty, "\(list)")
        for (index, version) in list.versions.enumerated() {
            let name = "v\(index).bin"
            let beside = r.fx.docfs(["versions", "restore", path, String(version.number), "--as", name], env: env)
            XCTAssertEqual(beside.status, 0, "\(beside)")
            let bytes = r.fx.readFile(r.fx.m(name)).bytes ?? []
            XCTAssertTrue(bytes == old || bytes == new, "version \(version.number) is neither the old bytes nor the new ones")
        }
        XCTAssertBytes(r.fx.readFile(r.fx.m("v\(list.versions.count - 1).bin")), new, "the last version is the writer's")
    }
}
