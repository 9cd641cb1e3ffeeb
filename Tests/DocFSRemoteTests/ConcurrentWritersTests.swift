import DocFSProvider
import DocFSWire
import DocFSRemote
import Foundation
import Logging
import PostgresNIO
import XCTest

/// Schema 17 (`RemoteSchema+Positions`): no global writers' lock. A writer is held open in a
/// transaction of its own (BEGIN, `docfs_apply`, no COMMIT yet) while another writes and a
/// follower reads the change log as a replica does (`changes(since:)` from its anchor).
final class ConcurrentWritersTests: XCTestCase {
    /// A writer's transaction left open on a connection of its own, as a replica's slow commit.
    final class HeldWriter: @unchecked Sendable {
        let connection: PostgresConnection
        let logger = Logger(label: "docfs.test.held")

        init(_ url: PostgresURL) async throws {
            connection = try await PostgresConnection.connect(
                configuration: .init(
                    host: url.host, port: url.port, username: url.user, password: url.password,
                    database: url.database, tls: .disable),
                id: Int.random(in: 1 ... .max), logger: logger)
            try await connection.query("BEGIN", logger: logger)
        }

        /// `docfs_apply` of these operations (JSON objects) inside the open transaction.
        func apply(_ operations: [String]) async throws -> String {
            let json = "[" + operations.joined(separator: ",") + "]"
            for try await (text) in try await connection.query("SELECT docfs_apply(\(json)::jsonb)::text", logger: logger)
                .decode(String.self)
            { return text }
            return ""
        }

        func end(_ statement: String) async throws {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
        }
    }

    /// A held writer, closed at the end of the test however it ends.
    func hold(_ url: PostgresURL) async throws -> HeldWriter {
        let held = try await HeldWriter(url)
        addTeardownBlock { try? await held.connection.close() }
        return held
    }

    /// A replica role of the tree (a role's own calls run one at a time: the held writer is
    /// another replica than the test's owner), dropped after the test.
    func replicaURL(_ db: RemoteDatabase, _ url: PostgresURL) async throws -> PostgresURL {
        let role = url.database + "_held"
        _ = try await db.addReplica(role, password: nil)
        addTeardownBlock { try? await RemoteDatabaseTests.adminQuery(RemoteTestEnvironment.postgres(), "DROP ROLE IF EXISTS \(role)") }
        var replica = url
        replica.user = role
        return replica
    }

    static func createFolder(_ op: UUID, parent: Int64, name: String) -> String {
        #"{"op":"\#(op.uuidString)","kind":"create","parent":\#(parent),"name":"\#(name)","item_kind":"directory","mode":493}"#
    }

    static func move(_ op: UUID, item: Int64, to parent: Int64, name: String, from: Int64, was: String) -> String {
        #"{"op":"\#(op.uuidString)","kind":"move","item":\#(item),"parent":\#(parent),"name":"\#(name)","expected_parent":\#(from),"expected_name":"\#(was)"}"#
    }

