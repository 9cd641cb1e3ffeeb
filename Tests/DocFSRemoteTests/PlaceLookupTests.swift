import DocFSRemote
import Foundation
import PostgresNIO
import XCTest

/// Schema 21 on a server that was at 20: recording places and manifests looks at the places of
/// the call's own blocks, and every rule of schema 20 still holds (a place counted on only in a
/// pack the caller may count on and only when sound, a length a place contradicts refused).
/// Against the loopback PostgreSQL, as a non-superuser owner.
final class PlaceLookupTests: XCTestCase {
    func testAnUpgradeTo21KeepsEveryRuleOfPlacesAndManifests() async throws {
        try await RemoteDatabaseTests.withDatabase(migrated: false) { db, url in
            let at20 = try await db.migrate(upTo: 20)
            XCTAssertEqual(at20, 20)
            let before = try await db.recordedContent("before", size: 10)
            let upgraded = try await db.migrate()
            XCTAssertEqual(upgraded, RemoteSchema.latest)
            // Once more, as a server whose docfs_schema_migrations lost the row of 21.
            try await RemoteDatabaseTests.adminQuery(url, "DELETE FROM docfs_schema_migrations WHERE version >= 21")
            let again = try await db.migrate()
            XCTAssertEqual(again, RemoteSchema.latest)

            let block = try await db.manifest(key: before.key)?.blocks.first
            let hash = try XCTUnwrap(block?.hash)
            let firstPack = try XCTUnwrap(block?.pack)
            // Had: its sound place in the owner's pack counts.
            let had = Self.manifestKey()
            let none = try await db.recordManifests([BlockManifest(key: had, size: 10, hashes: [hash], lengths: [10])], donePacks: [])
            XCTAssertEqual(none, [])

            // A block whose only place is in another writer's pack is not had by this caller.
            let elsewhere = String(repeating: "ab", count: 32)
            let foreign = "packs/someone/" + UUID().uuidString.lowercased()
            try await RemoteDatabaseTests.adminQuery(
                url, "INSERT INTO docfs_packs (key, size, role, created_ns) VALUES ('\(foreign)', 100, 'someone', 1)")
            try await RemoteDatabaseTests.adminQuery(
                url,
                """
                INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns, role)
                VALUES ('\(elsewhere)', '\(foreign)', 0, 7, 1, 'someone')
                """)
            let foreignKey = Self.manifestKey()
            let askedForeign = try await db.recordManifests(
                [BlockManifest(key: foreignKey, size: 17, hashes: [hash, elsewhere], lengths: [10, 7])], donePacks: [])
            XCTAssertEqual(askedForeign, [elsewhere], "a place in another writer's pack counts for nothing here")
            let recorded = try await ServerGuardTests.value(url, "SELECT count(*)::text FROM docfs_manifests WHERE key = '\(foreignKey)'")
            XCTAssertEqual(recorded, "0", "nothing of a manifest with a missing block is recorded")
            // Another writer's place decides no length for this caller: its own place of 5 bytes goes in.
            let own = "packs/" + UUID().uuidString.lowercased()
            try await db.recordUploadIntents([own])
            try await db.recordPack(own, size: 100, blocks: [StoredBlock(hash: elsewhere, pack: own, offset: 0, length: 5)])
            let ownKey = Self.manifestKey()
            let noneNow = try await db.recordManifests([BlockManifest(key: ownKey, size: 5, hashes: [elsewhere], lengths: [5])], donePacks: [own])
            XCTAssertEqual(noneNow, [])

            // A length its own sound place contradicts, or one the same call contradicts, is refused.
            let next = "packs/" + UUID().uuidString.lowercased()
            try await db.recordUploadIntents([next])
            for blocks in [
                [StoredBlock(hash: hash, pack: next, offset: 0, length: 4)],
                [
                    StoredBlock(hash: String(repeating: "cd", count: 32), pack: next, offset: 0, length: 4),
                    StoredBlock(hash: String(repeating: "cd", count: 32), pack: next, offset: 4, length: 6),
                ],
            ] {
                do {
                    try await db.recordPack(next, size: 100, blocks: blocks)
                    XCTFail("a place whose length is contradicted was recorded: \(blocks)")
                } catch {
                    XCTAssert("\(error)".contains("length is not the block's"), "\(error)")
                }
            }

            // A place marked damaged is not had: the block is asked for again.
            _ = try await db.markBlockDamaged(hash: hash, pack: firstPack)
            let damagedKey = Self.manifestKey()
            let asked = try await db.recordManifests(
                [BlockManifest(key: damagedKey, size: 10, hashes: [hash], lengths: [10])], donePacks: [])
            XCTAssertEqual(asked, [hash], "a damaged place counts for nothing")
        }
    }

    static func manifestKey() -> String {
        "manifests/" + UUID().uuidString.lowercased() + "-0123456789abcdef"
    }
}
