import XCTest
import Foundation
import DocFSProvider
import GRDB
@testable import DocFSStore
#if canImport(Glibc)
    import Glibc
#endif

/// `docfs check`: finds what a crash or a hand edit leaves, mends it, and refuses a mounted store.
final class StoreCheckTests: StoreTestCase {
    var contentsDir: URL { storeURL.appendingPathComponent("contents") }

    /// Runs SQL on the closed store, as a hand edit (or a bug) would.
    func damage(_ sql: String, _ arguments: StatementArguments = []) throws {
        let queue = try DatabaseQueue(path: storeURL.appendingPathComponent("store.sqlite").path)
        try queue.inDatabase { db in try db.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    func kinds(_ report: StoreCheckReport) -> [StoreCheckReport.Kind] { report.problems.map(\.kind) }

    /// A small tree, closed: /a.txt, /d/b.txt, /d/e/, /link → a.txt, with an attribute on b.txt.
    func makeTree() async throws -> (a: Item, d: Item, b: Item) {
        try makeStore()
        let a = try await importFile("a.txt", "alpha")
        let d = try await mkdir("d")
        let b = try await importFile("b.txt", "bravo!", into: d.identifier)
        _ = try await mkdir("e", in: d.identifier)
        _ = try await store.createSymbolicLink(withName: "link", target: "a.txt", inParentItemIdentifier: .rootContainer)
        try await store.setExtendedAttribute(named: "user.note", to: Data("n".utf8), mode: .upsert, forItemIdentifier: b.identifier)
        store.close()
        store = nil
        return (a, d, b)
    }

    func testFreshAndUsedStoresAreConsistent() async throws {
        try LocalStore.create(at: storeURL, layout: nil)
        let fresh = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(fresh.isConsistent, "\(fresh.problems)")
        XCTAssertEqual(fresh.folders, 2)
        try FileManager.default.removeItem(at: storeURL)
        _ = try await makeTree()
        let used = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(used.isConsistent, "\(used.problems)")
        XCTAssertEqual([used.folders, used.files, used.symlinks, used.contentFiles], [4, 2, 1, 2])
        XCTAssertEqual(used.contentBytes, 11)
    }

    func testAnOpenStoreIsRefused() async throws {
        try makeStore()
        XCTAssertThrowsError(try StoreChecker.check(at: storeURL, repair: true)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .busy, "\(error)")
            XCTAssertTrue("\(error)".contains("pid \(getpid())"), "\(error)")
        }
    }

    func testMissingOrForeignOrCorruptStoresAreRefusedWithoutChange() throws {
        XCTAssertThrowsError(try StoreChecker.check(at: storeURL, repair: false)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .noSuchItem, "\(error)")
        }
        try LocalStore.create(at: storeURL, layout: nil)
        let db = storeURL.appendingPathComponent("store.sqlite")
        let original = try Data(contentsOf: db)
        let half = original.prefix(original.count / 2)
        try Data(half).write(to: db)
        let garbage = Data(repeating: 0x5A, count: 8192)
        for bytes in [Data(half), garbage] {
            try bytes.write(to: db)
            XCTAssertThrowsError(try StoreChecker.check(at: storeURL, repair: true)) { error in
                XCTAssertEqual((error as? ProviderError)?.code, .corruptFile, "\(error)")
            }
            XCTAssertEqual(try Data(contentsOf: db), bytes, "check must not change a database it cannot read")
        }
    }