    func folder(_ db: RemoteDatabase, _ parent: Int64, _ name: String) async throws -> Int64 {
        try await db.createItem(
            operationID: UUID(), parentID: parent, name: name, kind: .folder,
            attributes: ReplicatedAttributes(
                ownerID: 0, groupID: 0, posixPermissions: 0o755,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1))
        ).itemID
    }

    /// Waits, with a deadline, until `condition` holds.
    func eventually(_ what: String, timeout: Duration = .seconds(30), _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        XCTFail("not within \(timeout): \(what)")
    }

    /// Sessions of this database waiting for a lock (read on a connection of its own).
    func waitingForLocks(_ url: PostgresURL) async throws -> Int {
        let reader = try await hold(url)
        var n = 0
        for try await (count) in try await reader.connection.query(
            "SELECT count(*)::bigint FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            logger: reader.logger
        ).decode(Int64.self) { n = Int(count) }
        try await reader.end("ROLLBACK")
        try await reader.connection.close()
        return n
    }

    func testAnUnrelatedWriterCommitsWhileAnotherIsHeldOpenAndTheFollowerSkipsNeither() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            let a = try await folder(db, root, "a"), b = try await folder(db, root, "b")
            // The follower is up to date.
            var anchor = try await db.latestPosition()

            // The older writer: its change is made first and stays uncommitted.
            let held = try await hold(try await replicaURL(db, url))
            let older = UUID()
            let answer = try await held.apply([Self.createFolder(older, parent: a, name: "older")])
            XCTAssertTrue(answer.contains("\"ok\": true"), answer)

            // A newer writer of another folder commits meanwhile (before, it waited for the held one).
            let newer = UUID()
            // (Waiting for the held writer, it would fail after the call's 30 s.)
            let committed = try await db.createItem(
                operationID: newer, parentID: b, name: "newer", kind: .folder,
                attributes: ReplicatedAttributes(
                    ownerID: 0, groupID: 0,
                    posixPermissions: 0o755,
                    creationTime: FileTime(totalNanoseconds: 1),
                    modificationTime: FileTime(totalNanoseconds: 1)))
            XCTAssertFalse(committed.replayed)

            // The follower sees the newer change, not the held one, and moves its anchor past it.
            let first = try await db.changes(since: anchor)
            XCTAssertEqual(first.map(\.operationID), [newer])
            anchor = try XCTUnwrap(first.last).position

            // The older transaction commits after the newer one: its change comes after the
            // anchor, so the follower reads it next (with a smaller position it would be skipped).
            try await held.end("COMMIT")
            let second = try await db.changes(since: anchor)
            XCTAssertEqual(second.map(\.operationID), [older], "the change committed last is after the follower's anchor")
            XCTAssertGreaterThan(try XCTUnwrap(second.first).position, anchor)

            // The whole log: positions in commit order, each once, no draft left.
            let all = try await db.changes(since: 0)
            XCTAssertEqual(all.map(\.position), all.map(\.position).sorted())
            XCTAssertEqual(Set(all.map(\.position)).count, all.count)
            XCTAssertTrue(all.allSatisfy { $0.position > 0 })
            XCTAssertEqual(Array(all.suffix(2).map(\.operationID)), [newer, older])
            // A replay answers the position the commit gave.
            let replay = try await db.createItem(
                operationID: newer, parentID: b, name: "newer", kind: .folder,
                attributes: ReplicatedAttributes(
                    ownerID: 0, groupID: 0, posixPermissions: 0o755,
                    creationTime: FileTime(totalNanoseconds: 1),
                    modificationTime: FileTime(totalNanoseconds: 1)))
            XCTAssertTrue(replay.replayed)
            XCTAssertEqual(replay.position, all.first { $0.operationID == newer }?.position)
        }
    }

    func testAWriterAskingForItsConstraintsAtOnceStillHoldsNoOtherCommitUp() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            let a = try await folder(db, root, "a"), b = try await folder(db, root, "b")
            let held = try await hold(try await replicaURL(db, url))
            // Immediate constraints would place the held call's change (and hold the placing
            // step) at its statement's end; the call defers it again.
            try await held.end("SET CONSTRAINTS ALL IMMEDIATE")
            let older = UUID()
            _ = try await held.apply([Self.createFolder(older, parent: a, name: "held")])
            let newer = UUID()
            _ = try await db.createItem(
                operationID: newer, parentID: b, name: "free", kind: .folder,
                attributes: ReplicatedAttributes(
                    ownerID: 0, groupID: 0, posixPermissions: 0o755,
                    creationTime: FileTime(totalNanoseconds: 1),
                    modificationTime: FileTime(totalNanoseconds: 1)))
            let anchor = try await db.latestPosition()
            try await held.end("COMMIT")
            let later = try await db.changes(since: anchor)
            XCTAssertEqual(later.map(\.operationID), [older])
        }
    }

    func testAWriterRolledBackLeavesNoPositionAndTheNextCommitsFollowOn() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            let before = try await db.latestPosition()
            let held = try await hold(try await replicaURL(db, url))
            _ = try await held.apply([Self.createFolder(UUID(), parent: root, name: "gone")])
            try await held.end("ROLLBACK")
            _ = try await folder(db, root, "kept")
            let after = try await db.changes(since: before)
            XCTAssertEqual(after.count, 1)
            XCTAssertEqual(after.first?.position, before + 1, "a rolled-back writer takes no position")
        }
    }

    func testTwoWritersOfOneItemStillConflict() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            let item = try await folder(db, root, "x")
            let held = try await hold(try await replicaURL(db, url))
            _ = try await held.apply([Self.move(UUID(), item: item, to: root, name: "y", from: root, was: "x")])
            // The second rename of the same item, seen where it was: waits for the first…
            let second = Task {
                try await db.moveItem(
                    operationID: UUID(), itemID: item, toParentID: root, name: "z",
                    expectedParentID: root, expectedName: "x")
            }
            try await eventually("the second writer waits for the item's row") { try await self.waitingForLocks(url) >= 1 }
            try await held.end("COMMIT")
            // …and then finds it moved (as with the global lock).
            do {
                _ = try await second.value
                XCTFail("the second rename of one item went through")
            } catch RemoteError.movedElsewhere(let id) {
                XCTAssertEqual(id, item)
            }
            let now = try await db.item(item)
            XCTAssertEqual(now?.name, "y")
        }
    }

    func testTwoFolderMovesThatWouldMakeACycleDoNotBothGoThrough() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            let root = try await db.rootID()
            // root/x/w and root/y/z: x into z and y into w would make x → z → y → w → x.
            let x = try await folder(db, root, "x"), y = try await folder(db, root, "y")
            let w = try await folder(db, x, "w"), z = try await folder(db, y, "z")
            let held = try await hold(try await replicaURL(db, url))
            let answer = try await held.apply([Self.move(UUID(), item: x, to: z, name: "x", from: root, was: "x")])
            XCTAssertTrue(answer.contains("\"ok\": true"), answer)
            let second = Task {
                try await db.moveItem(operationID: UUID(), itemID: y, toParentID: w, name: "y", expectedParentID: root, expectedName: "y")
            }
            try await eventually("the second folder move waits for the first") { try await self.waitingForLocks(url) >= 1 }
            try await held.end("COMMIT")
            do {
                _ = try await second.value
                XCTFail("two folder moves made a cycle")
            } catch RemoteError.invalid(let why) {
                XCTAssertTrue(why.contains("into itself"), why)
            }
            // Every folder still reaches the root.
            for id in [x, y, w, z] {
                var cursor: Int64? = id
                var steps = 0
                while let c = cursor, c != root, steps < 10 {
                    cursor = try await db.item(c)?.parentID
                    steps += 1
                }
                XCTAssertEqual(cursor, root, "item \(id) reaches the root")
            }
        }
    }

    func testSchema17UpgradesALogAndRunsAgain() async throws {
        try await RemoteDatabaseTests.withDatabase(migrated: false) { db, url in
            let at16 = try await db.migrate(upTo: 16)
            XCTAssertEqual(at16, 16)
            let root = try await db.rootID()
            _ = try await folder(db, root, "before")
            let before = try await db.changes(since: 0)
            XCTAssertEqual(before.count, 1)
            let upgraded = try await db.migrate()
            XCTAssertEqual(upgraded, RemoteSchema.latest)
            // Once more, as a server whose docfs_schema_migrations lost its row.
            try await RemoteDatabaseTests.adminQuery(url, "DELETE FROM docfs_schema_migrations WHERE version = 17")
            let again = try await db.migrate()
            XCTAssertEqual(again, RemoteSchema.latest)
            _ = try await folder(db, root, "after")
            let all = try await db.changes(since: 0)
            XCTAssertEqual(all.count, 2)
            XCTAssertEqual(all.first?.position, before.first?.position, "the log kept its positions")
            XCTAssertGreaterThan(all[1].position, all[0].position)
            // Every function still finds pg_temp last (CREATE OR REPLACE drops a function's settings).
            let left = try await ServerGuardTests.value(
                url,
                """
                SELECT string_agg(p.proname, ', ') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND p.proname LIKE 'docfs\\_%'
                  AND NOT coalesce(p.proconfig, '{}') @> ARRAY['search_path=pg_catalog, public, pg_temp']
                """)
            XCTAssertNil(left)
        }
    }
}
