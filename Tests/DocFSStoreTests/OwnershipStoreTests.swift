import XCTest
import Foundation
import GRDB
import DocFSProvider
@testable import DocFSStore

/// Owners, groups, modes and exact times: stored, kept through reopen and crash, and a store of
/// the format before them migrated once.
final class OwnershipStoreTests: StoreTestCase {
    let odd = FileTime(seconds: 1_588_723_200, nanoseconds: 123_456_789)
    let early = FileTime(seconds: -86_400 * 365, nanoseconds: 1)

    private func check(
        _ identifier: ItemIdentifier, owner: UInt32, group: UInt32, mode: UInt16, modified: FileTime? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let item = try store.item(for: identifier)
        XCTAssertEqual(item.ownerID, owner, file: file, line: line)
        XCTAssertEqual(item.groupID, group, file: file, line: line)
        XCTAssertEqual(item.posixPermissions, mode, file: file, line: line)
        if let modified { XCTAssertEqual(item.modificationTime, modified, file: file, line: line) }
    }

    func testNewItemsTakeTheirAttributesAndKeepThemThroughReopenAndCrash() async throws {
        try makeStore()
        let folder = try await store.createDirectory(
            withName: "shared", inParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: 1234, groupID: 5678, posixPermissions: 0o2770))
        try check(folder.identifier, owner: 1234, group: 5678, mode: 0o2770)
        let staged = try stage("sealed-report", "text")
        let scoped = try SecurityScopedURL(sealed: staged.path, name: "report.txt", in: store.stagingDirectory)
        defer { scoped.finish() }
        let file = try await store.importDocument(
            from: scoped, toParentItemIdentifier: folder.identifier,
            attributes: NewItemAttributes(ownerID: 42, groupID: 43, posixPermissions: 0o4640, modificationTime: odd, accessTime: early))
        try check(file.identifier, owner: 42, group: 43, mode: 0o4640, modified: odd)
        XCTAssertEqual(try store.item(for: file.identifier).accessTime, early)
        let fifo = try await store.createSpecialItem(
            withName: "pipe", kind: .fifo, inParentItemIdentifier: folder.identifier,
            attributes: NewItemAttributes(ownerID: 7, groupID: 8, posixPermissions: 0o620))
        XCTAssertEqual(fifo.kind, .fifo)

        try reopen()
        try check(folder.identifier, owner: 1234, group: 5678, mode: 0o2770)
        try check(file.identifier, owner: 42, group: 43, mode: 0o4640, modified: odd)
        XCTAssertEqual(try store.item(for: fifo.identifier).kind, .fifo)

        // Changes after the last flush live only in the journal: a crash keeps them.
        let before = try store.item(for: file.identifier).changeTime
        waitForTheClock(toPass: before)
        _ = try await store.setAttributes(
            ofItemWithIdentifier: file.identifier,
            changes: AttributeChanges(posixPermissions: 0o600, ownerID: 9, groupID: 10, modificationTime: early))
        let after = try store.item(for: file.identifier)
        XCTAssertGreaterThan(after.changeTime, before, "ctime moves on a change of metadata")
        store.abandonForTesting()
        store = nil
        store = try LocalStore.open(at: storeURL, logger: logger)
        try check(file.identifier, owner: 9, group: 10, mode: 0o600, modified: early)
        XCTAssertEqual(try store.item(for: file.identifier).changeTime, after.changeTime)
    }

    /// Times come from the kernel's coarse clock (a tick of a few milliseconds, as ext4's): a
    /// test that wants a later time waits until the clock has moved past `time`.
    func waitForTheClock(toPass time: FileTime, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(2)
        while FileTime.now() <= time, Date() < deadline { usleep(500) } // the poll interval, within the deadline: the coarse clock ticks every few ms
        XCTAssertGreaterThan(FileTime.now(), time, "the clock did not move in 2 s", file: file, line: line)
    }

    func testRenamesAndNewEntriesMoveChangeTimes() async throws {
        try makeStore()
        let folder = try await mkdir("d")
        let item = try await importFile("a.txt", into: folder.identifier)
        let folderBefore = try store.item(for: folder.identifier)
        waitForTheClock(toPass: max(folderBefore.changeTime, item.changeTime))
        let renamed = try await store.renameItem(withIdentifier: item.identifier, toName: "b.txt")
        XCTAssertGreaterThan(renamed.changeTime, item.changeTime)
        let folderAfter = try store.item(for: folder.identifier)
        XCTAssertGreaterThan(folderAfter.modificationTime, folderBefore.modificationTime)
        XCTAssertGreaterThan(folderAfter.changeTime, folderBefore.changeTime)
    }

    func testAFormat1StoreIsMigratedOnceWithExactTimesAndAnOwner() async throws {
        try makeStore()
        let item = try await importFile("old.txt", "old")
        store.close()
        store = nil
        // Put the database back into format 1: REAL seconds, no owners or change times.
        let queue = try DatabaseQueue(path: storeURL.path + "/" + LocalStore.databaseName)
        try queue.inDatabase { db in
            try db.execute(sql: "ALTER TABLE item RENAME TO item_new")
            try db.execute(sql: "DROP INDEX item_parent_name")
            try db.execute(
                sql: """
                    CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER, name TEXT NOT NULL,
                        kind INTEGER NOT NULL, contentType TEXT NOT NULL, size INTEGER NOT NULL DEFAULT 0,
                        created REAL NOT NULL, modified REAL NOT NULL, lastUsed REAL, tagData BLOB, favoriteRank INTEGER,
                        caps INTEGER NOT NULL, contentsCaps INTEGER, contentVersion INTEGER NOT NULL DEFAULT 1,
                        metadataVersion INTEGER NOT NULL DEFAULT 1, symlinkTarget TEXT, perms INTEGER NOT NULL,
                        trashedFrom INTEGER, trashedName TEXT);
                    CREATE UNIQUE INDEX item_parent_name ON item(parent, name);
                    INSERT INTO item SELECT id, parent, name, kind, contentType, size, 1588723200.5, 1588723200.25, NULL,
                        tagData, favoriteRank, caps, contentsCaps, contentVersion, metadataVersion, symlinkTarget, perms,
                        trashedFrom, trashedName FROM item_new;
                    DROP TABLE item_new;
                    UPDATE meta SET value = '1' WHERE key = 'format';
                    """)
        }
        try queue.close()

        store = try LocalStore.open(at: storeURL, logger: logger)
        let migrated = try store.item(for: item.identifier)
        XCTAssertEqual(migrated.modificationTime, FileTime(seconds: 1_588_723_200, nanoseconds: 250_000_000))
        XCTAssertEqual(migrated.ownerID, getuid())
        XCTAssertEqual(try contents(of: item.identifier), "old")
        store.close()
        store = nil
        let check = try DatabaseQueue(path: storeURL.path + "/" + LocalStore.databaseName)
        let format = try check.inDatabase { db in try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'format'") }
        try check.close()
        XCTAssertEqual(format, LocalStore.formatVersion)
        store = try LocalStore.open(at: storeURL, logger: logger)
        // New items after the migration get fresh identifiers and store as usual.
        let fresh = try await importFile("new.txt")
        XCTAssertNotEqual(fresh.identifier, item.identifier)
        try reopen()
        XCTAssertEqual(try names(), ["new.txt", "old.txt"])
    }
}
