#if canImport(Glibc)
    import Glibc
#endif
import DocFSProvider
import DocFSWire
import DocFSRemote
import Foundation
import Logging
import PostgresNIO
import XCTest

/// The server's schema and operations against the PostgreSQL cluster `make test` starts. Each
/// test gets a database of its own, dropped at the end.
final class RemoteDatabaseTests: XCTestCase {
    func withDatabase(migrated: Bool = true, _ body: (RemoteDatabase, PostgresURL) async throws -> Void) async throws {
        try await Self.withDatabase(migrated: migrated, body)
    }

    static func withDatabase(migrated: Bool = true, _ body: (RemoteDatabase, PostgresURL) async throws -> Void) async throws {
        let admin = try RemoteTestEnvironment.postgres()
        let name = RemoteTestEnvironment.uniqueName("docfs_test")
        // The tree's owner as docs/REMOTE.md deploys it: CREATEROLE, the database's owner, no superuser.
        let owner = name + "_owner"
        try await Self.adminQuery(admin, "CREATE ROLE \(owner) LOGIN CREATEROLE")
        try await Self.adminQuery(admin, "CREATE DATABASE \(name) OWNER \(owner)")
        var url = admin
        url.database = name
        url.user = owner
        let db = RemoteDatabase(url: url)
        do {
            if migrated { try await db.migrate() }
            try await body(db, url)
        } catch {
            await db.shutdown()
            try? await Self.adminQuery(admin, "DROP DATABASE \(name) WITH (FORCE)")
            try? await Self.adminQuery(admin, "DROP ROLE IF EXISTS \(owner)")
            throw error
        }
        await db.shutdown()
        try await Self.adminQuery(admin, "DROP DATABASE \(name) WITH (FORCE)")
        try? await Self.adminQuery(admin, "DROP ROLE IF EXISTS \(owner)")
    }

