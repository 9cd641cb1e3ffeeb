import XCTest
import Foundation
import Logging
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// A replica store in a temporary folder, its sync engine running against an in-memory server
/// and object store: no PostgreSQL, no S3, no mount.
class ReplicaTestCase: XCTestCase {
    var directory: URL!
    var store: LocalStore!
    var server: InMemoryServer!
    var objects: InMemoryObjects!
    var engine: SyncEngine?
    let logger = Logger(label: "docfs.replica.tests")

    /// Short retries, so that backoff and stalls are seen in milliseconds.
    static var fastTiming: SyncEngine.RetryTiming {
        var timing = SyncEngine.RetryTiming()
        timing.firstBackoff = .milliseconds(20)
        timing.longestBackoff = .milliseconds(200)
        timing.stalledRetry = .milliseconds(100)
        return timing
    }

    static let configuration = ReplicaConfiguration(
        postgres: PostgresURL(host: "127.0.0.1", port: 1, user: "nobody", database: "none"),
        endpoint: S3Endpoint(url: "http://127.0.0.1:1")!, credentials: S3Credentials(accessKeyID: "k", secretAccessKey: "s"),
        region: "us-east-1", bucket: "bucket", prefix: "tree")

    override func setUp() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-replica-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let url = directory.appendingPathComponent("store")
        try LocalStore.create(at: url, layout: nil, folders: false)
        try LocalStore.linkRemote(
            at: url,
            RemoteLink(
                postgres: "postgres://nobody@127.0.0.1:1/none", bucket: "bucket", prefix: "tree",
                endpoint: "http://127.0.0.1:1", region: "us-east-1", credentialsFile: nil))
        store = try LocalStore.open(at: url, logger: logger)
        server = InMemoryServer()
        objects = InMemoryObjects()
    }

    override func tearDown() async throws {
        await engine?.stop()
        engine = nil
        store?.close()
        store = nil
        try? FileManager.default.removeItem(at: directory)
    }

    func startEngine() {
        let engine = SyncEngine(
            store: store.replica!, configuration: Self.configuration, logger: logger,
            server: server, incomingServer: server, objects: objects, timing: Self.fastTiming)
        engine.start()
        self.engine = engine
    }

    /// Waits, with a deadline, until `condition` holds.
    func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            if ContinuousClock.now > deadline { XCTFail("timed out waiting until \(what)"); return }
            try await Task.sleep(for: .milliseconds(10)) // the poll interval, within the deadline
        }
    }

    func waitForOutbox(_ pending: Int = 0) async throws {
        try await waitUntil("the outbox holds \(pending) entries") { store.replica!.outboxCounts.pending == pending }
    }

    /// A file named `name` with `text` in the store's staging folder, as the bridge stages a
    /// copy (an import takes the staged file's name).
    func staged(_ name: String, _ text: String) throws -> URL {
        let folder = store.stagingDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    func importFile(_ name: String, _ text: String, into parent: ItemIdentifier = .rootContainer) async throws -> Item {
        try await store.importDocument(at: try staged(name, text), toParentItemIdentifier: parent)
    }

    func modify(_ item: Item, _ text: String) async throws -> Item {
        try await store.modifyContents(ofItemWithIdentifier: item.identifier, from: try staged(item.filename, text))
    }

    /// The server's object for a live item at `path`, as text.
    func serverText(_ path: String) -> String? { objects.text(of: path, on: server) }

    /// Another replica's "report.txt" ("from elsewhere", one block in a pack of its own), listed
    /// here; then its pack is damaged in the bucket, so that reading it here is EIO. The block's hash.
    func anotherReplicasFileWithADamagedPack() async throws -> String {
        let hash = Array("from elsewhere".utf8).withUnsafeBytes { BlockHash.of($0) }
        objects.put("tree/packs/p1", "xx" + "from elsewhere")
        let missing = try await server.recordBlocks(
            [StoredBlock(hash: hash, pack: "tree/packs/p1", offset: 2, length: 14)],
            manifests: [BlockManifest(key: "tree/manifests/m1", size: 14, hashes: [hash])])
        XCTAssertEqual(missing, [])
        _ = try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "report.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)),
            content: RemoteContent(key: "tree/manifests/m1", size: 14))
        try await waitUntil("the file is listed here") { (try? store.childItem(named: "report.txt", in: .rootContainer)) != nil }
        objects.put("tree/packs/p1", "xxfrom nowhere!!")
        XCTAssertThrowsError(try localText("report.txt"), "a damaged block is EIO for its reader") { error in
            XCTAssertEqual((error as? ProviderError)?.errno, EIO, "\(error)")
        }
        return hash
    }

    /// The local contents of the item at `path` (downloaded first when only the server has them).
    func localText(_ path: String) throws -> String? {
        var parent = ItemIdentifier.rootContainer
        var item: Item?
        for component in path.split(separator: "/") {
            guard let child = try? store.childItem(named: String(component), in: parent) else { return nil }
            item = child
            parent = child.identifier
        }
        guard let item else { return nil }
        let opened = try store.openContentsForReading(of: item.identifier)
        defer { close(opened.fd); store.contentsClosed(of: item.identifier) }
        try opened.arrival?.waitForAll()
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = pread(opened.fd, &buffer, buffer.count, off_t(bytes.count))
            if n <= 0 { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
