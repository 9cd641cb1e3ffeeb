import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// The server's database restored to an earlier point while other replicas go on writing: the
/// restore rewinds identifiers and change log positions, so other replicas' new items take this
/// replica's identifiers and their changes its positions. This replica must notice before it
/// applies or sends anything, keep what the server lost, and never act on an identifier that
/// now names another item.
final class RestoredServerTests: ReplicaTestCase {
    /// Another replica's new file, made on the server directly.
    func othersFile(_ name: String, _ text: String) async throws -> Int64 {
        let key = "tree/objects/\(UUID().uuidString)"
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

    func testARestoreIsNoticedAfterOtherReplicasWroteAndNothingIsMixedUp() async throws {
        startEngine()
        _ = try await importFile("f0.txt", "kept by the backup")
        try await waitForOutbox()
        let backup = server.backup()
        var mine: [Int64] = []
        for i in 1...3 {
            let item = try await importFile("a\(i).txt", "a\(i), written after the backup")
            try await waitForOutbox()
            mine.append(try XCTUnwrap(LocalStore.row(for: store.childItem(named: item.filename, in: .rootContainer).identifier)))
        }
        await engine!.stop()
        engine = nil

        // Restored; another replica writes more than this one did after the backup.
        server.restore(backup)
        var theirs: [Int64] = []
        for i in 1...5 { theirs.append(try await othersFile("c\(i).txt", "c\(i) from another replica")) }
        XCTAssertFalse(Set(theirs).isDisjoint(with: mine), "the restore gave this replica's identifiers to new items")
        // Waiting here, offline: an attribute change of one of this replica's lost files.
        let a1 = try store.childItem(named: "a1.txt", in: .rootContainer)
        _ = try await store.setAttributes(ofItemWithIdentifier: a1.identifier, posixPermissions: 0o600, contentModificationDate: nil)

        startEngine()
        try await waitUntil("this replica's tree is the server's") {
            Set(try store.enumerateItems(in: .rootContainer).map(\.filename)) == Set(server.tree().keys)
        }
        try await waitForOutbox()
        for i in 1...5 {
            XCTAssertEqual(try localText("c\(i).txt"), "c\(i) from another replica")
            XCTAssertEqual(server.tree()["c\(i).txt"]?.posixPermissions, 0o644, "c\(i).txt was not changed by a change of a lost file")
        }
        XCTAssertEqual(try localText("f0.txt"), "kept by the backup")
        // What the server lost is kept beside the store, byte for byte.
        let recovered = store.url.appendingPathComponent("recovered")
        let folders = try FileManager.default.contentsOfDirectory(atPath: recovered.path)
        XCTAssertEqual(folders.count, 1, "\(folders)")
        for i in 1...3 {
            let text = try String(contentsOf: recovered.appendingPathComponent(folders[0]).appendingPathComponent("a\(i).txt"), encoding: .utf8)
            XCTAssertEqual(text, "a\(i), written after the backup")
        }
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(engine!.statusJSON().utf8)) as? [String: Any])
        XCTAssertTrue((status["restore"] as? String)?.contains("3 file(s)") == true, "\(status)")
    }

    /// What the restored server lost and nobody's item took the identifier of is made again on the
    /// server at its path: a lost folder goes into a folder of the same name made since, a file
    /// whose name is taken there now gets a conflicted copy's name; nothing stays in recovered/.
    func testWhatTheRestoredServerLostIsPutBackAtItsPaths() async throws {
        startEngine()
        _ = try await importFile("f0.txt", "kept by the backup")
        try await waitForOutbox()
        let backup = server.backup()
        let docs = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        _ = try await importFile("inner.txt", "inside a lost folder", into: docs.identifier)
        _ = try await importFile("clash.txt", "mine, after the backup")
        _ = try await importFile("alone.txt", "no one took this name")
        try await waitForOutbox()
        await engine!.stop()
        engine = nil

        server.restore(backup)
        // Another replica made a folder and a file of the same names since, under identifiers none
        // of this replica's items had.
        server.plant(InMemoryServer.fileRow(id: 100, name: "docs", kind: .folder))
        server.plant(InMemoryServer.fileRow(id: 101, name: "clash.txt"))

        startEngine()
        try await waitUntil("what the server lost is on the server again") {
            let tree = server.tree()
            return tree["docs/inner.txt"] != nil && tree["alone.txt"] != nil
                && tree.keys.contains { $0.hasPrefix("clash (conflicted copy") }
        }
        try await waitForOutbox()
        let tree = server.tree()
        XCTAssertEqual(tree["docs/"]?.id, 100, "the lost folder went into the one made since: \(tree.keys.sorted())")
        XCTAssertEqual(tree["clash.txt"]?.id, 101, "the other replica's file keeps its name")
        XCTAssertEqual(try localText("docs/inner.txt"), "inside a lost folder")
        XCTAssertEqual(try localText("alone.txt"), "no one took this name")
        XCTAssertEqual(try localText("f0.txt"), "kept by the backup")
        let copy = try XCTUnwrap(tree.keys.first { $0.hasPrefix("clash (conflicted copy") })
        XCTAssertEqual(try localText(copy), "mine, after the backup")
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: store.url.appendingPathComponent("recovered").path),
            "recovered/ keeps only what could not be put back")
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(engine!.statusJSON().utf8)) as? [String: Any])
        let restore = try XCTUnwrap(status["restore"] as? String, "\(status)")
        XCTAssertTrue(restore.contains("4 item(s) of this replica it lost are put back at their paths (1 under a conflicted-copy name)"), restore)
        XCTAssertFalse(restore.contains("kept in"), restore)
    }

    func testTheSameHistoryIsNoRestore() async throws {
        startEngine()
        _ = try await importFile("one.txt", "1")
        try await waitForOutbox()
        await engine!.stop()
        engine = nil
        _ = try await othersFile("two.txt", "2")
        startEngine()
        try await waitUntil("two.txt arrives") { (try? store.childItem(named: "two.txt", in: .rootContainer)) != nil }
        let status = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(engine!.statusJSON().utf8)) as? [String: Any])
        XCTAssertTrue(status["restore"] is NSNull, "\(status)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.url.appendingPathComponent("recovered").path))
    }
}