    func testCrashLeftoversAreFoundAndRepaired() async throws {
        let (a, _, b) = try await makeTree()
        // An import interrupted between the rename into contents/ and the commit; a modify whose
        // rename landed without its row; a staged half-copy; an import slot (empty: harmless).
        try Data("orphan".utf8).write(to: contentsDir.appendingPathComponent("4242"))
        try Data("junk".utf8).write(to: contentsDir.appendingPathComponent("junk.tmp"))
        try Data("much longer".utf8).write(to: contentsDir.appendingPathComponent(a.identifier.rawValue))
        let staging = storeURL.appendingPathComponent("staging")
        try Data("half".utf8).write(to: staging.appendingPathComponent("w-1-1.part"))
        try FileManager.default.createDirectory(at: staging.appendingPathComponent("ready"), withIntermediateDirectories: true)
        try Data().write(to: staging.appendingPathComponent("ready/empty-1"))
        try FileManager.default.createDirectory(at: staging.appendingPathComponent("slot-1-1"), withIntermediateDirectories: true)
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertFalse(found.isConsistent)
        XCTAssertEqual(Set(kinds(found)), [.orphanContents, .sizeMismatch, .stagedLeftover], "\(found.problems)")
        XCTAssertEqual(kinds(found).count, 4, "\(found.problems)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: contentsDir.appendingPathComponent("4242").path), "check alone changes nothing")

        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)")
        XCTAssertEqual(repaired.problems.count, 4)
        XCTAssertTrue(repaired.repairs.contains { $0.contains("contents/4242") }, "\(repaired.repairs)")
        XCTAssertTrue(repaired.repairs.contains { $0.contains("size of item \(a.identifier.rawValue)") }, "\(repaired.repairs)")
        XCTAssertEqual(
            Set(try FileManager.default.contentsOfDirectory(atPath: contentsDir.path)),
            [a.identifier.rawValue, b.identifier.rawValue])
        XCTAssertTrue(try StoreChecker.check(at: storeURL, repair: false).isConsistent)

        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try store.item(for: a.identifier).documentSize, 11)
        XCTAssertEqual(try contents(of: a.identifier), "much longer")
        XCTAssertEqual(try contents(of: b.identifier), "bravo!")
    }

    func testItemsWithoutAFolderGoToLostAndFound() async throws {
        let (a, d, b) = try await makeTree()
        // Delete the folder row behind its children's back, and hang a.txt under a file.
        try damage("DELETE FROM item WHERE id = ?", [Int64(d.identifier.rawValue)!])
        try damage(
            "INSERT INTO item (id, parent, name, kind, contentType, size, created, modified, caps, perms) VALUES (900, ?, 'under-a-file', 1, 'public.folder', 0, 0, 0, 0, 493)",
            [Int64(a.identifier.rawValue)!])
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(Set(kinds(found)), [.missingParent, .parentNotFolder], "\(found.problems)")
        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)\n\(repaired.repairs)")
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try names(), ["a.txt", "link", "lost+found"])
        let lost = try store.childItem(named: "lost+found", in: .rootContainer)
        XCTAssertEqual(try names(in: lost.identifier), ["b.txt", "e", "under-a-file"])
        XCTAssertEqual(try contents(of: b.identifier), "bravo!")
        // New identifiers do not collide with the repaired ones.
        let fresh = try await importFile("new.txt", "new")
        XCTAssertGreaterThan(Int(fresh.identifier.rawValue)!, 900)
    }

    func testDanglingRowsAndCyclesAreRemovedOrRescued() async throws {
        let (a, _, b) = try await makeTree()
        try FileManager.default.removeItem(at: contentsDir.appendingPathComponent(b.identifier.rawValue))
        try damage("UPDATE item SET symlinkTarget = NULL WHERE name = 'link'")
        // Two folders that are each other's parent.
        try damage(
            "INSERT INTO item (id, parent, name, kind, contentType, size, created, modified, caps, perms) VALUES (800, 801, 'x', 1, 'public.folder', 0, 0, 0, 0, 493)"
        )
        try damage(
            "INSERT INTO item (id, parent, name, kind, contentType, size, created, modified, caps, perms) VALUES (801, 800, 'y', 1, 'public.folder', 0, 0, 0, 0, 493)"
        )
        try damage("UPDATE sqlite_sequence SET seq = 801 WHERE name = 'item'")
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(Set(kinds(found)), [.missingContents, .danglingLink, .unreachable], "\(found.problems)")
        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)\n\(repaired.repairs)")
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try names(), ["a.txt", "d", "lost+found"])
        XCTAssertThrowsError(try store.item(for: b.identifier), "a file whose contents are gone is removed")
        XCTAssertEqual(store.storedAttributeCount, 0, "its attributes went with it")
        let lost = try store.childItem(named: "lost+found", in: .rootContainer)
        XCTAssertEqual(try names(in: lost.identifier).count, 1, "one of the cycle is rescued, the other stays inside it")
        XCTAssertEqual(try contents(of: a.identifier), "alpha")
    }

    func testDanglingAttributesAndBadNames() async throws {
        _ = try await makeTree()
        try damage("INSERT INTO xattr (item, name, value) VALUES (777, 'user.x', x'00')")
        try damage("UPDATE item SET name = 'a/b' WHERE name = 'a.txt'")
        let found = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(Set(kinds(found)), [.danglingAttribute, .invalidName], "\(found.problems)")
        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)")
        store = try LocalStore.open(at: storeURL, logger: logger)
        let after = try names()
        XCTAssertTrue(after.contains { $0.hasPrefix("item-") }, "\(after)")
    }

    func testAKilledProcessLeavesAConsistentStore() async throws {
        try makeStore()
        for i in 0..<20 { try await importFile("f\(i).txt", String(repeating: "x", count: i)) }
        store.abandonForTesting()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
        XCTAssertEqual(report.files, 20)
    }

    func testFaultSpecificationsParse() {
        XCTAssertNil(FaultInjection.parse(nil))
        XCTAssertNil(FaultInjection.parse(""))
        XCTAssertNil(FaultInjection.parse("import-commit"))
        XCTAssertNil(FaultInjection.parse("nowhere:abort"))
        XCTAssertEqual(FaultInjection.parse("import-commit:abort")?.point, .importCommit)
        XCTAssertEqual(FaultInjection.parse("import-commit:abort")?.hit, 1)
        XCTAssertEqual(FaultInjection.parse("modify-commit:abort@3")?.hit, 3)
        XCTAssertEqual(FaultInjection.parse("upload-part:abort@2")?.point, .uploadPart)
        XCTAssertEqual(FaultInjection.parse("upload-done:wait")?.waits, true)
        XCTAssertNil(FaultInjection.armed, "the unit tests run without DOCFS_FAULT")
    }
}