    static func adminQuery(_ url: PostgresURL, _ sql: String) async throws {
        let client = PostgresClient(
            configuration: .init(
                host: url.host, port: url.port, username: url.user,
                password: url.password, database: url.database, tls: .disable))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            try await client.query(PostgresQuery(unsafeSQL: sql))
            group.cancelAll()
        }
    }

    func attributes(mode: UInt16 = 0o644) -> ReplicatedAttributes {
        ReplicatedAttributes(
            ownerID: 1000, groupID: 1000, posixPermissions: mode,
            creationTime: FileTime(totalNanoseconds: 1_700_000_000_123_456_789),
            modificationTime: FileTime(totalNanoseconds: 1_700_000_001_987_654_321),
            tagData: Data("red,work".utf8))
    }

    func testMigrationIsVersionedIdempotentAndRefusesANewerSchema() async throws {
        try await withDatabase(migrated: false) { db, url in
            let before = try await db.schemaVersion()
            XCTAssertEqual(before, 0)
            let first = try await db.migrate()
            XCTAssertEqual(first, RemoteSchema.latest)
            let second = try await db.migrate()
            XCTAssertEqual(second, RemoteSchema.latest)
            let root = try await db.rootID()
            let children = try await db.children(of: root)
            XCTAssertEqual(children, [])

            try await Self.adminQuery(url, "INSERT INTO docfs_schema_migrations (version) VALUES (\(RemoteSchema.latest + 1))")
            do {
                try await db.migrate()
                XCTFail("migrated a newer schema")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .schemaTooNew(found: RemoteSchema.latest + 1, supported: RemoteSchema.latest))
                XCTAssertTrue("\(error)".contains("upgrade docfs"))
            }
        }
    }

    func testConcurrentMigrationsWaitForEachOther() async throws {
        try await withDatabase(migrated: false) { db, _ in
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<4 { group.addTask { try await db.migrate() } }
                for try await version in group { XCTAssertEqual(version, RemoteSchema.latest) }
            }
        }
    }

    func testCreateIsIdempotentByOperationIDAndGivesPermanentIDs() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            let op = UUID()
            let content = try await db.recordedContent("report", size: 42)
            let created = try await db.createItem(
                operationID: op, parentID: root, name: "report.pdf", kind: .file,
                attributes: attributes(), content: content)
            XCTAssertFalse(created.replayed)
            XCTAssertGreaterThan(created.itemID, root)
            // The same request again (a lost reply, a restart): the same item, nothing new.
            let retried = try await db.createItem(
                operationID: op, parentID: root, name: "report.pdf", kind: .file,
                attributes: attributes(), content: content)
            XCTAssertTrue(retried.replayed)
            XCTAssertEqual(retried.itemID, created.itemID)
            // Schema 17 gives the position as the call commits: the first answer says 0, a
            // replay the position the log holds.
            XCTAssertEqual(created.position, 0)
            let logged = try await db.changes(since: 0).first { $0.operationID == op }?.position
            XCTAssertEqual(retried.position, logged)
            // Concurrent retries of another operation: still one item.
            let op2 = UUID()
            let folderAttributes = attributes(mode: 0o755)
            let ids = try await withThrowingTaskGroup(of: Int64.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        try await db.createItem(
                            operationID: op2, parentID: root, name: "Folder", kind: .folder,
                            attributes: folderAttributes
                        ).itemID
                    }
                }
                var ids: Set<Int64> = []
                for try await id in group { ids.insert(id) }
                return ids
            }
            XCTAssertEqual(ids.count, 1)
            let children = try await db.children(of: root)
            XCTAssertEqual(children.map(\.name), ["Folder", "report.pdf"])
            let changes = try await db.changes(since: 0)
            XCTAssertEqual(changes.count, 2)

            let item = try await db.item(created.itemID)
            XCTAssertEqual(item?.name, "report.pdf")
            XCTAssertEqual(item?.kind, .file)
            XCTAssertEqual(item?.size, 42)
            XCTAssertEqual(item?.contentKey, content.key)
            XCTAssertEqual(item?.creationTime.totalNanoseconds, 1_700_000_000_123_456_789)
            XCTAssertEqual(item?.modificationTime.totalNanoseconds, 1_700_000_001_987_654_321)
            XCTAssertEqual(item?.ownerID, 1000)
            XCTAssertEqual(item?.posixPermissions, 0o644)
            XCTAssertEqual(ServerTags.array(item?.tagData), ["red", "work"])
            XCTAssertEqual(item?.contentVersion, 1)

            // Another operation with a name already taken, or an operation id reused for another kind.
            // (A name taken by another replica's item first: the later one gets a suffix.)
            let second = try await db.createItem(
                operationID: UUID(), parentID: root, name: "report.pdf", kind: .file,
                attributes: attributes())
            XCTAssertEqual(second.name, "report 2.pdf")
            _ = try await db.deleteItem(operationID: UUID(), itemID: second.itemID)
            do {
                _ = try await db.trashItem(operationID: op, itemID: created.itemID)
                XCTFail("an operation id was applied twice as different operations")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .operationReused(op, previousKind: "create"))
            }
            do {
                _ = try await db.createItem(
                    operationID: UUID(), parentID: created.itemID, name: "x", kind: .file,
                    attributes: attributes())
                XCTFail("a child of a file")
            } catch RemoteError.invalid {}
        }
    }

    /// A taken name's suffix fits 255 bytes whole, a long extension cut too (a longer name is
    /// refused), and each suffixed name is found taken by the next (a cut base is no prefix).
    func testSuffixedNamesOfALongExtensionFitAndDiffer() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            let name = "x." + String(repeating: "l", count: 252)
            var names: [String] = []
            for _ in 0..<4 {
                let made = try await db.createItem(operationID: UUID(), parentID: root, name: name, kind: .file, attributes: attributes())
                names.append(try XCTUnwrap(made.name))
            }
            XCTAssertEqual(names[0], name)
            XCTAssertEqual(Set(names).count, 4, "\(names)")
            for (index, suffixed) in names.enumerated().dropFirst() {
                XCTAssertLessThanOrEqual(suffixed.utf8.count, 255)
                XCTAssertTrue(suffixed.hasPrefix("x \(index + 1).lll"), suffixed)
            }
        }
    }

    func testNewContentVersionIsACompareAndSwap() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            let (a, b, c) = (
                try await db.recordedContent("a", size: 1), try await db.recordedContent("b", size: 2),
                try await db.recordedContent("c", size: 3)
            )
            let file = try await db.createItem(
                operationID: UUID(), parentID: root, name: "notes.txt", kind: .file,
                attributes: attributes(), content: a)
            let op = UUID()
            let v2 = try await db.newContentVersion(
                operationID: op, itemID: file.itemID, expectedVersion: 1,
                content: b, modificationTime: FileTime(totalNanoseconds: 5))
            XCTAssertEqual(v2.contentVersion, 2)
            let replay = try await db.newContentVersion(
                operationID: op, itemID: file.itemID, expectedVersion: 1,
                content: b, modificationTime: FileTime(totalNanoseconds: 5))
            XCTAssertTrue(replay.replayed)
            XCTAssertEqual(replay.contentVersion, 2)
            // Another writer that still thinks version 1 is current loses.
            do {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: file.itemID, expectedVersion: 1,
                    content: c, modificationTime: FileTime(totalNanoseconds: 6))
                XCTFail("the compare-and-swap let a stale writer through")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .versionConflict(itemID: file.itemID, expected: 1, current: 2))
                XCTAssertFalse(error.isRetryable)
            }
            let item = try await db.item(file.itemID)
            XCTAssertEqual(item?.contentKey, b.key)
            XCTAssertEqual(item?.size, 2)
            XCTAssertEqual(item?.modificationTime.totalNanoseconds, 5)
            do {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: 999_999, expectedVersion: 1,
                    content: try await db.recordedContent("empty", size: 0),
                    modificationTime: FileTime(totalNanoseconds: 0))
                XCTFail("a version of no item")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .notFound(itemID: 999_999))
            }
        }
    }

    func testRenameMoveTrashDeleteAndAttributes() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            let a = try await db.createItem(
                operationID: UUID(), parentID: root, name: "A", kind: .folder,
                attributes: attributes(mode: 0o755)
            ).itemID
            let b = try await db.createItem(
                operationID: UUID(), parentID: a, name: "B", kind: .folder,
                attributes: attributes(mode: 0o755)
            ).itemID
            let f = try await db.createItem(
                operationID: UUID(), parentID: b, name: "f", kind: .file,
                attributes: attributes()
            ).itemID
            _ = try await db.moveItem(operationID: UUID(), itemID: f, toParentID: b, name: "g") // rename
            _ = try await db.moveItem(operationID: UUID(), itemID: f, toParentID: root, name: "g") // reparent
            let rootNames = try await db.children(of: root).map(\.name)
            XCTAssertEqual(rootNames, ["A", "g"])
            do {
                _ = try await db.moveItem(operationID: UUID(), itemID: a, toParentID: b, name: "A")
                XCTFail("moved a folder into its own subfolder")
            } catch RemoteError.invalid {}
            let suffixed = try await db.moveItem(operationID: UUID(), itemID: b, toParentID: root, name: "g")
            XCTAssertEqual(suffixed.name, "g 2", "a taken name gets a suffix")
            _ = try await db.moveItem(operationID: UUID(), itemID: b, toParentID: a, name: "B")
            do {
                _ = try await db.deleteItem(operationID: UUID(), itemID: a)
                XCTFail("deleted a folder that is not empty")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .notEmpty(itemID: a))
            }

            // Trash frees the name; untrash restores under a new name.
            let trashed = try await db.trashItem(operationID: UUID(), itemID: f)
            let inTrash = try await db.item(f)
            XCTAssertNotNil(inTrash?.trashTime)
            _ = try await db.createItem(operationID: UUID(), parentID: root, name: "g", kind: .file, attributes: attributes())
            _ = try await db.untrashItem(operationID: UUID(), itemID: f, toParentID: root, name: "g restored")
            let restored = try await db.item(f)
            XCTAssertNil(restored?.trashTime)
            XCTAssertEqual(restored?.name, "g restored")
            XCTAssertGreaterThan(restored?.metadataVersion ?? 0, trashed.metadataVersion)

            let attrs = try await db.setAttributes(
                operationID: UUID(), itemID: f,
                changes: AttributeChanges(
                    posixPermissions: 0o4750, ownerID: 0, modificationTime: FileTime(totalNanoseconds: 77),
                    tagData: .some(Data("blue".utf8)), favoriteRank: .some(3)))
            let after = try await db.item(f)
            XCTAssertEqual(after?.ownerID, 0)
            XCTAssertEqual(after?.groupID, 1000)
            XCTAssertEqual(after?.posixPermissions, 0o4750)
            XCTAssertEqual(after?.modificationTime.totalNanoseconds, 77)
            XCTAssertEqual(ServerTags.array(after?.tagData), ["blue"])
            XCTAssertEqual(after?.favoriteRank, 3)
            XCTAssertEqual(after?.metadataVersion, attrs.metadataVersion)
            _ = try await db.setAttributes(operationID: UUID(), itemID: f, changes: AttributeChanges(favoriteRank: .some(nil)))
            let unranked = try await db.item(f)
            XCTAssertNil(unranked?.favoriteRank)

            // Delete leaves a tombstone; a second delete (another operation) finds nothing.
            _ = try await db.deleteItem(operationID: UUID(), itemID: f)
            let tombstone = try await db.item(f)
            XCTAssertEqual(tombstone?.deleted, true)
            do {
                _ = try await db.deleteItem(operationID: UUID(), itemID: f)
                XCTFail("deleted twice")
            } catch let error as RemoteError {
                XCTAssertEqual(error, .notFound(itemID: f))
            }

            let layout = #"{"trash": true, "folders": [{"path": "Inbox", "capabilities": ["read", "add"]}]}"#
            _ = try await db.setLayout(operationID: UUID(), json: layout)
            let stored = try await db.layout()
            XCTAssertTrue(stored?.contains("\"Inbox\"") ?? false, stored ?? "no layout")
        }
    }

    func testChangeLogIsInOrderAndAnAnchorGivesTheRest() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            var expected: [(RemoteChange.Kind, Int64)] = []
            let d = try await db.createItem(operationID: UUID(), parentID: root, name: "d", kind: .folder, attributes: attributes())
            expected.append((.create, d.itemID))
            let f = try await db.createItem(operationID: UUID(), parentID: d.itemID, name: "f", kind: .file, attributes: attributes())
            expected.append((.create, f.itemID))
            _ = try await db.newContentVersion(
                operationID: UUID(), itemID: f.itemID, expectedVersion: 1,
                content: try await db.recordedContent("k2", size: 9), modificationTime: FileTime(totalNanoseconds: 1))
            expected.append((.content, f.itemID))
            _ = try await db.moveItem(operationID: UUID(), itemID: f.itemID, toParentID: root, name: "f2")
            expected.append((.move, f.itemID))
            _ = try await db.setAttributes(operationID: UUID(), itemID: f.itemID, changes: AttributeChanges(posixPermissions: 0o600))
            expected.append((.attributes, f.itemID))
            _ = try await db.trashItem(operationID: UUID(), itemID: f.itemID)
            expected.append((.trash, f.itemID))
            _ = try await db.deleteItem(operationID: UUID(), itemID: f.itemID)
            expected.append((.delete, f.itemID))

            let all = try await db.changes(since: 0)
            XCTAssertEqual(all.map(\.kind), expected.map(\.0))
            XCTAssertEqual(all.map(\.itemID), expected.map(\.1))
            XCTAssertEqual(all.map(\.position), all.map(\.position).sorted())
            XCTAssertEqual(Set(all.map(\.position)).count, all.count)
            let latest = try await db.latestPosition()
            XCTAssertEqual(latest, all.last?.position)
            let rest = try await db.changes(since: all[3].position)
            XCTAssertEqual(rest.map(\.kind), [.attributes, .trash, .delete])
            let page = try await db.changes(since: 0, limit: 2)
            XCTAssertEqual(page.map(\.position), Array(all.prefix(2)).map(\.position))
            // The content change carries the new versions.
            XCTAssertEqual(all[2].contentVersion, 2)
        }
    }

    func testCommittedChangesAreNotifiedWithTheirPosition() async throws {
        try await withDatabase { db, _ in
            let root = try await db.rootID()
            let fileAttributes = attributes()
            let received = try await withThrowingTaskGroup(of: [Int64]?.self) { group in
                group.addTask {
                    try await db.withChangeNotifications { notifications in
                        var got: [Int64] = []
                        for try await position in notifications {
                            got.append(position)
                            if got.count == 2 { break }
                        }
                        return got
                    }
                }
                group.addTask {
                    // LISTEN is issued as the listening task starts: give it a moment, then change things.
                    try await Task.sleep(for: .milliseconds(500))
                    _ = try await db.createItem(
                        operationID: UUID(), parentID: root, name: "n1", kind: .file,
                        attributes: fileAttributes)
                    _ = try await db.createItem(
                        operationID: UUID(), parentID: root, name: "n2", kind: .file,
                        attributes: fileAttributes)
                    return nil
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(20))
                    throw RemoteError.unreachable("no notification within 20 s")
                }
                var result: [Int64] = []
                for try await value in group {
                    if let value { result = value; group.cancelAll(); break }
                }
                return result
            }
            let positions = try await db.changes(since: 0).map(\.position)
            XCTAssertEqual(received, positions)
        }
    }

    func testUnreachableServerIsRetryable() async throws {
        let admin = try RemoteTestEnvironment.postgres()
        var url = admin
        url.port = try S3ClientTests.freeLoopbackPort()
        let db = RemoteDatabase(url: url, operationTimeout: .seconds(3))
        do {
            _ = try await db.schemaVersion()
            XCTFail("a query to a closed port succeeded")
        } catch let error as RemoteError {
            XCTAssertTrue(error.isRetryable, "\(error)")
        }
        await db.shutdown()
    }
}

