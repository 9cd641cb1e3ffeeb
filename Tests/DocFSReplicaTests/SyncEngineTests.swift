import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// The sync engine against an in-memory server: ordering, temporary → permanent identifiers,
/// retries without doubling, stalls, items set aside, conflicts and other replicas' changes.
final class SyncEngineTests: ReplicaTestCase {
    func testChangesReachTheServerInOrderUnderPermanentIdentifiers() async throws {
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        let file = try await importFile("a.txt", "one", into: folder.identifier)
        _ = try await store.renameItem(withIdentifier: file.identifier, toName: "b.txt")
        XCTAssertTrue(LocalStore.isTemporary(folder.identifier))
        startEngine()
        try await waitForOutbox()

        XCTAssertEqual(server.state.withLock { $0.log.map(\.kind) }, [.create, .create, .move], "sent in the order they were made")
        XCTAssertEqual(Set(server.tree().keys), ["docs/", "docs/b.txt"])
        XCTAssertEqual(serverText("docs/b.txt"), "one")
        let docs = try store.childItem(named: "docs", in: .rootContainer)
        let b = try store.childItem(named: "b.txt", in: docs.identifier)
        XCTAssertFalse(LocalStore.isTemporary(docs.identifier), "the server's identifier replaced the temporary one")
        XCTAssertEqual(docs.identifier, ItemIdentifier(String(server.tree()["docs/"]!.id)))
        XCTAssertEqual(b.identifier, ItemIdentifier(String(server.tree()["docs/b.txt"]!.id)))
        XCTAssertEqual(try localText("docs/b.txt"), "one")
    }

    func testAnUnreachableServerIsRetriedAndNothingIsDoubled() async throws {
        server.failNext(
            RemoteError.unreachable("connection refused"), RemoteError.unreachable("connection refused"),
            RemoteError.unreachable("connection refused"))
        objects.failNext(S3Error(kind: .unreachable, message: "connection reset"))
        _ = try await importFile("a.txt", "first")
        _ = try await importFile("b.txt", "second")
        startEngine()
        try await waitForOutbox()
        XCTAssertEqual(Set(server.tree().keys), ["a.txt", "b.txt"])
        XCTAssertEqual(serverText("a.txt"), "first")
        XCTAssertEqual(serverText("b.txt"), "second")
        XCTAssertEqual(server.state.withLock { $0.log.count }, 2, "each create applied once")
        // The change follower met an error too and clears it at its own next try (within its
        // first backoff): the status shows none once both are through.
        try await waitUntil("the status shows no error") {
            let status = engine!.statusJSON()
            return status.contains("\"online\":true") && status.contains("\"lastError\":null")
        }
    }

    func testAnAnswerLostAfterTheCommitIsNotAppliedTwice() async throws {
        startEngine()
        server.loseNextAnswer()
        let file = try await importFile("a.txt", "once")
        try await waitForOutbox()
        _ = try await modify(try store.item(for: store.childItem(named: "a.txt", in: .rootContainer).identifier), "twice")
        try await waitForOutbox()
        XCTAssertEqual(Set(server.tree().keys), ["a.txt"], "the replayed create made no second item (\(file.filename))")
        XCTAssertEqual(server.state.withLock { $0.log.map(\.kind) }, [.create, .content])
        XCTAssertEqual(serverText("a.txt"), "twice")
        XCTAssertEqual(server.tree()["a.txt"]?.contentVersion, 2)
    }

    func testAServerThatRefusesTheLoginStallsAndResumes() async throws {
        server.failNext(RemoteError.authentication("password authentication failed"))
        _ = try await importFile("a.txt", "waits")
        startEngine()
        try await waitUntil("the status says stalled") { engine!.statusJSON().contains("password authentication failed") }
        XCTAssertTrue(engine!.statusJSON().contains("\"state\":\"stalled\""), engine!.statusJSON())
        try await waitForOutbox()
        XCTAssertEqual(serverText("a.txt"), "waits")
    }

