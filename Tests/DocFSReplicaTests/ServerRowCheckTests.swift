import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// Rows the server sends that no replica could have written (an older server, a database edited
/// by hand): each is set aside with one log line, never applied, never a trap, and the rest of
/// the tree goes on arriving.
final class ServerRowCheckTests: ReplicaTestCase {
    /// Another replica's file as the server's rules make it (a whole object under the prefix).
    func othersFile(_ name: String, _ text: String) async throws -> Int64 {
        let key = "tree/objects/\(UUID().uuidString.lowercased())"
        objects.put(key, text)
        return try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: name, kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 42),
                modificationTime: FileTime(totalNanoseconds: 42)),
            content: RemoteContent(key: key, size: Int64(text.utf8.count))
        ).itemID
    }

    func rootNames() throws -> Set<String> { Set(try store.enumerateItems(in: .rootContainer).map(\.filename)) }

    /// A good file planted after `rows`, then waited for: the rows before it were read.
    func plantAndWaitPast(_ rows: [ServerItem], marker: String) async throws {
        for row in rows { server.plant(row) }
        _ = try await othersFile(marker, "after the bad rows")
        try await waitUntil("\(marker) arrived") { try rootNames().contains(marker) }
    }

    func setAside() async -> [Int64: String] { await engine!.incoming.setAside }

    func testBadNamesAreSetAsideAndTheRestOfTheTreeArrives() async throws {
        startEngine()
        _ = try await othersFile("before.txt", "before the bad rows")
        let names = ["a/b", String(repeating: "x", count: 4096), "..", ".", "", "nul\u{0}here", "../x"]
        let rows = names.enumerated().map { InMemoryServer.fileRow(id: 100 + Int64($0.offset), name: $0.element) }
        try await plantAndWaitPast(rows, marker: "after.txt")
        XCTAssertEqual(try rootNames(), ["before.txt", "after.txt"])
        XCTAssertEqual(try localText("before.txt"), "before the bad rows")
        XCTAssertEqual(try localText("after.txt"), "after the bad rows")
        let aside = await setAside()
        XCTAssertEqual(Set(aside.keys), Set(rows.map(\.id)), "\(aside)")
        XCTAssertEqual(aside[100], "a name with a /")
        XCTAssertEqual(aside[101], "a name of 4096 bytes (255 at most)")
        XCTAssertEqual(aside[102], "the name ..")

        // A good row for one of them later: remembered, applied, no longer set aside.
        server.plant(InMemoryServer.fileRow(id: 100, name: "mended.txt"))
        try await waitUntil("the mended row arrived") { try rootNames().contains("mended.txt") }
        let after = await setAside()
        XCTAssertNil(after[100])
        XCTAssertTrue(engine!.statusJSON().contains("\"refusedIncoming\":\(names.count - 1)"), engine!.statusJSON())
        // The engine still sends: this replica's own file reaches the server.
        _ = try await importFile("mine.txt", "still sending")
        try await waitForOutbox()
        XCTAssertEqual(serverText("mine.txt"), "still sending")
    }

    func testBadIdentifiersSizesVersionsKeysAndLinkTargetsAreSetAside() async throws {
        startEngine()
        let rows = [
            InMemoryServer.fileRow(id: 2, name: "trash-row.txt"),
            InMemoryServer.fileRow(id: LocalStore.temporaryRowBase, name: "temporary-row.txt"),
            InMemoryServer.fileRow(id: 110, name: "parent-is-trash.txt", parent: 2),
            InMemoryServer.fileRow(id: 111, name: "own-parent", parent: 111, kind: .folder),
            InMemoryServer.fileRow(id: 112, name: "negative.txt", size: -1, key: "tree/objects/x"),
            InMemoryServer.fileRow(id: 113, name: "huge.txt", size: 1 << 62, key: "tree/objects/x"),
            InMemoryServer.fileRow(id: 114, name: "version.txt", size: 1, key: "tree/objects/x", contentVersion: -1),
            InMemoryServer.fileRow(id: 115, name: "elsewhere.txt", size: 1, key: "other/objects/x"),
            InMemoryServer.fileRow(id: 116, name: "climbs.txt", size: 1, key: "tree/objects/../../other/x"),
            InMemoryServer.fileRow(id: 117, name: "folder-key.txt", size: 1, key: "tree/objects/"),
            InMemoryServer.fileRow(id: 118, name: "no-target", kind: .symlink, target: ""),
            InMemoryServer.fileRow(id: 119, name: "long-target", kind: .symlink, target: String(repeating: "t", count: 4096)),
            InMemoryServer.fileRow(id: 120, name: "nul-target", kind: .symlink, target: "a\u{0}b"),
            // Below a folder set aside: waits for it, never applied alone.
            InMemoryServer.fileRow(id: 121, name: "bad/folder", kind: .folder),
            InMemoryServer.fileRow(id: 122, name: "inside.txt", parent: 121),
        ]
        try await plantAndWaitPast(rows, marker: "after.txt")
        XCTAssertEqual(try rootNames(), ["after.txt"])
        XCTAssertEqual(try localText("after.txt"), "after the bad rows")
        let aside = await setAside()
        XCTAssertEqual(Set(aside.keys), Set(rows.map(\.id)).subtracting([122]), "\(aside)")
        XCTAssertEqual(aside[2], "the identifier 2 is out of range")
        XCTAssertEqual(aside[112], "the size -1 is out of range")
        XCTAssertEqual(aside[114], "a version below 0")
        XCTAssertTrue(aside[115]?.hasPrefix("the content key other/objects/x is not one of this tree's") == true, "\(aside)")
        XCTAssertEqual(aside[118], "a symbolic link without a target")
        // The store's own root and trash are untouched.
        XCTAssertNoThrow(try store.enumerateItems(in: .trashContainer))
    }

    /// Manifests and blocks no chunker makes: the file is listed (its row is good), reading it is
    /// EIO with one log line, and the other files read byte-exact.
    func testBadBlocksAndManifestsAreRefusedWhenRead() async throws {
        startEngine()
        let good = try await othersFile("good.txt", "good bytes")
        XCTAssertGreaterThan(good, 0)
        objects.put("tree/packs/p1", String(repeating: "z", count: 64))
        func hash(_ c: Character) -> String { String(repeating: c, count: 64) }
        let cases: [(String, StoredBlock, Int64)] = [
            ("zero.bin", StoredBlock(hash: hash("a"), pack: "tree/packs/p1", offset: 0, length: 0), 0),
            ("negative.bin", StoredBlock(hash: hash("b"), pack: "tree/packs/p1", offset: 0, length: -5), 16),
            ("huge.bin", StoredBlock(hash: hash("c"), pack: "tree/packs/p1", offset: 0, length: 1 << 40), 1 << 40),
            ("offset.bin", StoredBlock(hash: hash("d"), pack: "tree/packs/p1", offset: -1, length: 8), 8),
            ("overflow.bin", StoredBlock(hash: hash("e"), pack: "tree/packs/p1", offset: .max - 2, length: 8), 8),
            ("upper.bin", StoredBlock(hash: hash("F"), pack: "tree/packs/p1", offset: 0, length: 8), 8),
            ("pack.bin", StoredBlock(hash: hash("1"), pack: "other/packs/p1", offset: 0, length: 8), 8),
            ("sum.bin", StoredBlock(hash: hash("2"), pack: "tree/packs/p1", offset: 0, length: 8), 9),
        ]
        var rows: [ServerItem] = []
        for (index, (name, block, size)) in cases.enumerated() {
            let key = "tree/manifests/m\(index)"
            server.plant(blocks: [block], manifest: BlockManifest(key: key, size: size, hashes: [block.hash]))
            rows.append(InMemoryServer.fileRow(id: 200 + Int64(index), name: name, size: max(size, 1), key: key))
        }
        try await plantAndWaitPast(rows, marker: "after.txt")
        for (name, _, _) in cases where name != "huge.bin" {
            XCTAssertThrowsError(try localText(name), name) { error in
                XCTAssertEqual((error as? ProviderError)?.errno, EIO, "\(name): \(error)")
            }
        }
        XCTAssertEqual(try localText("good.txt"), "good bytes")
        XCTAssertEqual(try localText("after.txt"), "after the bad rows")
        // Nothing marked damaged: the bucket is not at fault.
        XCTAssertFalse(server.isDamaged(hash("b")))
    }

    /// In a pinned folder contents download as they arrive: a refused manifest sets its item
    /// aside there, and the others of the same catch-up apply.
    func testARefusedManifestInAPinnedFolderSetsItsItemAside() async throws {
        startEngine()
        try await store.setPinned(true, forItemIdentifier: .rootContainer)
        objects.put("tree/packs/p1", String(repeating: "z", count: 64))
        let block = StoredBlock(hash: String(repeating: "a", count: 64), pack: "tree/packs/p1", offset: 0, length: -1)
        server.plant(blocks: [block], manifest: BlockManifest(key: "tree/manifests/bad", size: 4, hashes: [block.hash]))
        try await plantAndWaitPast(
            [InMemoryServer.fileRow(id: 300, name: "bad.bin", size: 4, key: "tree/manifests/bad")],
            marker: "after.txt")
        XCTAssertEqual(try rootNames(), ["after.txt"])
        let aside = await setAside()
        XCTAssertTrue(aside[300]?.contains("has the length -1") == true, "\(aside)")
    }

    /// A change at a position no sequence makes would carry the anchor past every change to come.
    func testAChangeAtAHugePositionDoesNotFreezeTheReplica() async throws {
        startEngine()
        let first = try await othersFile("first.txt", "first")
        try await waitUntil("first.txt arrived") { try rootNames().contains("first.txt") }
        server.plantChange(at: 9_000_000_000_000_000_000, itemID: first)
        for i in 1...3 { _ = try await othersFile("later\(i).txt", "later \(i)") }
        try await waitUntil("the later files arrived") { try rootNames().isSuperset(of: ["later1.txt", "later2.txt", "later3.txt"]) }
        XCTAssertEqual(try localText("later3.txt"), "later 3")
        XCTAssertLessThan(try store.replica!.syncAnchor().position, 100)
    }

    /// A rebuild (the anchor older than the log) whose log ends at a position no sequence makes:
    /// the anchor goes to the log's start, not there.
    func testARebuildDoesNotTakeAHugeLastPosition() async throws {
        _ = try await othersFile("first.txt", "first")
        server.plantChange(at: 9_000_000_000_000_000_000, itemID: 10)
        let incoming = IncomingSync(store: store.replica!, database: server, s3: objects, bucket: "bucket", prefix: "tree", logger: logger)
        _ = try await incoming.rebuild()
        XCTAssertEqual(try rootNames(), ["first.txt"])
        XCTAssertLessThan(try store.replica!.syncAnchor().position, 100)
    }

    /// A lost item's name from before these checks (`..`, a name with `/`) stays inside recovered/.
    func testRecoveredNamesStayInsideRecovered() throws {
        _ = try store.replica!.applyIncoming([
            ServerItem(
                id: 400, parentID: LocalStore.rootRow, name: "..", kind: .file,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1))
        ])
        let kept = store.replica!.keepRecovered(rows: [400], folder: "f")
        let base = store.url.path + "/recovered/f/"
        XCTAssertEqual(kept, [400: base + "item-400"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.url.path + "/recovered/item-400"))
    }

    /// Each rule on its own.
    func testEachRule() {
        XCTAssertNil(ServerRowChecks.name(String(repeating: "é", count: 127)))
        XCTAssertNotNil(ServerRowChecks.name(String(repeating: "é", count: 128)))
        XCTAssertNil(ServerRowChecks.name("..."))
        XCTAssertNil(ServerRowChecks.contentKey("tree/manifests/abc-def", prefix: "/tree/"))
        XCTAssertNil(ServerRowChecks.contentKey("objects/abc", prefix: ""))
        XCTAssertNotNil(ServerRowChecks.contentKey("tree/objects/a/b", prefix: "tree"))
        XCTAssertNotNil(ServerRowChecks.contentKey("tree/packs/a", prefix: "tree"))
        XCTAssertNotNil(ServerRowChecks.contentKey("tree/objects/" + String(repeating: "k", count: 1100), prefix: "tree"))
        XCTAssertNil(ServerRowChecks.packKey("tree/packs/a", prefix: "tree"))
        let hash = String(repeating: "0", count: 64)
        let block = StoredBlock(hash: hash, pack: "tree/packs/p", offset: 0, length: 4 << 20)
        XCTAssertNil(ServerRowChecks.block(block, prefix: "tree"))
        var long = block
        long.length += 1
        XCTAssertNotNil(ServerRowChecks.block(long, prefix: "tree"), "a block longer than the chunker makes")
        var short = block
        short.hash.removeLast()
        XCTAssertNotNil(ServerRowChecks.block(short, prefix: "tree"))
        XCTAssertNil(ServerRowChecks.manifest(size: 8 << 20, blocks: [block, block], prefix: "tree"))
        XCTAssertNotNil(ServerRowChecks.manifest(size: 8 << 20, blocks: [block], prefix: "tree"))
        XCTAssertNotNil(ServerRowChecks.manifest(size: -1, blocks: [], prefix: "tree"))
        XCTAssertNil(ServerRowChecks.manifest(size: 0, blocks: [], prefix: "tree"))
        func change(_ position: Int64) -> RemoteChange {
            RemoteChange(position: position, itemID: 5, kind: .create, operationID: UUID(), contentVersion: 1, metadataVersion: 1, atNs: 1)
        }
        let read = ServerRowChecks.changes([change(11), change(13), change(13), change(14)], after: 10)
        XCTAssertEqual(read.usable.map(\.position), [11, 13])
        XCTAssertEqual(read.refused?.0.position, 13)
        XCTAssertEqual(ServerRowChecks.changes([change(-3)], after: 0).usable, [])
        XCTAssertEqual(ServerRowChecks.changes([change(5), change(.max)], after: 0).usable.map(\.position), [5])
    }
}