/// TLS to PostgreSQL with libpq's words, against the test cluster (ssl=on, a certificate for
/// 127.0.0.1 signed by a CA Tests/remote/servers.sh makes).
final class PostgresTLSTests: XCTestCase {
    func url(_ query: String) throws -> PostgresURL {
        let base = try RemoteTestEnvironment.postgres()
        return try XCTUnwrap(PostgresURL("postgres://\(base.user)@\(base.host):\(base.port)/\(base.database)\(query)"))
    }

    func ca(_ name: String) throws -> String {
        guard let path = ProcessInfo.processInfo.environment[name] else { throw XCTSkip("\(name) is not set: \(RemoteTestEnvironment.skipMessage)") }
        return path
    }

    /// Whether the pool's connection is encrypted, as the server sees it.
    func encrypted(_ url: PostgresURL) async throws -> Bool {
        let database = RemoteDatabase(url: url, maximumConnections: 1, operationTimeout: .seconds(10))
        defer { Task { await database.shutdown() } }
        return try await database.connectionIsEncrypted()
    }

    func testVerifyFullWithTheServersCAConnectsEncrypted() async throws {
        let url = try url("?sslmode=verify-full&sslrootcert=\(try ca("DOCFS_TEST_PG_CA"))")
        try await RemoteDatabase.probe(url)
        let secure = try await encrypted(url)
        XCTAssertTrue(secure)
    }