    func testAChangeTheServerRejectsIsSetAsideWhileTheOthersGoOn() async throws {
        server.reject(name: "bad.txt")
        _ = try await importFile("one.txt", "1")
        let bad = try await importFile("bad.txt", "refused")
        _ = try await importFile("two.txt", "2")
        startEngine()
        try await waitUntil("the others are on the server") { Set(server.tree().keys) == ["one.txt", "two.txt"] }
        try await waitForOutbox(1)
        let row = LocalStore.row(for: bad.identifier)!
        try await waitUntil("the item says why") { store.replica!.syncError(of: store.replica!.currentRow(row)) != nil }
        XCTAssertTrue(store.replica!.syncError(of: store.replica!.currentRow(row))!.contains("bad.txt"))

        // The server takes it now: `docfs sync --retry` sends it.
        server.allow(name: "bad.txt")
        try await store.retrySync(of: bad.identifier)
        try await waitForOutbox()
        XCTAssertEqual(serverText("bad.txt"), "refused")
        XCTAssertNil(store.replica!.syncError(of: store.replica!.currentRow(row)))
    }

    /// "notes.txt" at version 1 on the server and here; another replica's "theirs" reaches the
    /// server while this one, offline (the engine stopped), writes "mine" over version 1.
    func editedHereAndOnTheServer(_ name: String = "notes.txt") async throws -> Item {
        startEngine()
        let file = try await importFile(name, "base")
        try await waitForOutbox()
        let id = server.tree()[name]!.id
        await engine!.stop()
        engine = nil
        objects.put("tree/objects/theirs", "theirs")
        _ = try await server.newContentVersion(
            operationID: UUID(), itemID: id, expectedVersion: 1,
            content: RemoteContent(key: "tree/objects/theirs", size: 6),
            modificationTime: FileTime(totalNanoseconds: 1))
        return try await modify(try store.item(for: file.identifier), "mine")
    }

    func testEditsOnTwoReplicasKeepBothVersions() async throws {
        _ = try await editedHereAndOnTheServer()
        startEngine()
        try await waitForOutbox()
        try await waitUntil("the copy is here") { try store.enumerateItems(in: .rootContainer).count == 2 }

        let tree = server.tree()
        XCTAssertEqual(serverText("notes.txt"), "theirs", "the version the server had first keeps the name")
        let copies = tree.keys.filter { $0.hasPrefix("notes (conflicted copy from ") && $0.hasSuffix(").txt") }
        XCTAssertEqual(copies.count, 1, "\(tree.keys)")
        XCTAssertEqual(serverText(copies[0]), "mine")
        try await waitUntil("the name holds the server's version here") { try localText("notes.txt") == "theirs" }
        XCTAssertEqual(try localText(copies[0]), "mine")
    }

    /// The conflicted copy of "x." + 220 letters: its name cut to 255 bytes, extension included,
    /// so the server takes it and both versions are there (a longer one was refused, and the
    /// edit stayed on this replica alone with nothing pending).
    func testAConflictOnALongExtensionKeepsBothVersionsOnTheServer() async throws {
        let name = "x." + String(repeating: "l", count: 220)
        _ = try await editedHereAndOnTheServer(name)
        startEngine()
        try await waitForOutbox()
        let copies = server.tree().keys.filter { $0.hasPrefix("x (conflicted copy from ") }
        XCTAssertEqual(copies.count, 1, "\(server.tree().keys)")
        let copy = try XCTUnwrap(copies.first)
        XCTAssertLessThanOrEqual(copy.utf8.count, 255)
        XCTAssertEqual(serverText(name), "theirs")
        XCTAssertEqual(serverText(copy), "mine")
        try await waitUntil("this replica has both") { try localText(name) == "theirs" && localText(copy) == "mine" }
    }

