import XCTest
import Foundation
import Synchronization
import DocFSProvider
import DocFSWire
@testable import DocFSStore

/// A replica's outbox without a server: every action leaves its changes in order, in the same
/// journal entry (so they survive a crash with it), and a permanent identifier from the server
/// replaces a temporary row everywhere — item, children, entries still waiting, content file —
/// while the mount is told so.
final class OutboxTests: StoreTestCase {
    /// Against a server that keeps one name per file (before schema 12), a replica refuses a hard
    /// link with one clear reason (EPERM) naming the upgrade and leaves nothing behind; device
    /// nodes stay local, as FIFOs do.
    func testAReplicaRefusesLinksAgainstAnOlderServerAndKeepsDeviceNodesLocal() async throws {
        try makeReplica()
        store.replica!.noteServerSchema(11)
        let file = try await store.importDocument(at: try stage("a.txt", "one"), toParentItemIdentifier: .rootContainer)
        let before = try store.replica!.outboxEntries(limit: 100).count
        do {
            _ = try await store.linkItem(withIdentifier: file.identifier, toParentItemIdentifier: .rootContainer, name: "b.txt")
            XCTFail("a replica made a hard link")
        } catch {
            XCTAssertEqual(error.code, .notPermitted)
            XCTAssertEqual(error.errno, EPERM)
            XCTAssertTrue(error.reason.contains("`docfs remote setup` to upgrade it"), error.reason)
        }
        var attributes = NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o600)
        attributes.deviceNumber = 0x0103
        _ = try await store.createSpecialItem(
            withName: "null", kind: .characterDevice, inParentItemIdentifier: .rootContainer,
            attributes: attributes)
        XCTAssertEqual(try store.replica!.outboxEntries(limit: 100).count, before, "neither leaves an entry for the server")
        XCTAssertEqual(try store.enumerateItems(in: .rootContainer).map(\.filename), ["a.txt", "null"])
    }

    /// Against a server that keeps names, a replica's names go out in order with the rest, and a
    /// link waiting names its file by the number the server gives it.
    func testNamesLeaveEntriesThatFollowTheirFilesNumber() async throws {
        try makeReplica()
        store.replica!.noteServerSchema(ServerSchemaVersions.names)
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        let file = try await store.importDocument(at: try stage("a.txt", "one"), toParentItemIdentifier: .rootContainer)
        _ = try await store.linkItem(withIdentifier: file.identifier, toParentItemIdentifier: folder.identifier, name: "b.txt")
        var entries = try store.replica!.outboxEntries(limit: 100)
        XCTAssertEqual(summary(entries), ["create docs", "create a.txt", "link b.txt"])
        XCTAssertEqual(entries[2].details.linkOf, LocalStore.row(for: file.identifier))
        XCTAssertEqual(entries[2].parent, LocalStore.row(for: folder.identifier))

        try store.replica!.completeOutbox([OutboxCompletion(entry: entries[1], permanentRow: 40)])
        entries = try store.replica!.outboxEntries(limit: 100)
        XCTAssertEqual(entries.first { $0.kind == .link }?.details.linkOf, 40, "the waiting link names the file by its number")
        let renumbered = LocalStore.identifier(forRow: 40)
        XCTAssertEqual(try store.item(for: renumbered).linkCount, 2)
        _ = try await store.moveName(
            "b.txt", inParentItemIdentifier: folder.identifier, ofItemWithIdentifier: renumbered,
            toParentItemIdentifier: .rootContainer, newName: "c.txt")
        try await store.removeName("c.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: renumbered)
        entries = try store.replica!.outboxEntries(limit: 100)
        XCTAssertEqual(summary(entries), ["create docs", "link b.txt", "moveName c.txt", "unlink "])
        XCTAssertEqual(try store.item(for: renumbered).linkCount, 1)
    }

    /// A server of schema 12 keeps no trashed names: a replica refuses one of several names into the trash
    /// (rm removes the name), and sends nothing.
    func testAReplicaRefusesANameIntoTheTrash() async throws {
        try makeReplica()
        store.replica!.noteServerSchema(ServerSchemaVersions.names)
        let file = try await store.importDocument(at: try stage("a.txt", "one"), toParentItemIdentifier: .rootContainer)
        _ = try await store.linkItem(withIdentifier: file.identifier, toParentItemIdentifier: .rootContainer, name: "b.txt")
        await expectError(.notPermitted) {
            try await self.store.moveName(
                "b.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: file.identifier,
                toParentItemIdentifier: .trashContainer, newName: "b.txt")
        }
        XCTAssertEqual(summary(try store.replica!.outboxEntries(limit: 100)), ["create a.txt", "link b.txt"])
        XCTAssertEqual(try store.enumerateItems(in: .trashContainer).map(\.filename), [])
    }

    /// A server of schema 13 keeps a trashed name: its trash, restore and removal from the trash
    /// go out as the name's own entries.
    func testANameIntoTheTrashAndBackLeavesItsEntries() async throws {
        try makeReplica()
        store.replica!.noteServerSchema(ServerSchemaVersions.trashedNames)
        let file = try await store.importDocument(at: try stage("a.txt", "one"), toParentItemIdentifier: .rootContainer)
        _ = try await store.linkItem(withIdentifier: file.identifier, toParentItemIdentifier: .rootContainer, name: "b.txt")
        let trashed = try await store.moveName(
            "b.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: file.identifier,
            toParentItemIdentifier: .trashContainer, newName: "b.txt")
        XCTAssertEqual(store.trashOrigin(of: trashed.identifier)?.filename, "b.txt")
        _ = try await store.moveName(
            "b.txt", inParentItemIdentifier: .trashContainer, ofItemWithIdentifier: file.identifier,
            toParentItemIdentifier: .rootContainer, newName: "c.txt")
        _ = try await store.moveName(
            "c.txt", inParentItemIdentifier: .rootContainer, ofItemWithIdentifier: file.identifier,
            toParentItemIdentifier: .trashContainer, newName: "c.txt")
        try await store.removeName("c.txt", inParentItemIdentifier: .trashContainer, ofItemWithIdentifier: file.identifier)
        let entries = try store.replica!.outboxEntries(limit: 100)
        XCTAssertEqual(summary(entries), ["create a.txt", "link b.txt", "trash ", "untrash c.txt", "trash ", "unlink "])
        XCTAssertEqual(Set(entries.dropFirst().map(\.row)).count, 1, "all of them the name's")
        XCTAssertEqual(try store.item(for: file.identifier).linkCount, 1)
    }

    private func summary(_ entries: [OutboxEntry]) -> [String] {
        entries.map { "\($0.kind.rawValue) \($0.name ?? "")" }
    }

    func testActionsLeaveTheirChangesInOrder() async throws {
        try makeReplica()
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        XCTAssertTrue(LocalStore.isTemporary(folder.identifier), "a new item has a temporary identifier")
        let file = try await store.importDocument(at: try stage("a.txt", "one"), toParentItemIdentifier: folder.identifier)
        _ = try await store.renameItem(withIdentifier: file.identifier, toName: "b.txt")
        _ = try await store.modifyContents(ofItemWithIdentifier: file.identifier, from: try stage("new", "two two"))
        _ = try await store.setAttributes(ofItemWithIdentifier: file.identifier, changes: AttributeChanges(posixPermissions: 0o600))
        _ = try await store.reparentItem(withIdentifier: file.identifier, toParentItemWithIdentifier: .rootContainer, newName: nil, replacing: nil)
        _ = try await store.trashItem(withIdentifier: file.identifier)
        try await store.deleteItem(withIdentifier: file.identifier)

        let entries = try store.replica!.outboxEntries(limit: 100)
        XCTAssertEqual(summary(entries), ["create docs", "create a.txt", "move b.txt", "content ", "attributes ", "move b.txt", "trash ", "delete "])
        XCTAssertEqual(entries.map(\.seq), Array(entries[0].seq..<(entries[0].seq + Int64(entries.count))))
        XCTAssertEqual(Set(entries.map(\.id)).count, entries.count, "each entry has an operation id of its own")
        XCTAssertEqual(entries[1].parent, LocalStore.row(for: folder.identifier))
        XCTAssertEqual(entries[1].bytes, 3)
        XCTAssertEqual(entries[3].details.contentVersion, 2)
        XCTAssertEqual(entries[3].bytes, 7)
        XCTAssertEqual(entries[4].details.changes.posixPermissions, 0o600)
        XCTAssertNil(entries[4].details.changes.ownerID, "only what changed is sent")
        XCTAssertEqual(store.replica!.outboxCounts.pending, 8)
        XCTAssertEqual(store.replica!.outboxCounts.pendingBytes, 10)
        XCTAssertEqual(store.syncState(of: folder.identifier), "pending")
    }

    func testTheOutboxSurvivesACrashWithItsActions() async throws {
        try makeReplica()
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        _ = try await store.importDocument(at: try stage("a.txt"), toParentItemIdentifier: folder.identifier)
        // No close: the journal alone has the changes and their entries, as after kill -9.
        let abandoned = store!
        store = nil
        abandoned.abandonForTesting()
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(summary(try store.replica!.outboxEntries(limit: 10)), ["create docs", "create a.txt"])
        XCTAssertEqual(store.replica!.outboxCounts.pending, 2)
    }

    func testAPermanentIdentifierReplacesATemporaryOneEverywhere() async throws {
        try makeReplica()
        let changes = Mutex<[ProviderChange]>([])
        store.observeChanges { batch in changes.withLock { $0 += batch } }
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        let file = try await store.importDocument(at: try stage("a.txt", "bytes"), toParentItemIdentifier: folder.identifier)
        _ = try await store.renameItem(withIdentifier: file.identifier, toName: "b.txt")
        var entries = try store.replica!.outboxEntries(limit: 10)
        XCTAssertEqual(summary(entries), ["create docs", "create a.txt", "move b.txt"])

        // The server numbered the folder 7: the file's entries now name 7 as its parent.
        try store.replica!.completeOutbox([.init(entry: entries[0], permanentRow: 7)])
        XCTAssertEqual(changes.withLock { $0 }, [.identifierReplaced(old: folder.identifier, new: ItemIdentifier("7"))])
        entries = try store.replica!.outboxEntries(limit: 10)
        XCTAssertEqual(summary(entries), ["create a.txt", "move b.txt"])
        XCTAssertEqual(entries[0].parent, 7)
        XCTAssertEqual(entries[1].parent, 7)
        let renamed = try store.item(for: ItemIdentifier("7"))
        XCTAssertEqual(renamed.filename, "docs")
        XCTAssertEqual(try store.item(for: folder.identifier).identifier, ItemIdentifier("7"), "the old identifier still finds it")
        XCTAssertEqual(try store.item(for: file.identifier).parentIdentifier, ItemIdentifier("7"))
        XCTAssertEqual(try store.enumerateItems(in: ItemIdentifier("7")).map(\.filename), ["b.txt"])
        XCTAssertEqual(store.syncState(of: ItemIdentifier("7")), "uploaded")

        // The file is 8; its contents follow it, and the move entry names it.
        try store.replica!.completeOutbox([.init(entry: entries[0], permanentRow: 8)])
        entries = try store.replica!.outboxEntries(limit: 10)
        XCTAssertEqual(entries.map(\.row), [8])
        let fd = try store.openContents(of: ItemIdentifier("8"))
        var buffer = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(read(fd, &buffer, 16), 5)
        close(fd)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: storeURL.path + "/contents/\(file.identifier.rawValue)"),
            "no content file is left under the temporary row")
        XCTAssertEqual(store.syncState(of: ItemIdentifier("8")), "pending")
        // The server decided otherwise about the change (say a conflicted copy): the item's
        // server state is noted to be fetched again with the completion, and kept across a reopen.
        try store.replica!.completeOutbox([.init(entry: entries[0])], refetch: [8])
        XCTAssertEqual(store.syncState(of: ItemIdentifier("8")), "uploaded")
        XCTAssertEqual(store.replica!.outboxCounts.pending, 0)

        // Persisted: after a reopen the tree has the permanent identifiers only.
        try reopen()
        XCTAssertEqual(store.replica!.heldBackRows(), [8], "the fetch still to make")
        store.replica!.clearHeldBack([8])
        XCTAssertEqual(store.replica!.heldBackRows(), [])
        XCTAssertEqual(try store.childItem(named: "docs", in: .rootContainer).identifier, ItemIdentifier("7"))
        XCTAssertEqual(try store.childItem(named: "b.txt", in: ItemIdentifier("7")).identifier, ItemIdentifier("8"))
        XCTAssertTrue(try store.replica!.outboxEntries(limit: 10).isEmpty)
        // New items still get temporary rows, past the old ones.
        let next = try await store.createDirectory(withName: "more", inParentItemIdentifier: .rootContainer)
        XCTAssertTrue(LocalStore.isTemporary(next.identifier))
        XCTAssertGreaterThan(LocalStore.row(for: next.identifier)!, LocalStore.row(for: file.identifier)!)
    }

    func testItemsFromTheServerAreNotSentBack() async throws {
        try makeReplica()
        let content = store.stagingDirectory.appendingPathComponent("download")
        try Data("server".utf8).write(to: content)
        let (one, two) = (FileTime(totalNanoseconds: 1), FileTime(totalNanoseconds: 2))
        try store.replica!.addServerItem(
            .init(
                id: 5, parentID: 1, name: "shared", kind: .folder, creationTime: one, modificationTime: two,
                posixPermissions: 0o755))
        try store.replica!.addServerItem(
            .init(
                id: 6, parentID: 5, name: "s.txt", kind: .file, creationTime: one, modificationTime: two,
                posixPermissions: 0o644), contentFile: content.path)
        XCTAssertTrue(try store.replica!.outboxEntries(limit: 10).isEmpty)
        XCTAssertEqual(try store.childItem(named: "s.txt", in: ItemIdentifier("5")).documentSize, 6)
        XCTAssertEqual(store.syncState(of: ItemIdentifier("6")), "uploaded")
    }

    func testAStoreWithoutARemoteKeepsNoOutbox() async throws {
        try makeStore()
        let folder = try await store.createDirectory(withName: "docs", inParentItemIdentifier: .rootContainer)
        XCTAssertFalse(LocalStore.isTemporary(folder.identifier))
        XCTAssertNil(store.replica, "no replica side, so no outbox")
        XCTAssertNil(store.syncState(of: folder.identifier))
    }

    func testThePlannerSendsWhatChangedOnly() {
        let base = Item(
            identifier: ItemIdentifier("9"), parentIdentifier: .rootContainer, filename: "f", kind: .file,
            contentType: .data, documentSize: 3, creationDate: .distantPast, contentModificationDate: .distantPast, capabilities: .all)
        let old = Record(row: 9, parent: 1, item: base)
        var touchedFolder = Record(
            row: 10, parent: 1,
            item: Item(
                identifier: ItemIdentifier("10"), parentIdentifier: .rootContainer,
                filename: "d", kind: .folder, contentType: .folder, documentSize: 0,
                creationDate: .distantPast, contentModificationDate: .distantPast, capabilities: .all))
        let folderBefore = touchedFolder
        touchedFolder.item.modificationTime = FileTime.now()
        XCTAssertEqual(OutboxPlanner.plan(old: folderBefore, new: touchedFolder), [], "a folder's time moved by its children is not sent")
        XCTAssertEqual(OutboxPlanner.plan(old: old, new: old), [])
        var fifo = old
        fifo.item.kind = .fifo
        XCTAssertEqual(OutboxPlanner.plan(old: nil, new: fifo), [], "FIFOs and sockets stay local")
        var trashed = old
        trashed.parent = LocalStore.trashRow
        XCTAssertEqual(OutboxPlanner.plan(old: old, new: trashed).map(\.kind), [.trash])
        XCTAssertEqual(OutboxPlanner.plan(old: trashed, new: old).map(\.kind), [.untrash])
        var touched = old
        touched.item.modificationTime = FileTime(totalNanoseconds: 5)
        XCTAssertEqual(OutboxPlanner.plan(old: old, new: touched).map(\.details.changes.modificationTime?.totalNanoseconds), [5])
    }
}