    /// `probe` of `url` fails, and its one line says `saying`.
    func assertRefused(_ url: PostgresURL, saying: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) async {
        do {
            try await RemoteDatabase.probe(url, timeout: .seconds(10))
            XCTFail("\(what): the connection went through", file: file, line: line)
        } catch {
            XCTAssert("\(error)".contains(saying), "\(what): \(error)", file: file, line: line)
        }
    }

    func testAServerSignedByAnotherCAIsRefused() async throws {
        for mode in ["verify-full", "verify-ca", "require"] {
            let url = try url("?sslmode=\(mode)&sslrootcert=\(try ca("DOCFS_TEST_PG_OTHER_CA"))")
            await assertRefused(
                url, saying: "TLS certificate was not accepted", "sslmode=\(mode) with a root certificate that did not sign the server's")
        }
    }

    func testRequireRefusesAServerWithoutTLS() async throws {
        // A server that answers PostgreSQL's SSLRequest with "N" (no TLS), as one without ssl does.
        let server = try NoTLSServer()
        defer { server.stop() }
        let url = try XCTUnwrap(PostgresURL("postgres://docfs@127.0.0.1:\(server.port)/postgres?sslmode=require"))
        await assertRefused(url, saying: "does not offer TLS", "sslmode=require against a server without TLS")
    }

