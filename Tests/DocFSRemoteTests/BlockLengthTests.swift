import DocFSRemote
import Foundation
import PostgresNIO
import XCTest

/// Schema 20 on a server that was at 19, with contents recorded before: a block is its hash and
/// its length, manifests name both, and a manifest sent without lengths (a replica before 20)
/// still lands. Against the loopback PostgreSQL, as a non-superuser owner.
final class BlockLengthTests: XCTestCase {
    func testAnUpgradeTo20NamesEachBlockByHashAndLength() async throws {
        try await RemoteDatabaseTests.withDatabase(migrated: false) { db, url in
            let at19 = try await db.migrate(upTo: 19)
            XCTAssertEqual(at19, 19)
            let before = try await db.recordedContent("before", size: 10)
            let upgraded = try await db.migrate()
            XCTAssertEqual(upgraded, RemoteSchema.latest)
            // Once more, as a server whose docfs_schema_migrations lost its rows: 20 alone, then
            // 16 and after (schema 16's steps meet blocks already keyed by hash and length).
            for lost in [20, 16] {
                try await RemoteDatabaseTests.adminQuery(url, "DELETE FROM docfs_schema_migrations WHERE version >= \(lost)")
                let again = try await db.migrate()
                XCTAssertEqual(again, RemoteSchema.latest, "migrated again from \(lost)")
            }

            let length = try await ServerGuardTests.value(url, "SELECT length::text FROM docfs_manifest_blocks WHERE key = '\(before.key)'")
            XCTAssertEqual(length, "10", "the manifest recorded before names its block's length")
            let read = try await db.manifest(key: before.key)
            XCTAssertEqual(read?.size, 10)
            XCTAssertEqual(read?.blocks.map(\.length), [10])
            let hash = try XCTUnwrap(read?.blocks.first?.hash)

            // The same caller may not give the hash another length (its own place says 10).
            let pack = "packs/" + UUID().uuidString.lowercased()
            try await db.recordUploadIntents([pack])
            do {
                try await db.recordPack(pack, size: 100, blocks: [StoredBlock(hash: hash, pack: pack, offset: 0, length: 5)])
                XCTFail("a length its own place contradicts was recorded")
            } catch {
                XCTAssert("\(error)".contains("length is not the block's"), "\(error)")
            }

            // Without lengths (a replica before 20): each hash takes the length of its sound place.
            let legacy = "manifests/" + UUID().uuidString.lowercased() + "-0123456789abcdef"
            let missingLegacy = try await db.recordManifests([BlockManifest(key: legacy, size: 10, hashes: [hash])], donePacks: [])
            XCTAssertEqual(missingLegacy, [])
            let legacyRead = try await db.manifest(key: legacy)
            XCTAssertEqual(legacyRead?.blocks.map(\.length), [10])

            // With lengths: a block of another length has no place, and is asked for.
            let other = "manifests/" + UUID().uuidString.lowercased() + "-0123456789abcdef"
            let missing = try await db.recordManifests(
                [BlockManifest(key: other, size: 5, hashes: [hash], lengths: [5])], donePacks: [])
            XCTAssertEqual(missing, [hash])
            let named = try await ServerGuardTests.value(url, "SELECT count(*)::text FROM docfs_manifests WHERE key = '\(other)'")
            XCTAssertEqual(named, "0", "nothing of a manifest with a missing block is recorded")
            let right = "manifests/" + UUID().uuidString.lowercased() + "-0123456789abcdef"
            let none = try await db.recordManifests(
                [BlockManifest(key: right, size: 10, hashes: [hash], lengths: [10])], donePacks: [])
            XCTAssertEqual(none, [])

            // gc keeps a block a manifest names, by hash and length.
            let gone = try await db.dropUnnamedBlocks(before: Int64.max)
            XCTAssertEqual(gone.count, 0)
            let ids = try await ServerGuardTests.value(url, "SELECT count(*)::text FROM docfs_block_ids WHERE hash = '\(hash)'")
            XCTAssertEqual(ids, "1")
        }
    }
}
