import Foundation
import XCTest
import DocFSProvider
import DocFSRemote
@testable import DocFSReplica
import DocFSStore

/// Damaged blocks heal (schema 9): a reader marks what it found damaged, a marked block is not
/// "had" for dedup, recording it again gives it a sound place, and a replica that holds the
/// bytes sends them again by itself.
extension SyncEngineTests {
    func testAMarkedBlockIsNotHadAndRecordingItAgainClearsTheMark() async throws {
        let bytes = Array("the block's bytes".utf8)
        let hash = bytes.withUnsafeBytes { BlockHash.of($0) }
        _ = try await server.recordBlocks([StoredBlock(hash: hash, pack: "tree/packs/p1", offset: 0, length: 17)], manifests: [])
        let marked = try await server.markBlockDamaged(hash: hash, pack: "tree/packs/p2")
        XCTAssertFalse(marked, "a block is marked only where it is")
        let knownWhole = try await server.knownBlocks([hash])
        XCTAssertEqual(knownWhole, [hash])
        let markedThere = try await server.markBlockDamaged(hash: hash, pack: "tree/packs/p1")
        XCTAssertTrue(markedThere)
        let knownDamaged = try await server.knownBlocks([hash])
        XCTAssertEqual(knownDamaged, [], "a damaged block is not had: the next upload sends it")
        _ = try await server.recordBlocks([StoredBlock(hash: hash, pack: "tree/packs/p3", offset: 4, length: 17)], manifests: [])
        let knownHealed = try await server.knownBlocks([hash])
        XCTAssertEqual(knownHealed, [hash])
        XCTAssertFalse(server.isDamaged(hash))
        XCTAssertEqual(server.state.withLock { $0.blocks[hash]?.pack }, "tree/packs/p3", "the new place replaces the damaged one")
        // A sound block keeps its place whoever records it again.
        _ = try await server.recordBlocks([StoredBlock(hash: hash, pack: "tree/packs/p4", offset: 0, length: 17)], manifests: [])
        XCTAssertEqual(server.state.withLock { $0.blocks[hash]?.pack }, "tree/packs/p3")
    }

    func testAReaderMarksADamagedBlockAndTheNextUploadOfItsBytesSendsThem() async throws {
        startEngine()
        // Another replica's file in a pack of its own, damaged in the bucket.
        let text = "from elsewhere"
        let hash = try await anotherReplicasFileWithADamagedPack()
        XCTAssertTrue(server.isDamaged(hash), "the reader told the server")

        // The same bytes written here: sent, not counted on (the server had them only damaged).
        let before = objects.uploads
        _ = try await importFile("copy.txt", text)
        try await waitForOutbox()
        XCTAssertEqual(objects.uploads, before + 1, "the bytes went up again")
        XCTAssertFalse(server.isDamaged(hash), "recording them cleared the mark")
        XCTAssertNotEqual(server.state.withLock { $0.blocks[hash]?.pack }, "tree/packs/p1")
        XCTAssertEqual(try localText("report.txt"), text, "the damaged file reads again, from the new place")
    }

    func testAReplicaHoldingTheBytesSendsADamagedBlockAgain() async throws {
        startEngine()
        let text = String(repeating: "written here, held here. ", count: 40)
        _ = try await importFile("held.txt", text)
        try await waitForOutbox()
        let key = try XCTUnwrap(server.tree()["held.txt"]?.contentKey)
        let manifest = try await server.manifest(key: key)
        let block = try XCTUnwrap(manifest?.blocks.first)
        // Damaged in the bucket and marked (as `docfs remote check` or another replica's reader would).
        objects.put(block.pack, String(repeating: "\0", count: Int(block.offset + block.length)))
        let marked = try await server.markBlockDamaged(hash: block.hash, pack: block.pack)
        XCTAssertTrue(marked)
        engine?.requestHeal()
        try await waitUntil("this replica sent the block again") { !server.isDamaged(block.hash) }
        let healed = try XCTUnwrap(server.state.withLock { $0.blocks[block.hash] })
        XCTAssertNotEqual(healed.pack, block.pack, "a new pack")
        XCTAssertNil(server.state.withLock { $0.manifests.keys.first { $0 != key } }, "only the block went; no manifest")
        XCTAssertEqual(serverText("held.txt"), text, "the server's version reads whole again")
    }

    /// The replica that made a conflicted copy holds its bytes, and sends a damaged block of it
    /// again as for any file it holds (the copy kept no server key here: it was never found).
    func testTheReplicaThatMadeAConflictedCopySendsItsDamagedBlockAgain() async throws {
        _ = try await editedHereAndOnTheServer()
        startEngine()
        try await waitForOutbox()
        let copy = try XCTUnwrap(server.tree().keys.first { $0.hasPrefix("notes (conflicted copy from ") })
        let key = try XCTUnwrap(server.tree()[copy]?.contentKey)
        let manifest = try await server.manifest(key: key)
        let block = try XCTUnwrap(manifest?.blocks.first)
        objects.put(block.pack, String(repeating: "\0", count: Int(block.offset + block.length)))
        let marked = try await server.markBlockDamaged(hash: block.hash, pack: block.pack)
        XCTAssertTrue(marked)
        engine?.requestHeal()
        try await waitUntil("this replica sent the copy's block again") { !server.isDamaged(block.hash) }
        XCTAssertEqual(serverText(copy), "mine", "the copy reads whole again on the server")
    }
}