    func testLoopbackDefaultsToTLSWhenOfferedAndDisableStaysPlain() async throws {
        let plain = try url("?sslmode=disable")
        XCTAssertEqual(plain.effectiveSSLMode, .disable)
        let plainEncrypted = try await encrypted(plain)
        XCTAssertFalse(plainEncrypted)
        let defaulted = try url("")
        XCTAssertEqual(defaulted.effectiveSSLMode, .prefer, "a loopback host without sslmode")
        let defaultedEncrypted = try await encrypted(defaulted)
        XCTAssertTrue(defaultedEncrypted, "the server offers TLS: prefer takes it")
    }

    func testURLsKeepTheirTLSWordsAndRefuseUnknownOnes() throws {
        let url = try XCTUnwrap(PostgresURL("postgres://u:secret@db.example:5433/tree?sslmode=verify-ca&sslrootcert=/etc/ca.pem", environment: [:]))
        XCTAssertEqual(url.sslMode, .verifyCA)
        XCTAssertEqual(url.withoutPassword, "postgres://u@db.example:5433/tree?sslmode=verify-ca&sslrootcert=/etc/ca.pem")
        XCTAssertFalse(url.description.contains("secret"))
        XCTAssertEqual(PostgresURL("postgres://u@db.example/tree", environment: [:])?.effectiveSSLMode, .verifyFull, "off this machine: verify-full")
        XCTAssertNil(PostgresURL("postgres://u@h/db?sslmode=sometimes", environment: [:]))
        XCTAssertNil(PostgresURL("postgres://u@h/db?sslcert=/c.pem", environment: [:]), "a client certificate needs its key")
        XCTAssertNil(PostgresURL("postgres://u@h/db?connect_timeout=3", environment: [:]), "an unknown parameter is refused, not dropped")
    }
}

