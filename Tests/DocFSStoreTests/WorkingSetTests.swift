import XCTest
import Foundation
import GRDB
import Logging
import DocFSProvider
import Synchronization
@testable import DocFSStore

/// The bounded working set: a store whose memory holds a few dozen items answers exactly as one
/// that holds everything, across journal batches, evictions, moves, deletes and reopenings; a
/// walk of a generated tree stays within the limit; an older store gains its folder index at open.
final class WorkingSetTests: StoreTestCase {
    var smallURL: URL { directory.appendingPathComponent("small") }

    private func stage(_ name: String, _ text: String, in target: LocalStore) throws -> URL {
        let dir = target.stagingDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// Every item below the root as one line each (path, identifier, kind, size, counts), in
    /// listing order, plus lookups by name and by identifier of each.
    private func snapshot(_ target: LocalStore) throws -> [String] {
        var lines: [String] = []
        var queue: [(ItemIdentifier, String)] = [(.rootContainer, ""), (.trashContainer, "/.Trash")]
        while let (folder, path) = queue.popLast() {
            for item in try target.enumerateItems(in: folder) {
                lines.append(
                    "\(path)/\(item.filename) \(item.identifier) \(item.kind) \(item.documentSize) \(item.childItemCount ?? -1) \(item.childFolderCount) \(item.itemVersion.metadataVersion)"
                )
                XCTAssertEqual(try target.childItem(named: item.filename, in: folder).identifier, item.identifier)
                XCTAssertEqual(try target.item(for: item.identifier).filename, item.filename)
                if item.kind == .folder { queue.append((item.identifier, "\(path)/\(item.filename)")) }
            }
        }
        return lines
    }

    func testASmallWorkingSetAnswersAsTheWholeTreeInMemory() async throws {
        try makeStore()
        try LocalStore.create(at: smallURL, layout: nil)
        var small: LocalStore! = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 64)
        defer { small?.close() }
        var generator = SeededGenerator(seed: 14)
        var folders: [ItemIdentifier] = [.rootContainer]
        var items: [ItemIdentifier] = []
        let names = ["a", "b", "c", "t", "e\u{301}", "\u{e9}", "long name.txt"]
        for step in 0..<3000 {
            let name = names[Int(generator.next() % UInt64(names.count))] + "\(generator.next() % 4)"
            let folder = folders[Int(generator.next() % UInt64(folders.count))]
            let choice = generator.next() % 9
            let other = (items + folders.dropFirst()).isEmpty ? nil : (items + folders.dropFirst()).randomElement(using: &generator)
            // The same action on both stores; both answer alike, refusals included.
            func both<T>(_ body: (LocalStore) async throws -> T) async -> (T?, T?) {
                var results: [T?] = []
                var errors: [String] = []
                for target in [store!, small!] {
                    do { results.append(try await body(target)); errors.append("") } catch {
                        results.append(nil)
                        errors.append("\((error as? ProviderError)?.code ?? .ioError)")
                    }
                }
                XCTAssertEqual(errors[0], errors[1], "step \(step)")
                return (results[0], results[1])
            }
            switch choice {
            case 0, 1:
                let (made, _) = await both { try await $0.createDirectory(withName: name, inParentItemIdentifier: folder) }
                if let made { folders.append(made.identifier) }
            case 2, 3:
                let text = String(repeating: "x", count: step % 9)
                let (made, _) = await both { target in
                    try await target.importDocument(at: try self.stage(name, text, in: target), toParentItemIdentifier: folder)
                }
                if let made { items.append(made.identifier) }
            case 4:
                guard let other else { continue }
                _ = await both { try await $0.renameItem(withIdentifier: other, toName: name) }
            case 5:
                guard let other else { continue }
                _ = await both { try await $0.reparentItem(withIdentifier: other, toParentItemWithIdentifier: folder, newName: nil, replacing: nil) }
            case 6:
                guard let item = items.randomElement(using: &generator) else { continue }
                let (done, _) = await both { try await $0.deleteItem(withIdentifier: item) }
                if done != nil { items.removeAll { $0 == item } }
            case 7:
                guard let other else { continue }
                _ = await both { try await $0.trashItem(withIdentifier: other) }
            default:
                guard let other else { continue }
                _ = await both { try await $0.setTagData(Data("t\(step)".utf8), forItemIdentifier: other) }
            }
            // Lookups of names that may or may not be there, in any folder.
            let probe = names[Int(generator.next() % UInt64(names.count))] + "\(generator.next() % 4)"
            XCTAssertEqual(
                (try? store.childItem(named: probe, in: folder))?.identifier,
                (try? small.childItem(named: probe, in: folder))?.identifier, "step \(step): lookup of \(probe)")
            let stats = small.cacheStatistics
            XCTAssertLessThanOrEqual(stats.records, stats.limit + stats.pinned + 2, "step \(step): the working set stays bounded")
            if step % 500 == 499 {
                XCTAssertEqual(try snapshot(small), try snapshot(store), "step \(step)")
            }
        }
        let expected = try snapshot(store)
        XCTAssertGreaterThan(expected.count, 100)
        XCTAssertEqual(try snapshot(small), expected)
        // Reopened (clean), and after a crash with changes only in the journal.
        small.close()
        small = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 64)
        XCTAssertEqual(try snapshot(small), expected, "after a clean close")
        for index in 0..<40 {
            _ = try await small.createDirectory(withName: "late\(index)", inParentItemIdentifier: .rootContainer)
            _ = try await store.createDirectory(withName: "late\(index)", inParentItemIdentifier: .rootContainer)
        }
        small.abandonForTesting()
        small = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 64)
        XCTAssertEqual(try snapshot(small), try snapshot(store), "after a crash")
    }

    /// A folder far larger than the working set: listed in name order, every name found, counts
    /// right, before and after its batch reaches SQLite and after a reopen.
    func testAFolderLargerThanTheWorkingSet() async throws {
        try LocalStore.create(at: smallURL, layout: nil)
        var small: LocalStore! = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 100)
        defer { small?.close() }
        let big = try await small.createDirectory(withName: "big", inParentItemIdentifier: .rootContainer)
        for index in 0..<2500 {
            if index % 10 == 0 {
                _ = try await small.createDirectory(withName: String(format: "n%05d", index), inParentItemIdentifier: big.identifier)
            } else {
                _ = try await small.importDocument(
                    at: try stage(String(format: "n%05d", index), "x", in: small), toParentItemIdentifier: big.identifier)
            }
        }
        func verify(_ when: String) throws {
            let folder = try small.item(for: big.identifier)
            XCTAssertEqual(folder.childItemCount, 2500, when)
            XCTAssertEqual(folder.childFolderCount, 250, when)
            let listed = try small.enumerateItems(in: big.identifier).map(\.filename)
            XCTAssertEqual(listed, (0..<2500).map { String(format: "n%05d", $0) }, when)
            for index in stride(from: 0, to: 2500, by: 7) {
                XCTAssertEqual(
                    try small.childItem(named: String(format: "n%05d", index), in: big.identifier).filename,
                    String(format: "n%05d", index), when)
            }
            XCTAssertThrowsError(try small.childItem(named: "n99999", in: big.identifier), when)
            XCTAssertLessThanOrEqual(small.cacheStatistics.records, 100 + small.cacheStatistics.pinned + 2, when)
        }
        try verify("with changes pinned")
        try small.synchronizeSync()
        try verify("after the batch landed")
        // Moves and deletes inside it, some still only in the journal.
        let moved = try small.childItem(named: "n00001", in: big.identifier)
        _ = try await small.renameItem(withIdentifier: moved.identifier, toName: "renamed")
        try await small.deleteItem(withIdentifier: try small.childItem(named: "n00002", in: big.identifier).identifier)
        XCTAssertEqual(try small.item(for: big.identifier).childItemCount, 2499)
        XCTAssertEqual(try small.childItem(named: "renamed", in: big.identifier).identifier, moved.identifier)
        XCTAssertThrowsError(try small.childItem(named: "n00001", in: big.identifier))
        XCTAssertThrowsError(try small.childItem(named: "n00002", in: big.identifier))
        XCTAssertEqual(try small.enumerateItems(in: big.identifier).count, 2499)
        small.close()
        small = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 100)
        XCTAssertEqual(try small.item(for: big.identifier).childItemCount, 2499)
        XCTAssertEqual(try small.item(for: big.identifier).childFolderCount, 250)
        XCTAssertEqual(try small.childItem(named: "renamed", in: big.identifier).identifier, moved.identifier)
    }

    /// A generated tree (LocalStore.populate) walked whole through a small working set: every
    /// item found, the working set back under its limit afterwards, `docfs check` consistent.
    func testAWalkOfAGeneratedTreeStaysWithinTheLimit() throws {
        try LocalStore.create(at: smallURL, layout: nil)
        let shape = ScaleShape(items: 20_000, bigFolderFiles: 3000, filesPerFolder: 300)
        let added = try LocalStore.populate(at: smallURL, shape: shape, logger: logger)
        XCTAssertGreaterThan(added, 19_000)
        let small = try LocalStore.open(at: smallURL, logger: logger, cacheItems: 1000)
        defer { small.close() }
        var seen = 0
        var queue: [ItemIdentifier] = [.rootContainer]
        while let folder = queue.popLast() {
            for item in try small.enumerateItems(in: folder) {
                seen += 1
                if item.kind == .folder {
                    XCTAssertEqual(try small.enumerateItems(in: item.identifier).count, item.childItemCount)
                    queue.append(item.identifier)
                }
            }
        }
        XCTAssertEqual(seen, added)
        let stats = small.cacheStatistics
        XCTAssertLessThanOrEqual(stats.records, 1000 + stats.pinned + 2)
        XCTAssertLessThanOrEqual(stats.indexEntries, 1000 + 3000)
        XCTAssertEqual(small.itemCount, added + 2)
        small.close()
        let report = try StoreChecker.check(at: smallURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
    }

    /// A store made before the folder index existed gets it at open, with one log line, and its
    /// folders count their subfolders as before.
    func testAStoreWithoutTheFolderIndexGetsItAtOpen() async throws {
        try makeStore()
        let parent = try await mkdir("parent")
        for index in 0..<5 { _ = try await mkdir("sub\(index)", in: parent.identifier) }
        _ = try await importFile("file.txt", into: parent.identifier)
        store.close()
        store = nil
        let queue = try DatabaseQueue(path: storeURL.path + "/" + LocalStore.databaseName)
        try queue.inDatabase { db in try db.execute(sql: "DROP INDEX item_folders") }
        try queue.close()
        let lines = LogLines()
        var logged = Logger(label: "docfs.store.tests") { _ in LogLines.Handler(lines: lines) }
        logged.logLevel = .info
        store = try LocalStore.open(at: storeURL, logger: logged)
        XCTAssertEqual(lines.all.filter { $0.contains("added the index of folders") }.count, 1, "\(lines.all)")
        XCTAssertEqual(try store.item(for: parent.identifier).childFolderCount, 5)
        XCTAssertEqual(try store.item(for: parent.identifier).childItemCount, 6)
        store.close()
        store = try LocalStore.open(at: storeURL, logger: logged)
        XCTAssertEqual(lines.all.filter { $0.contains("added the index of folders") }.count, 1, "made once")
    }
}

/// Log lines kept for a test to look at.
final class LogLines: @unchecked Sendable {
    private let lock = Mutex<Void>(())
    private var lines: [String] = []
    var all: [String] { lock.withLock { _ in lines } }
    func add(_ line: String) { lock.withLock { _ in lines.append(line) } }

    struct Handler: LogHandler {
        let lines: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(
            level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String,
            file: String, function: String, line: UInt
        ) {
            lines.add("\(message)")
        }
    }
}
