import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore
#if canImport(Glibc)
    import Glibc
#endif

/// `ContentSegments` on its own: append and read back, the torn tail of an append a crash
/// interrupted, the newest entry of a row, compaction, verification.
final class ContentSegmentTests: XCTestCase {
    var directory: String!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-segments-\(UUID().uuidString)").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func segmentFiles() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    func testAppendReadBackAndReopen() throws {
        let segments = try ContentSegments(directory: directory)
        try segments.scan()
        try segments.append(10, bytes("alpha"))
        try segments.append(11, bytes(""))
        try segments.append(12, [UInt8](repeating: 7, count: 100_000))
        XCTAssertEqual(try segments.read(10), bytes("alpha"))
        XCTAssertEqual(try segments.read(11), [])
        XCTAssertEqual(try segments.read(12)?.count, 100_000)
        XCTAssertNil(try segments.read(13))
        try segments.synchronize()
        XCTAssertEqual(try segmentFiles(), ["1"], "one segment holds them all")

        let reopened = try ContentSegments(directory: directory)
        XCTAssertEqual(try reopened.scan(), [])
        XCTAssertEqual(try reopened.read(10), bytes("alpha"))
        XCTAssertEqual(try reopened.read(12), [UInt8](repeating: 7, count: 100_000))
        // Appending after a reopen continues the file and the sequence.
        try reopened.append(10, bytes("alpha, again"))
        let third = try ContentSegments(directory: directory)
        try third.scan()
        XCTAssertEqual(try third.read(10), bytes("alpha, again"), "the newest entry of a row wins")
        XCTAssertEqual(third.usage.total, Int64(4 * ContentSegments.headerSize + 5 + 100_000 + 12))
        XCTAssertEqual(third.usage.live, Int64(3 * ContentSegments.headerSize + 100_000 + 12))
    }

    func testATornAppendIsCutAtOpen() throws {
        let segments = try ContentSegments(directory: directory)
        try segments.scan()
        try segments.append(20, bytes("first"))
        let second = try segments.append(21, bytes("second, torn"))
        let path = directory + "/1"
        // A crash mid-append: the second entry's bytes only partly written.
        XCTAssertEqual(truncate(path, off_t(second.offset) + 40), 0)
        let reopened = try ContentSegments(directory: directory)
        let damages = try reopened.scan()
        XCTAssertEqual(damages.map(\.offset), [second.offset], "\(damages)")
        XCTAssertEqual(try reopened.read(20), bytes("first"))
        XCTAssertNil(try reopened.read(21))
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64, second.offset, "cut at the torn entry")
        // A header whose checksum does not match (garbage after a crash) is cut the same way.
        try reopened.append(22, bytes("third"))
        let fd = open(path, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var garbage = [UInt8](repeating: 0, count: 64)
        garbage[0] = 0x44; garbage[1] = 0x53; garbage[2] = 0x45; garbage[3] = 0x47 // the magic, then nonsense
        garbage[4] = 8
        XCTAssertEqual(write(fd, &garbage, garbage.count), garbage.count)
        close(fd)
        let verified = try ContentSegments.verify(directory: directory)
        XCTAssertEqual(verified.damages.count, 1)
        XCTAssertTrue(verified.damages[0].reason.contains("checksum"), verified.damages[0].reason)
        let third = try ContentSegments(directory: directory)
        XCTAssertEqual(try third.scan().count, 1)
        XCTAssertEqual(try third.read(22), bytes("third"))
        XCTAssertEqual(try ContentSegments.verify(directory: directory).damages, [])
    }

    /// Segments written by the first format (magic `DSEG`, FNV-1a) still read; new entries use
    /// the word checksum, and a byte changed anywhere in an entry's bytes is damage.
    func testFirstFormatStillReadsAndAChangedByteIsDamage() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let old = bytes("written by the first format")
        var entry = [UInt8](repeating: 0, count: ContentSegments.headerSize)
        func put<T: FixedWidthInteger>(_ value: T, _ at: Int) {
            withUnsafeBytes(of: value.littleEndian) { for (i, b) in $0.enumerated() { entry[at + i] = b } }
        }
        put(ContentSegments.fnvMagic, 0); put(UInt32(old.count), 4); put(Int64(40), 8); put(UInt64(1), 16)
        put(ContentSegments.checksum(row: 40, sequence: 1, old), 24)
        entry += old
        XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/1", contents: Data(entry)))
        let segments = try ContentSegments(directory: directory)
        XCTAssertEqual(try segments.scan(), [])
        XCTAssertEqual(try segments.read(40), old)

        // Sizes around the checksum's 8- and 32-byte steps; each entry's last and first byte changed.
        for (i, count) in [0, 1, 7, 8, 31, 32, 33, 100, 4099].enumerated() {
            let row = Int64(50 + i)
            let data = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }
            let at = try segments.append(row, data)
            XCTAssertEqual(try segments.read(row), data)
            guard count > 0 else { continue }
            for offset in [at.offset + Int64(ContentSegments.headerSize), at.offset + at.entrySize - 1] {
                let fd = open(directory + "/1", O_RDWR)
                var byte: UInt8 = 0
                XCTAssertEqual(pread(fd, &byte, 1, off_t(offset)), 1)
                var flipped = byte ^ 0x10
                XCTAssertEqual(pwrite(fd, &flipped, 1, off_t(offset)), 1)
                let damages = try ContentSegments.verify(directory: directory).damages
                XCTAssertEqual(damages.map(\.offset), [at.offset], "\(count) bytes, byte at \(offset) changed")
                XCTAssertEqual(pwrite(fd, &byte, 1, off_t(offset)), 1)
                close(fd)
            }
        }
        XCTAssertEqual(try ContentSegments.verify(directory: directory).damages, [])
    }

    func testRetainKeepsOnlyLiveRows() throws {
        let segments = try ContentSegments(directory: directory)
        try segments.scan()
        try segments.append(30, bytes("live"))
        try segments.append(31, bytes("dead: no such item"))
        try segments.append(32, bytes("dead: other size"))
        let reopened = try ContentSegments(directory: directory)
        try reopened.scan()
        reopened.retain { row, length in row == 30 || (row == 32 && length == 3) }
        XCTAssertEqual(try reopened.read(30), bytes("live"))
        XCTAssertNil(try reopened.read(31))
        XCTAssertNil(try reopened.read(32))
    }

    func testCompactionMovesLiveEntriesAndRemovesMostlyDeadSegments() throws {
        let segments = try ContentSegments(directory: directory, segmentLimit: 4096)
        try segments.scan()
        var expected: [Int64: [UInt8]] = [:]
        for row in Int64(100)..<Int64(160) {
            let data = [UInt8](repeating: UInt8(row & 0xff), count: 300 + Int(row))
            try segments.append(row, data)
            expected[row] = data
        }
        XCTAssertGreaterThan(try segmentFiles().count, 5)
        // Remove most rows: every segment but the active one becomes mostly dead.
        for row in Int64(100)..<Int64(160) where row % 5 != 0 {
            segments.remove(row)
            expected[row] = nil
        }
        XCTAssertFalse(segments.mostlyDead().isEmpty)
        let before = segments.usage
        // Compacting appends to the active segment, which may fill and leave a mostly dead one behind.
        var candidates: [UInt64] = []
        for _ in 0..<20 {
            guard let number = segments.mostlyDead().first else { break }
            XCTAssertGreaterThan(try segments.compact(number), 0)
            candidates.append(number)
        }
        XCTAssertTrue(segments.mostlyDead().isEmpty)
        XCTAssertLessThan(segments.usage.total, before.total)
        for (row, data) in expected { XCTAssertEqual(try segments.read(row), data, "row \(row)") }
        for number in candidates { XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/\(number)")) }
        // What a reopen finds is the same: the compacted copies, the newest sequence of each row.
        let reopened = try ContentSegments(directory: directory, segmentLimit: 4096)
        XCTAssertEqual(try reopened.scan(), [])
        reopened.retain { row, _ in expected[row] != nil }
        for (row, data) in expected { XCTAssertEqual(try reopened.read(row), data, "row \(row)") }
        XCTAssertEqual(reopened.usage.live, segments.usage.live)
    }

    func testACompactionCutShortLeavesEveryRowReadable() throws {
        // A crash after the live entries were copied and before the old segment was removed:
        // both copies are there; the newer wins, with the same bytes.
        let segments = try ContentSegments(directory: directory, segmentLimit: 1024)
        try segments.scan()
        for row in Int64(1)...Int64(8) { try segments.append(row, [UInt8](repeating: UInt8(row), count: 200)) }
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        segments.remove(1)
        segments.remove(2)
        segments.remove(3)
        for number in segments.mostlyDead() { try segments.compact(number) }
        // Put the removed segment back, as if the crash came before its unlink.
        for name in try FileManager.default.contentsOfDirectory(atPath: copy) where !FileManager.default.fileExists(atPath: directory + "/" + name) {
            try FileManager.default.copyItem(atPath: copy + "/" + name, toPath: directory + "/" + name)
        }
        let reopened = try ContentSegments(directory: directory, segmentLimit: 1024)
        XCTAssertEqual(try reopened.scan(), [])
        for row in Int64(4)...Int64(8) { XCTAssertEqual(try reopened.read(row), [UInt8](repeating: UInt8(row), count: 200)) }
    }
}

