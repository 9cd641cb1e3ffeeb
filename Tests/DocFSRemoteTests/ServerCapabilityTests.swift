import DocFSProvider
import DocFSWire
import DocFSRemote
import Foundation
import XCTest

/// Schema version 4: the server keeps each item's capabilities from its own layout and refuses
/// the changes they do not allow, whoever asks. Against the PostgreSQL `make test` starts.
final class ServerCapabilityTests: XCTestCase {
    static let layout = #"""
        {"trash":false,
         "types":[{"identifier":"com.example.log","conformsTo":["public.plain-text"],"extensions":["log"],"viewOnly":true}],
         "folders":[{"path":"Frozen","contents":["read"]},
                    {"path":"Archive","capabilities":["read","enumerate","add"],"contents":["read","rename"]},
                    {"path":"Movable","contents":["read","reparent"]}]}
        """#

    let attributes = ReplicatedAttributes(
        ownerID: 1000, groupID: 1000, posixPermissions: 0o644,
        creationTime: FileTime(totalNanoseconds: 1),
        modificationTime: FileTime(totalNanoseconds: 1))

    func file(_ db: RemoteDatabase, _ parent: Int64, _ name: String, types: [String]? = nil) async throws -> Int64 {
        var attributes = self.attributes
        attributes.types = types
        return try await db.createItem(
            operationID: UUID(), parentID: parent, name: name, kind: .file, attributes: attributes,
            content: try await db.recordedContent(name, size: 1)
        ).itemID
    }

    func folder(_ db: RemoteDatabase, _ parent: Int64, _ name: String) async throws -> Int64 {
        try await db.createItem(operationID: UUID(), parentID: parent, name: name, kind: .folder, attributes: attributes).itemID
    }

    /// Asserts the change is refused by the server's layout with a message containing `words`.
    func assertRefused(_ words: String, _ change: () async throws -> Void, line: UInt = #line) async {
        do {
            try await change()
            XCTFail("the server allowed it (expected: \(words))", line: line)
        } catch RemoteError.refused(let message) {
            XCTAssertTrue(message.contains(words), message, line: line)
        } catch {
            XCTFail("\(error)", line: line)
        }
    }

    func testItemsKeepTheirFoldersWordsAndTheServerRefusesWhatTheyDoNotAllow() async throws {
        try await RemoteDatabaseTests.withDatabase(migrated: false) { db, url in
            // A server made by the previous docfs (version 3), with a tree in it already.
            let three = try await db.migrate(upTo: 3)
            XCTAssertEqual(three, 3)
            // Written as that docfs wrote its tables (schema 11's functions do not exist yet).
            let root = try await db.rootID()
            func make(_ parent: Int64, _ name: String, _ kind: String) async throws -> Int64 {
                let key = kind == "file" ? "'objects/\(UUID().uuidString.lowercased())'" : "NULL"
                try await RemoteDatabaseTests.adminQuery(
                    url,
                    """
                    INSERT INTO docfs_items (parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid,
                                             mode, content_key)
                    VALUES (\(parent), '\(name)', '\(kind)', \(kind == "file" ? 1 : 0), 1, 1, 1, 1, 1000, 1000, 420, \(key))
                    """)
                return try await db.children(of: parent).first { $0.name == name }!.id
            }
            try await RemoteDatabaseTests.adminQuery(url, "INSERT INTO docfs_layout (id, layout, updated_ns) VALUES (1, '\(Self.layout)'::jsonb, 1)")
            let frozen = try await make(root, "Frozen", "directory")
            let archive = try await make(root, "Archive", "directory")
            let old = try await make(frozen, "old.txt", "file")
            let inner = try await make(frozen, "inner", "directory")
            let deep = try await make(inner, "deep.txt", "file")
            // Version 4 gives what was there its words.
            let latest = try await db.migrate()
            XCTAssertEqual(latest, RemoteSchema.latest)
            await assertRefused("does not allow renaming /Frozen/old.txt") {
                _ = try await db.moveItem(operationID: UUID(), itemID: old, toParentID: frozen, name: "new.txt")
            }
            await assertRefused("does not allow writing /Frozen/inner/deep.txt") {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: deep, expectedVersion: 1,
                    content: try await db.recordedContent("x", size: 2),
                    modificationTime: FileTime(totalNanoseconds: 2))
            }
            await assertRefused("does not allow renaming /Archive") {
                _ = try await db.moveItem(operationID: UUID(), itemID: archive, toParentID: root, name: "Old")
            }
            await assertRefused("does not allow deleting /Archive") {
                _ = try await db.deleteItem(operationID: UUID(), itemID: archive)
            }

            // New items take their folder's words; a layout folder has its own.
            let paper = try await file(db, archive, "paper.txt")
            _ = try await db.moveItem(operationID: UUID(), itemID: paper, toParentID: archive, name: "renamed.txt")
            await assertRefused("does not allow moving to another folder /Archive/renamed.txt") {
                _ = try await db.moveItem(operationID: UUID(), itemID: paper, toParentID: root, name: "renamed.txt")
            }
            // A move the server suffixes (the name is taken there) is no rename.
            let movable = try await folder(db, root, "Movable")
            let mover = try await file(db, movable, "m.txt")
            _ = try await file(db, root, "m.txt")
            let moved = try await db.moveItem(operationID: UUID(), itemID: mover, toParentID: root, name: "m.txt")
            XCTAssertEqual(moved.name, "m 2.txt")
            await assertRefused("does not allow renaming /m 2.txt") {
                _ = try await db.moveItem(operationID: UUID(), itemID: mover, toParentID: root, name: "m.txt again")
            }
            await assertRefused("does not allow trashing /Archive/renamed.txt") {
                _ = try await db.trashItem(operationID: UUID(), itemID: paper)
            }
            await assertRefused("does not allow deleting /Frozen/old.txt") {
                _ = try await db.deleteItem(operationID: UUID(), itemID: old)
            }
            // The first contents of a file made empty are its creating program's: they go in
            // (the server decides; no client setting); a later edit does not.
            let fresh = try await db.createItem(
                operationID: UUID(), parentID: frozen, name: "fresh.txt", kind: .file,
                attributes: attributes
            ).itemID
            let w = try await db.recordedContent("w", size: 5)
            _ = try await db.newContentVersion(
                operationID: UUID(), itemID: fresh, expectedVersion: 1, content: w,
                modificationTime: FileTime(totalNanoseconds: 5))
            // The same object named again (versions sent together share one upload) writes nothing.
            _ = try await db.newContentVersion(
                operationID: UUID(), itemID: fresh, expectedVersion: 2, content: w,
                modificationTime: FileTime(totalNanoseconds: 6))
            await assertRefused("does not allow writing /Frozen/old.txt") {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: old, expectedVersion: 1,
                    content: try await db.recordedContent("o", size: 5),
                    modificationTime: FileTime(totalNanoseconds: 5))
            }
            await assertRefused("does not allow writing /Frozen/fresh.txt") {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: fresh, expectedVersion: 3,
                    content: try await db.recordedContent("v", size: 6),
                    modificationTime: FileTime(totalNanoseconds: 6))
            }
            // An item made where everything is allowed keeps that when it moves in (as on a replica).
            let free = try await file(db, root, "free.txt")
            _ = try await db.moveItem(operationID: UUID(), itemID: free, toParentID: frozen, name: "free.txt")
            _ = try await db.moveItem(operationID: UUID(), itemID: free, toParentID: frozen, name: "still free.txt")
            _ = try await db.newContentVersion(
                operationID: UUID(), itemID: free, expectedVersion: 1,
                content: try await db.recordedContent("y", size: 3), modificationTime: FileTime(totalNanoseconds: 3))
            _ = try await db.deleteItem(operationID: UUID(), itemID: free)

            // A view-only type is never written, wherever it is.
            let log = try await file(db, root, "run.log", types: ["com.example.log", "public.plain-text", "public.data"])
            await assertRefused("does not allow writing (com.example.log is view-only) /run.log") {
                _ = try await db.newContentVersion(
                    operationID: UUID(), itemID: log, expectedVersion: 1,
                    content: try await db.recordedContent("z", size: 4),
                    modificationTime: FileTime(totalNanoseconds: 4))
            }
            _ = try await db.moveItem(operationID: UUID(), itemID: log, toParentID: root, name: "renamed.log")
            _ = try await db.deleteItem(operationID: UUID(), itemID: log)

            // What was refused left nothing behind.
            let kept = try await db.item(old)
            XCTAssertEqual(kept?.name, "old.txt")
            XCTAssertEqual(kept?.deleted, false)
            let unwritten = try await db.item(deep)
            XCTAssertEqual(unwritten?.contentVersion, 1)
            let unmoved = try await db.item(paper)
            XCTAssertEqual(unmoved?.parentID, archive)
        }
    }

    func testMIMEWordsAreCheckedOnceAReplicaResolvedThem() async throws {
        try await RemoteDatabaseTests.withDatabase { db, url in
            _ = try await db.setLayout(
                operationID: UUID(),
                json: #"""
                    {"trash":false,"types":[],"folders":[{"path":"Pictures","allowedContentTypes":["image/png"]},
                                                         {"path":"Odd","allowedContentTypes":["image/x-nobody-resolved"]}]}
                    """#)
            let root = try await db.rootID()
            let pictures = try await db.createItem(
                operationID: UUID(), parentID: root, name: "Pictures", kind: .folder,
                attributes: attributes
            ).itemID
            let odd = try await db.createItem(
                operationID: UUID(), parentID: root, name: "Odd", kind: .folder,
                attributes: attributes
            ).itemID
            let text = ["public.plain-text", "public.text", "public.data"]
            // Before a replica resolved the word, the server leaves it to the replicas.
            _ = try await file(db, pictures, "early.txt", types: text)
            try await db.setLayoutMIMETypes(json: #"{"image/png":"public.png"}"#)
            await assertRefused("/Pictures takes only public.png (not public.plain-text)") {
                _ = try await self.file(db, pictures, "notes.txt", types: text)
            }
            _ = try await file(db, pictures, "photo.png", types: ["public.png", "public.image", "public.data"])
            _ = try await file(db, odd, "anything.txt", types: text)
        }
    }
}