/// Listens on 127.0.0.1 and answers every connection's first 8 bytes (an SSLRequest) with "N".
final class NoTLSServer: @unchecked Sendable {
    let fd: Int32
    let port: Int
    private let thread: Thread

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else { throw XCTSkip("cannot listen on 127.0.0.1: errno \(errno)") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = fd
        thread = Thread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                var request = [UInt8](repeating: 0, count: 8)
                _ = read(client, &request, 8)
                _ = write(client, "N", 1)
                close(client)
            }
        }
        thread.start()
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

extension RemoteDatabaseTests {
    /// A chunk of operations is one call: applied in order, a later one naming an earlier create
    /// by its operation id; the first refused ends it (its error the last answer), what came
    /// before stays.
    func testAChunkIsOneCallThatStopsAtTheFirstRefusal() async throws {
        try await withDatabase { db, url in
            let root = try await db.rootID()
            let other = RemoteDatabase(url: url)
            defer { Task { await other.shutdown() } }
            let taken = try await db.createItem(
                operationID: UUID(), parentID: root, name: "taken", kind: .folder,
                attributes: attributes(mode: 0o755))
            let folder = UUID()
            let answers = try await db.apply([
                RemoteOperation(
                    id: folder,
                    .create(
                        parent: .item(root), name: "new", kind: .folder,
                        attributes: attributes(mode: 0o755), content: nil)),
                RemoteOperation(
                    id: UUID(),
                    .create(
                        parent: .createdBy(folder), name: "a.txt", kind: .file,
                        attributes: attributes(), content: nil)),
                RemoteOperation(
                    id: UUID(),
                    .move(
                        item: .item(taken.itemID), toParent: .item(taken.itemID), name: "taken",
                        expectedParentID: nil, expectedName: nil, types: nil)),
                RemoteOperation(
                    id: UUID(),
                    .create(
                        parent: .item(root), name: "b.txt", kind: .file, attributes: attributes(),
                        content: nil)),
            ])
            XCTAssertEqual(answers.count, 3, "stopped at the refused move: \(answers)")
            guard answers.count == 3, case .success(let made) = answers[0], case .success(let inside) = answers[1],
                case .failure(.invalid) = answers[2]
            else { return XCTFail("\(answers)") }
            let names = Set(try await other.children(of: root).map(\.name))
            XCTAssertEqual(names, ["taken", "new"], "what came before the refusal stays, nothing after it")
            let child = try await other.item(inside.itemID)
            XCTAssertEqual(child?.parentID, made.itemID, "named by its create's operation id")
        }
    }
}
