import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// Reads from a hot standby (`docfs init --remote-read`, `StandbyReads`) against in-memory
/// servers: `standby` is a second server that has what the primary (`server`) had when it last
/// "replayed" (`replay()`, a copy of the primary's state, as a standby's snapshot is a prefix of
/// the primary's commits). The replica must never apply a state older than what it knows, and
/// must get everything once the standby has it.
final class StandbyReadsTests: ReplicaTestCase {
    var standby: InMemoryServer!
    var reads: StandbyReads!

    override func setUp() async throws {
        try await super.setUp()
        standby = InMemoryServer()
        reads = StandbyReads(
            primary: server, standby: standby, standbyName: "postgres://r@standby.example:5432/docs",
            lagWait: .milliseconds(300))
    }

    /// The standby replays the primary's log up to now.
    func replay() { standby.restore(server.backup()) }

    func startEngineReadingFromStandby() {
        let engine = SyncEngine(
            store: store.replica!, configuration: Self.configuration, logger: logger,
            server: server, incomingServer: reads, objects: objects, timing: Self.fastTiming)
        engine.start()
        self.engine = engine
    }

    /// Another replica's new file, made on the primary directly.
    func othersFile(_ name: String, _ text: String) async throws -> Int64 {
        let key = "tree/objects/\(UUID().uuidString)"
        objects.put(key, text)
        return try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: name, kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644, creationTime: FileTime(totalNanoseconds: 42), modificationTime: FileTime(totalNanoseconds: 42)),
            content: RemoteContent(key: key, size: Int64(text.utf8.count))
        ).itemID
    }

    func rootNames() throws -> Set<String> { Set(try store.enumerateItems(in: .rootContainer).map(\.filename)) }

    func testAChangeAppearsOnlyOnceTheStandbyHasReplayedIt() async throws {
        startEngineReadingFromStandby()
        _ = try await othersFile("early.txt", "written before the standby replayed")
        // The primary's log end is known (each catch-up reads it): the standby behind it is waited
        // for, and said so, never read as if it were current.
        try await waitUntil("the status names the lagging standby") {
            (engine?.status().lastError ?? "").contains("the read standby postgres://r@standby.example:5432/docs has the change log to 0")
        }
        XCTAssertEqual(try rootNames(), [])
        XCTAssertEqual(try store.replica!.syncAnchor().position, 0)
        replay()
        try await waitUntil("the file arrives once the standby has it") { try rootNames() == ["early.txt"] }
        XCTAssertEqual(try localText("early.txt"), "written before the standby replayed")
        try await waitUntil("the catch-up's error clears") { engine?.follower.lastError.withLock({ $0 }) == nil }
        // Every read of the catch-up went to the standby; the primary was asked only its log end.
        XCTAssertGreaterThan(standby.calls("changes"), 0)
        XCTAssertEqual(server.calls("changes"), 0)
        XCTAssertEqual(server.calls("items"), 0)
        XCTAssertGreaterThan(server.calls("latestPosition"), 0)
    }

    /// A standby that restarts at an older point (its minimum recovery point) after it served a
    /// newer one: the replica waits for it to come back, deletes nothing and skips nothing.
    func testAStandbyThatGoesBackIsWaitedForAndNothingIsLostOrSkipped() async throws {
        startEngineReadingFromStandby()
        let older = server.backup()
        _ = try await othersFile("one.txt", "one")
        replay()
        try await waitUntil("one.txt arrives") { try rootNames() == ["one.txt"] }
        let anchor = try store.replica!.syncAnchor().position
        // The standby reopens before one.txt while two more files are written on the primary.
        standby.restore(older)
        _ = try await othersFile("two.txt", "two")
        _ = try await othersFile("three.txt", "three")
        try await waitUntil("the catch-up says it waits for the standby") {
            (engine?.status().lastError ?? "").contains("waiting for its replay")
        }
        XCTAssertEqual(try rootNames(), ["one.txt"], "a standby behind the replica took something away")
        XCTAssertEqual(try store.replica!.syncAnchor().position, anchor)
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.url.path + "/recovered"), "an older standby was taken for a restore")
        replay()
        try await waitUntil("every file arrives") { try rootNames() == ["one.txt", "two.txt", "three.txt"] }
        XCTAssertEqual(try localText("three.txt"), "three")
        let end = try await server.latestPosition()
        XCTAssertEqual(try store.replica!.syncAnchor().position, end)
    }

    /// This replica's own files are on the primary before the standby has them: a standby behind
    /// never makes them look lost (the restore check) nor takes them back.
    func testOwnWritesAreNotTakenBackByALaggingStandby() async throws {
        replay()
        startEngineReadingFromStandby()
        for i in 1...3 { _ = try await importFile("mine\(i).txt", "mine \(i)") }
        try await waitForOutbox()
        XCTAssertEqual(Set(server.tree().keys), ["mine1.txt", "mine2.txt", "mine3.txt"])
        // The engine starts again (a remount): its restore check runs with the standby behind.
        await engine?.stop()
        engine = nil
        reads = StandbyReads(primary: server, standby: standby, standbyName: "standby", lagWait: .milliseconds(300))
        startEngineReadingFromStandby()
        _ = try await othersFile("theirs.txt", "theirs")
        try await Task.sleep(for: .milliseconds(800)) // several catch-ups against the lagging standby
        XCTAssertEqual(try rootNames(), ["mine1.txt", "mine2.txt", "mine3.txt"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.url.path + "/recovered"))
        replay()
        try await waitUntil("the other replica's file arrives") { try rootNames().contains("theirs.txt") }
        XCTAssertEqual(try rootNames(), ["mine1.txt", "mine2.txt", "mine3.txt", "theirs.txt"])
        XCTAssertEqual(try localText("mine2.txt"), "mine 2")
    }

    /// Rows from the standby go through the primary's checks (`ServerRowChecks`): a bad one is
    /// set aside, the rest arrives.
    func testRowsFromTheStandbyAreCheckedAsThePrimarysAre() async throws {
        startEngineReadingFromStandby()
        server.plant(InMemoryServer.fileRow(id: 100, name: "a/b"))
        _ = try await othersFile("after.txt", "after the bad row")
        replay()
        try await waitUntil("after.txt arrived") { try rootNames().contains("after.txt") }
        XCTAssertEqual(try rootNames(), ["after.txt"])
        let aside = await engine!.incoming.setAside
        XCTAssertEqual(aside[100], "a name with a /")
    }

    /// The fence itself: behind, it throws after `lagWait` naming both ends; current, it returns.
    func testTheFenceWaitsForTheStandbyAndSaysHowFarBehindItIs() async throws {
        _ = try await othersFile("a.txt", "a")
        _ = try await othersFile("b.txt", "b")
        let end = try await server.latestPosition()
        let started = ContinuousClock.now
        do {
            try await reads.awaitCurrentReads()
            XCTFail("a standby behind the primary was taken as current")
        } catch {
            XCTAssertEqual(
                "\(error)",
                "PostgreSQL unreachable: the read standby postgres://r@standby.example:5432/docs has the change log to 0, the server to \(end): waiting for its replay"
            )
            XCTAssertGreaterThanOrEqual(ContinuousClock.now - started, .milliseconds(300))
        }
        // Any read waits likewise.
        do { _ = try await reads.changes(since: 0, limit: 10); XCTFail("read a standby behind the primary") } catch {}
        replay()
        try await reads.awaitCurrentReads()
        let changes = try await reads.changes(since: 0, limit: 10)
        XCTAssertEqual(changes.count, 2)
        let standbyEnd = try await reads.latestPosition()
        XCTAssertEqual(standbyEnd, end)
    }

    /// "None" from the standby is asked of the primary (a manifest this replica recorded itself).
    func testAManifestTheStandbyLacksComesFromThePrimary() async throws {
        let hash = String(repeating: "a", count: 64)
        server.plant(
            blocks: [StoredBlock(hash: hash, pack: "tree/packs/p", offset: 0, length: 3)],
            manifest: BlockManifest(key: "tree/manifests/m", size: 3, hashes: [hash]))
        let manifest = try await reads.manifest(key: "tree/manifests/m")
        XCTAssertEqual(manifest?.blocks.map(\.hash), [hash])
        let places = try await reads.places(of: [hash])
        XCTAssertEqual(places[hash]?.map(\.pack), ["tree/packs/p"])
        XCTAssertEqual(standby.calls("manifest"), 1, "the standby was not asked first")
    }

    /// A download's lookups while the standby is down come from the primary.
    func testADownloadsLookupsGoToThePrimaryWhileTheStandbyIsDown() async throws {
        let hash = String(repeating: "b", count: 64)
        server.plant(
            blocks: [StoredBlock(hash: hash, pack: "tree/packs/q", offset: 0, length: 3)],
            manifest: BlockManifest(key: "tree/manifests/n", size: 3, hashes: [hash]))
        replay()
        standby.failNext(RemoteError.unreachable("connection refused"), RemoteError.unreachable("connection refused"))
        let manifest = try await reads.manifest(key: "tree/manifests/n")
        XCTAssertEqual(manifest?.blocks.map(\.hash), [hash])
        let places = try await reads.places(of: [hash])
        XCTAssertEqual(places[hash]?.map(\.pack), ["tree/packs/q"])
        XCTAssertEqual(server.calls("manifest"), 1)
    }

    /// The standby down: its errors name it (the status shows why), and writes still go.
    func testAStandbyThatIsDownIsNamedAndWritesStillGo() async throws {
        replay()
        standby.failNext(RemoteError.unreachable("connection refused"))
        do { _ = try await reads.rootID(); XCTFail("read a standby that is down") } catch {
            XCTAssertEqual("\(error)", "PostgreSQL unreachable: the read standby postgres://r@standby.example:5432/docs: connection refused")
        }
        _ = try await reads.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "sent.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644, creationTime: FileTime(totalNanoseconds: 1), modificationTime: FileTime(totalNanoseconds: 1)))
        XCTAssertNotNil(server.tree()["sent.txt"])
        XCTAssertNil(standby.tree()["sent.txt"])
    }
}