    /// An edit whose conflicted copy the server refuses is set aside with its contents: the
    /// file keeps this replica's bytes, the status counts it, and a retry sends it.
    func testAnEditTheServerRefusesIsSetAsideWithItsContents() async throws {
        server.refuseAsInvalid(namesContaining: "conflicted copy")
        let file = try await editedHereAndOnTheServer()
        startEngine()
        try await waitUntil("the status counts it set aside") { engine!.statusJSON().contains("\"setAside\":1") }
        try await waitForOutbox(1)
        XCTAssertEqual(try localText("notes.txt"), "mine", "the edit stays here")
        XCTAssertEqual(serverText("notes.txt"), "theirs")
        let row = store.replica!.currentRow(LocalStore.row(for: file.identifier)!)
        XCTAssertTrue(
            store.replica!.syncError(of: row)?.contains("not a valid item name") ?? false, "\(String(describing: store.replica!.syncError(of: row)))")

        server.refuseAsInvalid(namesContaining: nil)
        try await store.retrySync(of: file.identifier)
        try await waitForOutbox()
        let copies = server.tree().keys.filter { $0.hasPrefix("notes (conflicted copy from ") }
        XCTAssertEqual(copies.count, 1, "\(server.tree().keys)")
        XCTAssertEqual(serverText(copies[0]), "mine")
        try await waitUntil("the name holds the server's version here") { try localText("notes.txt") == "theirs" }
        try await waitUntil("nothing set aside") { engine!.statusJSON().contains("\"setAside\":0") }
    }

    /// The file is written again after its upload read it and before the server answers with
    /// the conflict: the conflicted copy holds the newer bytes here, and so must the server's
    /// (they were dropped with the waiting entry, and stayed on this replica alone).
    func testAWriteAfterTheUploadReadTheFileReachesTheConflictedCopy() async throws {
        let file = try await editedHereAndOnTheServer()
        server.holdNext("newContentVersion")
        startEngine()
        try await waitUntil("the upload of \"mine\" waits for the server") { server.isHolding }
        _ = try await modify(try store.item(for: file.identifier), "mine, written later")
        server.releaseHold()
        try await waitForOutbox()

        let copies = server.tree().keys.filter { $0.hasPrefix("notes (conflicted copy from ") }
        XCTAssertEqual(copies.count, 1, "\(server.tree().keys)")
        XCTAssertEqual(serverText("notes.txt"), "theirs")
        XCTAssertEqual(serverText(copies[0]), "mine, written later", "the server's copy holds what the last close wrote")
        XCTAssertEqual(try localText(copies[0]), "mine, written later")
        try await waitUntil("the name holds the server's version here") { try localText("notes.txt") == "theirs" }
    }

    /// `docfs status` answers from one moment: a chunk's entries leave the outbox together with
    /// its counters, so "pending 0" always comes with every byte of it counted (a monitor reading
    /// both at once once saw the last pack missing).
    func testTheStatusCountsAChunksBytesWhenItsEntriesLeaveTheOutbox() async throws {
        let texts = ["first file's bytes", "the second file, a little longer"]
        for (index, text) in texts.enumerated() { _ = try await importFile("f\(index).txt", text) }
        // Held where the server has applied the chunk and its answer is on the way: the one
        // moment the engine waits between the commit and its own bookkeeping.
        server.holdNext("applied")
        startEngine()
        try await waitUntil("the chunk is committed") { server.isHolding }
        func status() throws -> [String: Any] {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(engine!.statusJSON().utf8)) as? [String: Any])
        }
        let during = try status()
        XCTAssertEqual(during["pending"] as? Int, 2, "the chunk's entries are still waiting here")
        XCTAssertEqual(during["uploadedBytes"] as? Int, 0, "and its bytes not counted yet: both move together")
        XCTAssertEqual(during["sent"] as? Int, 0)
        server.releaseHold()
        try await waitForOutbox()
        let after = try status()
        XCTAssertEqual(after["pending"] as? Int, 0)
        XCTAssertEqual(after["sent"] as? Int, 2)
        XCTAssertEqual(after["uploadedBytes"] as? Int, texts.map(\.utf8.count).reduce(0, +), "counted once, with the entries")
    }

    func testAnotherReplicasChangesArriveAndDownloadWhenOpened() async throws {
        startEngine()
        let folder = try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "shared", kind: .folder,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o755,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)), content: nil)
        objects.put("tree/objects/report", "from elsewhere")
        _ = try await server.createItem(
            operationID: UUID(), parentID: folder.itemID, name: "report.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)),
            content: RemoteContent(key: "tree/objects/report", size: 14))
        try await waitUntil("the file is listed here") {
            let shared = try? store.childItem(named: "shared", in: .rootContainer)
            return shared.flatMap { try? store.childItem(named: "report.txt", in: $0.identifier) } != nil
        }
        let report = try store.childItem(named: "report.txt", in: store.childItem(named: "shared", in: .rootContainer).identifier)
        XCTAssertFalse(report.isDownloaded, "metadata first: the contents come when opened")
        XCTAssertEqual(objects.downloads, 0)
        XCTAssertEqual(try localText("shared/report.txt"), "from elsewhere")
        XCTAssertEqual(objects.downloads, 1)
        XCTAssertEqual(store.replica!.outboxCounts.pending, 0, "what arrived is not sent back")

        // Renamed and deleted there: followed here.
        _ = try await server.moveItem(
            operationID: UUID(), itemID: report.identifier.rawValue.int64!, toParentID: InMemoryServer.rootID,
            name: "moved.txt", expectedParentID: nil, expectedName: nil, types: nil)
        try await waitUntil("the move is here") { (try? store.childItem(named: "moved.txt", in: .rootContainer)) != nil }
        _ = try await server.deleteItem(operationID: UUID(), itemID: folder.itemID, expectedContentVersion: nil)
        try await waitUntil("the delete is here") { (try? store.childItem(named: "shared", in: .rootContainer)) == nil }
        XCTAssertEqual(store.replica!.outboxCounts.pending, 0)
    }
}

