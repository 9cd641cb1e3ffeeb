import XCTest
import Foundation
import DocFSProvider
@testable import DocFSReplica

/// Conflicted-copy and suffixed names fit 255 bytes whole, extension included, and are cut
/// between characters: a longer name is one the server refuses, and the edit in it would never
/// reach the server.
final class ConflictNamesTests: XCTestCase {
    let day = Date(timeIntervalSince1970: 1_800_000_000)
    var stamp: String {
        let d = Calendar.current.dateComponents([.year, .month, .day], from: day)
        return String(format: "%04d-%02d-%02d", d.year!, d.month!, d.day!)
    }

    /// Valid UTF-8 that reads back as the same string, within the limit.
    func assertFits(_ name: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertLessThanOrEqual(name.utf8.count, 255, name, file: file, line: line)
        XCTAssertEqual(String(validating: Array(name.utf8), as: UTF8.self), name, file: file, line: line)
        XCTAssertNoThrow(try ItemNames.validate(name), file: file, line: line)
    }

    func testAShortNameIsKeptWhole() {
        XCTAssertEqual(ConflictNames.copy(of: "plan.txt", host: "hostA", date: day), "plan (conflicted copy from hostA \(stamp)).txt")
        XCTAssertEqual(ItemNames.numbered("plan.txt", 2, isFolder: false), "plan 2.txt")
        XCTAssertEqual(ItemNames.numbered("v1.0", 3, isFolder: true), "v1.0 3")
    }

    func testALongASCIIExtensionIsCutWithTheName() {
        let ext = String(repeating: "a", count: 220)
        let copy = ConflictNames.copy(of: "x." + ext, host: "hostA", date: day)
        assertFits(copy)
        XCTAssertEqual(copy.utf8.count, 255, "as much of the name as fits")
        XCTAssertTrue(copy.hasPrefix("x (conflicted copy from hostA \(stamp))."), copy)
        XCTAssertTrue(ext.hasPrefix(String(copy.split(separator: ".").last!)), "the extension is cut at its end")

        let numbered = ItemNames.numbered("x." + String(repeating: "b", count: 252), 12, isFolder: false)
        assertFits(numbered)
        XCTAssertTrue(numbered.hasPrefix("x 12.bbb"), numbered)
    }

    func testA250ByteExtensionKeepsTheMarkerReadable() {
        let ext = String(repeating: "e", count: 250)
        let copy = ConflictNames.copy(of: "a." + ext, host: "hostA", date: day)
        assertFits(copy)
        XCTAssertTrue(copy.hasPrefix("a (conflicted copy from hostA \(stamp)).eee"), copy)
        // A long base and a long extension share the cut.
        let both = ConflictNames.copy(
            of: String(repeating: "b", count: 150) + "." + String(repeating: "e", count: 100),
            host: "hostA", date: day)
        assertFits(both)
        XCTAssertTrue(both.contains(" (conflicted copy from hostA \(stamp))."), both)
    }

    func testMultiByteCharactersAreNeverCutInTheMiddle() {
        // Two-byte letters in the base: the cut point falls inside one at every odd length.
        for extra in 0..<4 {
            let name = String(repeating: "x", count: extra) + String(repeating: "é", count: 126) + ".txt"
            let copy = ConflictNames.copy(of: name, host: "hostA", date: day)
            assertFits(copy)
            XCTAssertTrue(copy.hasSuffix(" (conflicted copy from hostA \(stamp)).txt"), copy)
            XCTAssertGreaterThanOrEqual(copy.utf8.count, 254, "at most one byte short of the limit")
        }
        // Four-byte characters in the extension.
        for extra in 0..<4 {
            let name = "n." + String(repeating: "z", count: extra) + String(repeating: "😀", count: 62)
            for candidate in [ConflictNames.copy(of: name, host: "hostA", date: day), ItemNames.numbered(name, 7, isFolder: false)] {
                assertFits(candidate)
                XCTAssertGreaterThanOrEqual(candidate.utf8.count, 252, candidate)
            }
        }
        // A character of many scalars (a letter with combining marks) goes whole or stays whole.
        let combined = "e" + String(repeating: "\u{301}", count: 20)
        let name = String(repeating: combined, count: 6) + ".md"
        let copy = ConflictNames.copy(of: name, host: "hostA", date: day)
        assertFits(copy)
        XCTAssertTrue(copy.hasPrefix(combined), copy)
        XCTAssertEqual(copy.unicodeScalars.filter { $0 == "\u{301}" }.count % 20, 0, "no character split")
    }

    func testUniqueSkipsTakenCutNames() {
        let name = "x." + String(repeating: "q", count: 252)
        var taken: Set<String> = [name, ItemNames.numbered(name, 2, isFolder: false)]
        let third = ItemNames.unique(name, isFolder: false) { taken.contains($0) }
        XCTAssertEqual(third, ItemNames.numbered(name, 3, isFolder: false))
        taken.insert(third)
        assertFits(third)
        XCTAssertEqual(taken.count, 3, "every candidate differs")
    }
}