/// `docfs init --remote-read` as the store keeps it and a mount reads it.
final class ReadTargetTests: XCTestCase {
    let environment = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "HOME": "/nonexistent"]

    func link(read: String?) -> RemoteLink {
        var link = RemoteLink(
            postgres: "postgres://laptop:pw-laptop@db.example:5432/docs", bucket: "b", prefix: "p",
            endpoint: nil, region: "us-east-1", credentialsFile: nil)
        link.read = read
        return link
    }

    func testAStoreKeptBeforeReadsFromItsServer() throws {
        let json = #"{"postgres":"postgres://laptop@db.example:5432/docs","bucket":"b","prefix":"p","region":"us-east-1"}"#
        let old = try JSONDecoder().decode(RemoteLink.self, from: Data(json.utf8))
        XCTAssertNil(old.read)
        XCTAssertNil(try ReplicaConfiguration.resolve(link: old, store: nil, environment: environment).read)
    }

    func testTheStandbyIsKeptAndReadBack() throws {
        let kept = link(read: "postgres://laptop@standby.example:5433/docs?sslmode=verify-full")
        let decoded = try JSONDecoder().decode(RemoteLink.self, from: JSONEncoder().encode(kept))
        XCTAssertEqual(decoded.read, "postgres://laptop@standby.example:5433/docs?sslmode=verify-full")
        let read = try XCTUnwrap(ReplicaConfiguration.resolve(link: decoded, store: nil, environment: environment).read)
        XCTAssertEqual(read.host, "standby.example")
        XCTAssertEqual(read.port, 5433)
        XCTAssertEqual(read.effectiveSSLMode, .verifyFull)
        // The same role: the server's password.
        XCTAssertEqual(read.password, "pw-laptop")
    }

    func testAnotherRoleFindsItsPasswordInTheStoresPgpass() throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("read-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: store) }
        let pgpass = store.appendingPathComponent("pgpass")
        try "standby.example:5433:docs:reader:pw-reader\n".write(to: pgpass, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: pgpass.path)
        let read = try XCTUnwrap(
            ReplicaConfiguration.resolve(
                link: link(read: "postgres://reader@standby.example:5433/docs"),
                store: store, environment: environment
            ).read)
        XCTAssertEqual(read.password, "pw-reader")
    }

    func testAStandbyURLThatIsNoURLIsRefused() {
        XCTAssertThrowsError(try ReplicaConfiguration.resolve(link: link(read: "standby.example:5433"), store: nil, environment: environment)) {
            XCTAssertTrue("\($0)".contains("--remote-read"), "\($0)")
        }
    }
}