private extension String {
    var int64: Int64? { Int64(self) }
}

extension SyncEngineTests {
    func testUploadsRecordTheirSHA256AndADamagedObjectIsRefusedWhenDownloaded() async throws {
        startEngine()
        _ = try await importFile("kept.txt", "the bytes as written")
        try await waitForOutbox()
        // A small file is one block, named by its SHA-256.
        let key = try XCTUnwrap(server.tree()["kept.txt"]?.contentKey)
        let manifest = try await server.manifest(key: key)
        XCTAssertEqual(manifest?.blocks.map(\.hash), [DownloadVerifier.sha256(ofFileAt: try staged("probe", "the bytes as written").path)!])

        // Another replica's file whose object was replaced in the bucket after its upload.
        objects.put("tree/objects/report", "from elsewhere")
        let hash = DownloadVerifier.sha256(ofFileAt: try staged("probe2", "from elsewhere").path)
        _ = try await server.createItem(
            operationID: UUID(), parentID: InMemoryServer.rootID, name: "report.txt", kind: .file,
            attributes: ReplicatedAttributes(
                posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1)),
            content: RemoteContent(key: "tree/objects/report", size: 14, sha256: hash))
        try await waitUntil("the file is listed here") { (try? store.childItem(named: "report.txt", in: .rootContainer)) != nil }
        objects.put("tree/objects/report", "from nowhere!!") // same size, other bytes
        XCTAssertThrowsError(try localText("report.txt"), "a damaged object is EIO for its reader") { error in
            XCTAssertEqual((error as? ProviderError)?.errno, EIO, "\(error)")
        }
        let report = try store.childItem(named: "report.txt", in: .rootContainer)
        XCTAssertFalse(report.isDownloaded, "none of it went into the store")
        // Mended in the bucket: the next open fetches it again and it is used.
        objects.put("tree/objects/report", "from elsewhere")
        XCTAssertEqual(try localText("report.txt"), "from elsewhere")
    }
}