/// A store with segments on: small files are imported into a segment, read from it, moved to a
/// content file of their own when written or handed out by path, dropped when deleted, kept
/// across a crash; `docfs check` verifies and repairs segments.
final class SegmentStoreTests: StoreTestCase {
    var contentsDir: String { storeURL.appendingPathComponent("contents").path }
    var segmentsDir: String { storeURL.appendingPathComponent("segments").path }

    func openWithSegments() throws {
        store = try LocalStore.open(at: storeURL, logger: logger, smallFileLimit: 1024)
    }

    func makeSegmentStore() throws {
        try LocalStore.create(at: storeURL, layout: nil)
        try openWithSegments()
    }

    func contentFiles() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: contentsDir).sorted() }

    func testSmallFilesGoToASegmentAndReadBack() async throws {
        try makeSegmentStore()
        let staged = try stage("small.txt", "small bytes")
        let small = try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path), "the staged file is removed once imported")
        let large = try await importFile("large.txt", String(repeating: "x", count: 2000))
        XCTAssertEqual(try contentFiles(), [large.identifier.rawValue], "only the large file has a content file")
        XCTAssertEqual(try contents(of: small.identifier), "small bytes")
        XCTAssertEqual(try store.item(for: small.identifier).documentSize, 11)
        // Read in place: a descriptor on the segment, and where the bytes are in it.
        let slice = try XCTUnwrap(try store.openStoredSlice(of: small.identifier))
        defer { close(slice.fd) }
        var inPlace = [UInt8](repeating: 0, count: slice.length)
        XCTAssertEqual(inPlace.withUnsafeMutableBytes { pread(slice.fd, $0.baseAddress, $0.count, off_t(slice.offset)) }, 11)
        XCTAssertEqual(String(decoding: inPlace, as: UTF8.self), "small bytes")
        XCTAssertNil(try store.openStoredSlice(of: large.identifier), "a file with a content file of its own")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: segmentsDir), ["1"])
        try await store.synchronize()
        try reopen() // without segments on: what is stored is still read
        XCTAssertEqual(try contents(of: small.identifier), "small bytes")
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
        XCTAssertEqual(report.segmentFiles, 1)
        XCTAssertEqual(report.contentFiles, 1)
    }

    func testWritingASmallFileGivesItAContentFileOfItsOwn() async throws {
        try makeSegmentStore()
        let small = try await importFile("small.txt", "before")
        let staged = try stage("new.txt", "after, longer")
        let modified = try await store.modifyContents(ofItemWithIdentifier: small.identifier, from: staged)
        XCTAssertEqual(modified.documentSize, 13)
        XCTAssertEqual(try contentFiles(), [small.identifier.rawValue])
        XCTAssertNil(store.contents.segments.location(of: Int64(small.identifier.rawValue)!))
        XCTAssertEqual(try contents(of: small.identifier), "after, longer")
        try reopen()
        XCTAssertEqual(try contents(of: small.identifier), "after, longer", "the content file wins over the old entry")
        // Handed out by path (a replica's upload): the file gets a content file first.
        store.close()
        try openWithSegments()
        let other = try await importFile("other.txt", "by path")
        let url = try XCTUnwrap(store.contentURL(of: other.identifier))
        XCTAssertEqual(try String(contentsOf: url, encoding: .utf8), "by path")
        XCTAssertEqual(try contents(of: other.identifier), "by path")
    }

    func testDeletedFilesLeaveDeadBytes() async throws {
        try makeSegmentStore()
        var items: [Item] = []
        for index in 0..<40 { items.append(try await importFile("f\(index).txt", String(repeating: "\(index % 10)", count: 500))) }
        for item in items.dropFirst(4) { try await store.deleteItem(withIdentifier: item.identifier) }
        XCTAssertEqual(store.contents.segments.usage.live, Int64(4 * (ContentSegments.headerSize + 500)))
        for (index, item) in items.prefix(4).enumerated() {
            XCTAssertEqual(try contents(of: item.identifier), String(repeating: "\(index % 10)", count: 500))
        }
        try reopen()
        for (index, item) in items.prefix(4).enumerated() {
            XCTAssertEqual(try contents(of: item.identifier), String(repeating: "\(index % 10)", count: 500))
        }
    }

    /// Deletes through the store leave segments mostly dead; the background compaction (on the
    /// reaper's queue) moves what lives and removes them, and nothing is lost.
    func testMostlyDeadSegmentsAreCompactedInTheBackground() async throws {
        try LocalStore.create(at: storeURL, layout: nil)
        store = try LocalStore.open(at: storeURL, logger: logger, smallFileLimit: 1024, segmentSize: 4096)
        var items: [(Item, String)] = []
        for index in 0..<60 {
            let text = String(repeating: Character(UnicodeScalar(UInt8(65 + index % 26))), count: 400 + index)
            items.append((try await importFile("f\(index).txt", text), text))
        }
        let before = try FileManager.default.contentsOfDirectory(atPath: segmentsDir).count
        XCTAssertGreaterThan(before, 5)
        for (index, (item, _)) in items.enumerated() where index % 6 != 0 {
            try await store.deleteItem(withIdentifier: item.identifier)
        }
        store.contents.reaper.drain() // waits for the compaction the deletes scheduled
        XCTAssertTrue(store.contents.segments.mostlyDead().isEmpty)
        let after = try FileManager.default.contentsOfDirectory(atPath: segmentsDir).count
        XCTAssertLessThan(after, before, "mostly dead segments were removed")
        let kept = items.enumerated().filter { $0.offset % 6 == 0 }.map(\.element)
        for (item, text) in kept { XCTAssertEqual(try contents(of: item.identifier), text) }
        store.close()
        store = nil
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertTrue(report.isConsistent, "\(report.problems)")
        XCTAssertEqual(report.segmentFiles, kept.count)
        store = try LocalStore.open(at: storeURL, logger: logger, smallFileLimit: 1024, segmentSize: 4096)
        for (item, text) in kept { XCTAssertEqual(try contents(of: item.identifier), text) }
    }

    func testACrashKeepsCommittedFilesAndDropsAnUncommittedAppend() async throws {
        try makeSegmentStore()
        let kept = try await importFile("kept.txt", "kept")
        // An append whose import never committed (a crash between the two).
        try store.contents.segments.append(9999, Array("orphan".utf8))
        store.abandonForTesting()
        store = nil
        try openWithSegments()
        XCTAssertEqual(try contents(of: kept.identifier), "kept")
        XCTAssertNil(store.contents.segments.location(of: 9999), "no item 9999: its entry is dead")
        let next = try await importFile("next.txt", "next")
        XCTAssertEqual(try contents(of: next.identifier), "next")
    }

    func testCheckFindsAndRepairsDamagedSegments() async throws {
        try makeSegmentStore()
        let a = try await importFile("a.txt", "alpha")
        let b = try await importFile("b.txt", "bravo")
        let bLocation = try XCTUnwrap(store.contents.segments.location(of: Int64(b.identifier.rawValue)!))
        store.close()
        store = nil
        // b's entry torn (as a crash mid-append, or a bad disk, leaves it).
        XCTAssertEqual(truncate(segmentsDir + "/1", off_t(bLocation.offset) + 10), 0)
        let report = try StoreChecker.check(at: storeURL, repair: false)
        XCTAssertEqual(Set(report.problems.map(\.kind)), [.segment, .missingContents], "\(report.problems)")
        let repaired = try StoreChecker.check(at: storeURL, repair: true)
        XCTAssertTrue(repaired.isConsistent, "\(repaired.remaining)")
        XCTAssertTrue(repaired.repairs.contains { $0.contains("cut segments/1") }, "\(repaired.repairs)")
        XCTAssertTrue(repaired.repairs.contains { $0.contains("item \(b.identifier.rawValue)") }, "\(repaired.repairs)")
        try openWithSegments()
        XCTAssertEqual(try contents(of: a.identifier), "alpha")
        XCTAssertEqual(try names(), ["a.txt"])
    }
}
