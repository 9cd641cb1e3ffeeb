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
        try await store.synchronize() // the batch is in SQLite now, under the copy's generation
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
            var clash = Record(
                row: 99, parent: LocalStore.rootRow,
                item: Item(
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

    func testRepeatedUpsertsOfARowThatStaysInPlaceAreFoldedAndMovesAreKept() {
        func row(_ id: Int64, _ parent: Int64, _ name: String, _ size: Int64) -> StoreJournal.Change {
            .upsert([id.databaseValue, parent.databaseValue, name.databaseValue, size.databaseValue])
        }
        func describe(_ changes: [StoreJournal.Change]) -> [String] {
            changes.map { change in
                switch change {
                case .delete(let id): return "-\(id)"
                case .upsert(let v): return "\(v[0]):\(v[1]):\(v[2]):\(v[3])"
                case .outbox(let v): return "outbox \(v[0])"
                }
            }
        }
        // Folder 5 is bumped by each create inside it: written once, first place, last values.
        let creates: [StoreJournal.Change] = [row(10, 5, "a", 0), row(5, 1, "dir", 1), row(11, 5, "b", 0), row(5, 1, "dir", 2)]
        XCTAssertEqual(describe(StoreJournal.coalesced(creates)), ["10:5:\"a\":0", "5:1:\"dir\":2", "11:5:\"b\":0"])
        // A swap through a temporary name: every step stays (folding would collide on "a").
        let swap: [StoreJournal.Change] = [row(1, 0, "t", 0), row(2, 0, "a", 0), row(1, 0, "b", 0)]
        XCTAssertEqual(describe(StoreJournal.coalesced(swap)), describe(swap))
        // A deleted row keeps its steps; NFC and NFD spellings are different places.
        let other: [StoreJournal.Change] = [row(3, 0, "x", 0), .delete(3), row(4, 0, "\u{e9}", 0), row(4, 0, "e\u{301}", 0)]
        XCTAssertEqual(describe(StoreJournal.coalesced(other)), describe(other))
    }

    /// Random actions across many batches; SQLite must end up holding exactly the tree in memory,
    /// after a clean close and after a crash.
    func testRandomActionsLeaveSQLiteEqualToTheTreeInMemory() async throws {
        try makeStore()
        var generator = SeededGenerator(seed: 7)
        var folders: [ItemIdentifier] = [.rootContainer]
        var items: [ItemIdentifier] = []
        func snapshot() throws -> [String] {
            var lines: [String] = []
            var queue: [(ItemIdentifier, String)] = [(.rootContainer, "")]
            while let (folder, path) = queue.popLast() {
                for item in try store.enumerateItems(in: folder) {
                    lines.append("\(path)/\(item.filename) \(item.identifier) \(item.kind) \(item.documentSize) \(item.childItemCount ?? -1)")
                    if item.kind == .folder { queue.append((item.identifier, "\(path)/\(item.filename)")) }
                }
            }
            return lines.sorted()
        }
        for step in 0..<2500 {
            let names = ["a", "b", "c", "t", "e\u{301}", "\u{e9}"]
            let name = names[Int(generator.next() % UInt64(names.count))]
            let folder = folders[Int(generator.next() % UInt64(folders.count))]
            do {
                switch generator.next() % 6 {
                case 0:
                    folders.append(try await mkdir(name + "\(step % 3)", in: folder).identifier)
                case 1:
                    items.append(try await importFile(name, String(repeating: "x", count: step % 7), into: folder).identifier)
                case 2, 3:
                    guard let item = (items + folders.dropFirst()).randomElement(using: &generator) else { continue }
                    _ = try await store.renameItem(withIdentifier: item, toName: name)
                case 4:
                    guard let item = items.randomElement(using: &generator) else { continue }
                    _ = try await store.reparentItem(withIdentifier: item, toParentItemWithIdentifier: folder, newName: nil, replacing: nil)
                default:
                    guard let item = items.randomElement(using: &generator) else { continue }
                    try await store.deleteItem(withIdentifier: item)
                    items.removeAll { $0 == item }
                }
            } catch is ProviderError {
                // Collisions and the like are refused whole; the model does not need to predict them.
            }
        }
        let expected = try snapshot()
        XCTAssertGreaterThan(expected.count, 50)
        try reopen()
        XCTAssertEqual(try snapshot(), expected, "after a clean close")
        // More actions, then a crash: the journal brings SQLite to the same tree.
        for i in 0..<300 { _ = try await mkdir("late\(i)") }
        let late = try snapshot()
        store.abandonForTesting()
        store = nil
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try snapshot(), late, "after a crash")
    }
}

/// A small deterministic generator (SplitMix64), so a failure can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