extension SyncEngineTests {
    func testBlocksAreUploadedOnceAndADamagedBlockIsRefused() async throws {
        let same = String(repeating: "the same contents ", count: 100)
        _ = try await importFile("one.txt", same)
        _ = try await importFile("two.txt", same)
        _ = try await importFile("three.txt", "other")
        // Started once all three wait, so that one batch takes them (on a busy machine an engine
        // already running sent the first before the others were in: two packs).
        startEngine()
        try await waitForOutbox()
        XCTAssertEqual(serverText("one.txt"), same)
        XCTAssertEqual(serverText("two.txt"), same)
        let blocks = server.state.withLock { $0.blocks }
        XCTAssertEqual(blocks.count, 2, "two distinct contents, two blocks")
        XCTAssertEqual(Set(blocks.values.map(\.pack)).count, 1, "sent in one pack")
        XCTAssertEqual(objects.uploads, 1, "one PUT for three files")

        // Another replica's file in a pack of its own; the pack is then damaged in the bucket.
        _ = try await anotherReplicasFileWithADamagedPack()
        XCTAssertFalse(try store.childItem(named: "report.txt", in: .rootContainer).isDownloaded, "none of it went into the store")
        objects.put("tree/packs/p1", "xxfrom elsewhere")
        XCTAssertEqual(try localText("report.txt"), "from elsewhere")
    }

    /// The first attempt records the file's manifest and loses the rest; the file changes before
    /// the retry, which sends the new bytes: the version names them, not the first attempt's
    /// manifest (its key came from the operation alone, and the server kept the first bytes
    /// under a version of the new size: EIO for every other replica).
    func testAFileChangedBeforeARetryIsSentAsItIsNow() async throws {
        startEngine()
        server.goDownAfterNextManifests()
        let file = try await importFile("a.txt", "short")
        try await waitUntil("the manifest is recorded and the server gone") { server.isDown }
        _ = try await modify(file, "longer contents")
        server.reachable()
        try await waitForOutbox()
        XCTAssertEqual(serverText("a.txt"), "longer contents")
        XCTAssertEqual(server.tree()["a.txt"]?.size, 15)
    }

    func testABlockGcRemovedMeanwhileIsSentAgain() async throws {
        startEngine()
        _ = try await importFile("a.txt", "shared bytes")
        try await waitForOutbox()
        let hash = try XCTUnwrap(server.state.withLock { $0.blocks.keys.first })
        // gc drops the block after this replica found it known, before its manifest is recorded.
        server.dropBlockAfterNextLookup(hash)
        _ = try await importFile("b.txt", "shared bytes")
        try await waitForOutbox()
        XCTAssertEqual(serverText("b.txt"), "shared bytes")
        XCTAssertNotNil(server.state.withLock { $0.blocks[hash] }, "sent again")
    }
}

