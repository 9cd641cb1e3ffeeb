import XCTest
import Foundation
import GRDB
import DocFSProvider
@testable import DocFSStore

/// The journal: what an action appended survives a crash, batches reach SQLite, and recovery
/// neither re-applies an applied batch nor trusts a torn entry.
final class StoreJournalTests: StoreTestCase {
    var journalPath: String { storeURL.appendingPathComponent(StoreJournal.fileName).path }

    /// Rows as SQLite holds them (name by id), read with the store closed.
    func storedNames() throws -> [Int64: String] {
        let queue = try DatabaseQueue(path: storeURL.appendingPathComponent(LocalStore.databaseName).path)
        defer { try? queue.close() }
        return try queue.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, name FROM item").map { ($0[0] as Int64, $0[1] as String) })
        }
    }

    func testActionsReachSQLiteInBatchesAndAtClose() async throws {
        try makeStore()
        let folder = try await mkdir("batch")
        // Not yet in SQLite: one action is one journal entry.
        let before = try Data(contentsOf: URL(fileURLWithPath: journalPath)).count
        XCTAssertGreaterThan(before, StoreJournal.headerSize)
        // Enough changes for a batch (two per create: the folder and its parent).
        for i in 0..<(StoreJournal.flushChanges / 2 + 1) {
            _ = try await mkdir("d\(i)", in: folder.identifier)
        }
        let afterBatch = try Data(contentsOf: URL(fileURLWithPath: journalPath)).count
        XCTAssertLessThan(afterBatch, before * 4, "the journal was emptied by a batch commit")
        try reopen()
        XCTAssertEqual(try names(in: folder.identifier).count, StoreJournal.flushChanges / 2 + 1)
        store.close()
        let rows = try storedNames()
        XCTAssertTrue(rows.values.contains("batch"))
        XCTAssertEqual(rows.values.filter { $0.hasPrefix("d") }.count, StoreJournal.flushChanges / 2 + 1)
        store = try LocalStore.open(at: storeURL, logger: logger)
    }

    func testACrashKeepsEveryAnsweredActionAndCheckAppliesThem() async throws {
        try makeStore()
        let a = try await mkdir("a")
        let file = try await importFile("f.txt", "contents", into: a.identifier)
        _ = try await store.renameItem(withIdentifier: a.identifier, toName: "renamed")
        let gone = try await importFile("gone.txt")
        try await store.deleteItem(withIdentifier: gone.identifier)
        store.abandonForTesting()
        store = nil
        XCTAssertNil(try storedNames()[Int64(a.identifier.rawValue)!], "only in the journal before recovery")

        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
        XCTAssertEqual(report.files, 1)
        let rows = try storedNames()
        XCTAssertEqual(rows[Int64(a.identifier.rawValue)!], "renamed", "check applied the journal")
        XCTAssertNil(rows[Int64(gone.identifier.rawValue)!])

        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try names(), ["renamed"])
        XCTAssertEqual(try contents(of: file.identifier), "contents")
    }

    func testATornLastEntryIsDiscardedAndTheRestApplied() async throws {
        try makeStore()
        _ = try await mkdir("kept")
        store.abandonForTesting()
        store = nil
        // Half an entry, as a crash in the middle of a write could leave it.
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: journalPath))
        handle.seekToEndOfFile()
        handle.write(Data([40, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0x10, 19]))
        try handle.close()
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try names(), ["kept"])
        _ = try await mkdir("more")
        try reopen()
        XCTAssertEqual(try names(), ["kept", "more"])
    }

    func testAnAppliedJournalIsNotAppliedAgain() async throws {
        try makeStore()
        let first = try await importFile("a.txt", "one")
        // This journal creates "a.txt" as the first item; keep a copy of it.
        let stale = try Data(contentsOf: URL(fileURLWithPath: journalPath))
        try await store.deleteItem(withIdentifier: first.identifier)
        let second = try await importFile("a.txt", "two")
        try await store.synchronize()  // the batch is in SQLite now, under the copy's generation
        store.abandonForTesting()
        store = nil
        try stale.write(to: URL(fileURLWithPath: journalPath))
        // Replaying it would insert a second "a.txt" beside the live one.
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try store.enumerateItems(in: .rootContainer).map(\.identifier), [second.identifier])
        XCTAssertEqual(try contents(of: second.identifier), "two")
    }

    func testChangesThatCannotBeAppliedStopTheOpenUntilCheckRepairSetsThemAside() async throws {
        try makeStore()
        let taken = try await mkdir("taken")
        store.close()
        store = nil
        // A journal (of the next generation) that names a second "taken" in the root.
        let queue = try DatabaseQueue(path: storeURL.appendingPathComponent(LocalStore.databaseName).path)
        let committed = try queue.inDatabase { db in
            UInt64(try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [StoreJournal.generationKey]) ?? "0") ?? 0
        }
        try queue.close()
        do {
            let journal = try StoreJournal(storePath: storeURL.path, generation: committed + 1)
            var clash = Record(row: 99, parent: LocalStore.rootRow, item: Item(
                identifier: ItemIdentifier("99"), parentIdentifier: .rootContainer, filename: "taken", kind: .folder,
                contentType: .folder, creationDate: Date(), contentModificationDate: Date(), capabilities: .all))
            clash.contentsPolicy = nil
            try journal.append([.upsert(Schema.values(of: clash))])
        }
        XCTAssertThrowsError(try LocalStore.open(at: storeURL, logger: logger)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .corruptFile, "\(error)")
            XCTAssertTrue("\(error)".contains("check --repair"), "\(error)")
        }
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(found.remaining.first?.kind, .journal, "\(found.problems)")
        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)")
        XCTAssertTrue(repaired.repairs.contains { $0.contains("set the journal aside") }, "\(repaired.repairs)")
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try store.enumerateItems(in: .rootContainer).map(\.identifier), [taken.identifier])
    }
}