final class ContentChunkerTests: XCTestCase {
    func blocks(_ bytes: [UInt8], _ chunker: ContentChunker) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var start = 0
        while start < bytes.count {
            let n = bytes.withUnsafeBytes { chunker.cut(UnsafeRawBufferPointer(rebasing: $0[start...]), atEnd: true) }!
            out.append(Array(bytes[start..<start + n]))
            start += n
        }
        return out
    }

    func testBoundariesFollowTheContentsNotTheOffsets() {
        var generator = SystemRandomNumberGenerator()
        let data = (0..<(3 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let chunker = ContentChunker(minimum: 16 << 10, average: 64 << 10, maximum: 256 << 10)
        let before = blocks(data, chunker)
        XCTAssertEqual(before.reduce(0) { $0 + $1.count }, data.count)
        XCTAssertTrue(before.dropLast().allSatisfy { $0.count >= 16 << 10 && $0.count <= 256 << 10 }, "within the bounds")
        XCTAssertGreaterThan(before.count, 20, "about 64 KiB on average: \(before.count) blocks")
        XCTAssertEqual(blocks(data, chunker), before, "the same bytes cut the same way")

        // 100 bytes inserted in the middle: only the blocks around them change.
        var edited = data
        edited.insert(contentsOf: [UInt8](repeating: 7, count: 100), at: data.count / 2)
        let after = blocks(edited, chunker)
        let changed = Set(after.map { $0.withUnsafeBytes { BlockHash.of($0) } })
            .subtracting(before.map { $0.withUnsafeBytes { BlockHash.of($0) } })
        // Usually one or two; a block cut at the maximum (no content boundary in it) passes the
        // shift on to the next, so random data now and then gives three: a few of ~45 is the property.
        XCTAssertLessThanOrEqual(changed.count, 4, "\(changed.count) of \(after.count) blocks changed")

        // More bytes needed: no cut is decided before the minimum.
        XCTAssertNil(data.withUnsafeBytes { chunker.cut(UnsafeRawBufferPointer(rebasing: $0[0..<1000]), atEnd: false) })
    }
}

/// Further names of a file (hard links) through the in-memory server, which checks them as the
/// real one does (`InMemoryServer+Names`; the real server: ServerNameTests, ReplicaHardLinkMountTests).
extension SyncEngineTests {
    func testALinkGoesUpAsALinkAndANameFromTheServerComesDownAsASecondName() async throws {
        startEngine()
        try await waitUntil("the engine has seen the server's schema") { store.replica!.serverSchemaVersion >= ServerSchemaVersions.names }
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        let file = try await importFile("a.txt", "one")
        _ = try await store.linkItem(withIdentifier: file.identifier, toParentItemIdentifier: folder.identifier, name: "b.txt")
        try await waitForOutbox()
        XCTAssertEqual(server.state.withLock { $0.log.map(\.kind) }, [.create, .create, .link])
        let tree = server.tree()
        XCTAssertEqual(Set(tree.keys), ["docs/", "a.txt", "docs/b.txt"])
        XCTAssertEqual(tree["docs/b.txt"]?.linkOf, tree["a.txt"]?.id, "one file under two names on the server")
        XCTAssertEqual(serverText("a.txt"), "one")
        let a = try store.childItem(named: "a.txt", in: .rootContainer)
        XCTAssertEqual(a.identifier, ItemIdentifier(String(tree["a.txt"]!.id)))

        // Another replica's name of the same file: a second name here, the same item.
        let itemID = tree["a.txt"]!.id
        let c = try await server.applyOne(
            RemoteOperation(
                id: UUID(),
                .link(
                    item: .item(itemID), parent: .item(InMemoryServer.rootID),
                    name: "c.txt")))
        try await waitUntil("the name is here") { (try? store.childItem(named: "c.txt", in: .rootContainer)) != nil }
        XCTAssertEqual(try store.childItem(named: "c.txt", in: .rootContainer).identifier, a.identifier)
        XCTAssertEqual(try store.item(for: a.identifier).linkCount, 3)
        XCTAssertEqual(try localText("c.txt"), "one")
        // Moved and removed there: followed here; nothing is sent back.
        _ = try await server.applyOne(
            RemoteOperation(
                id: UUID(),
                .moveName(
                    name: .item(c.itemID), toParent: .item(tree["docs/"]!.id),
                    newName: "d.txt", expectedParentID: nil, expectedName: nil)))
        try await waitUntil("the move is here") { (try? store.childItem(named: "d.txt", in: folder.identifier)) != nil }
        _ = try await server.applyOne(RemoteOperation(id: UUID(), .unlink(name: .item(c.itemID))))
        try await waitUntil("the name is gone here") { (try? store.item(for: a.identifier).linkCount) == 2 }
        XCTAssertNil(try? store.childItem(named: "d.txt", in: folder.identifier))
        XCTAssertEqual(store.replica!.outboxCounts.pending, 0)
    }

    /// A name whose file is not here yet (its folder deleted here by a change the server will
    /// refuse) waits for the file instead of being passed over: the change log names it once.
    func testANameWhoseFileIsNotHereWaitsForIt() throws {
        func row(_ id: Int64, _ parent: Int64, _ name: String, _ kind: ItemKind, linkOf: Int64? = nil) -> ServerItem {
            ServerItem(
                id: id, parentID: parent, name: name, kind: kind, creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1), linkOf: linkOf)
        }
        let name = row(402, LocalStore.rootRow, "l.txt", .file, linkOf: 401)
        var result = try store.replica!.applyIncoming([name])
        XCTAssertEqual(result.deferred, [402], "the name waits for its file")
        XCTAssertNil(try? store.childItem(named: "l.txt", in: .rootContainer))
        result = try store.replica!.applyIncoming([row(400, LocalStore.rootRow, "d", .folder), row(401, 400, "f.txt", .file)])
        result = try store.replica!.applyIncoming([name])
        XCTAssertEqual(result.deferred, [])
        let file = try store.childItem(named: "f.txt", in: LocalStore.identifier(forRow: 400))
        XCTAssertEqual(try store.childItem(named: "l.txt", in: .rootContainer).identifier, file.identifier)
        XCTAssertEqual(try store.item(for: file.identifier).linkCount, 2)
    }

    /// The in-memory server refuses what the real one's name checks refuse.
    func testTheInMemoryServerChecksNamesAsTheRealOne() async throws {
        let root = InMemoryServer.rootID
        let attributes = ReplicatedAttributes(
            posixPermissions: 0o644, creationTime: FileTime(totalNanoseconds: 1),
            modificationTime: FileTime(totalNanoseconds: 1))
        let folder = try await server.createItem(operationID: UUID(), parentID: root, name: "f", kind: .folder, attributes: attributes)
        let file = try await server.createItem(operationID: UUID(), parentID: root, name: "a", kind: .file, attributes: attributes)
        func refused(_ change: RemoteOperation.Change, _ what: String) async {
            do {
                _ = try await server.applyOne(RemoteOperation(id: UUID(), change))
                XCTFail("\(what): applied")
            } catch {
                guard case RemoteError.invalid = error else { return XCTFail("\(what): \(error)") }
            }
        }
        await refused(.link(item: .item(folder.itemID), parent: .item(root), name: "g"), "a folder's link")
        await refused(.link(item: .item(file.itemID), parent: .item(file.itemID), name: "b"), "a link into a file")
        let name = try await server.applyOne(RemoteOperation(id: UUID(), .link(item: .item(file.itemID), parent: .item(folder.itemID), name: "a")))
        XCTAssertEqual(name.name, "a")
        await refused(.link(item: .item(name.itemID), parent: .item(root), name: "c"), "a link of a name")
        await refused(.unlink(name: .item(file.itemID)), "an unlink of an item")
        await refused(
            .move(item: .item(name.itemID), toParent: .item(root), name: "m", expectedParentID: nil, expectedName: nil, types: nil),
            "a move of a name")
        // One name in the trash (schema 13): only out of it into a live folder.
        await refused(.untrash(item: .item(name.itemID), toParent: .item(root), name: "u", types: nil), "an untrash of a live name")
        _ = try await server.applyOne(RemoteOperation(id: UUID(), .trash(item: .item(name.itemID))))
        XCTAssertNotNil(server.state.withLock { $0.items[name.itemID]?.trashTime })
        await refused(.untrash(item: .item(name.itemID), toParent: .item(file.itemID), name: "u", types: nil), "an untrash into a file")
        await refused(.untrash(item: .item(name.itemID), toParent: .item(name.itemID), name: "u", types: nil), "an untrash into a name")
        let back = try await server.applyOne(
            RemoteOperation(
                id: UUID(),
                .untrash(
                    item: .item(name.itemID), toParent: .item(folder.itemID),
                    name: "a", types: nil)))
        XCTAssertEqual(back.name, "a")
        _ = try await server.trashItem(operationID: UUID(), itemID: folder.itemID)
        await refused(.link(item: .item(file.itemID), parent: .item(folder.itemID), name: "d"), "a link into a trashed folder")
        // A delete of the item takes its name's place: the file stays, as "f/a" (in the trashed f).
        _ = try await server.deleteItem(operationID: UUID(), itemID: file.itemID)
        let kept = try XCTUnwrap(server.state.withLock { $0.items[file.itemID] })
        XCTAssertEqual([kept.deleted ? 1 : 0, kept.parentID, kept.trashTime == nil ? 0 : 1], [0, folder.itemID, 0])
        XCTAssertEqual(kept.name, "a")
        XCTAssertEqual(server.state.withLock { $0.items[name.itemID]?.deleted }, true)
        XCTAssertEqual(server.state.withLock { $0.log.suffix(2).map(\.kind) }, [.unlink, .delete])
    }
}
