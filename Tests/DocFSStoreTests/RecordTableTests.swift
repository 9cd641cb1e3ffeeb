import Foundation
import XCTest
@testable import DocFSStore
import DocFSProvider

/// RecordTable behaves as the dictionary it replaced: add, change in place, remove, iterate.
final class RecordTableTests: XCTestCase {
    private func record(_ row: Int64, _ name: String) -> Record {
        Record(
            row: row, parent: 1,
            item: Item(
                identifier: ItemIdentifier(String(row)), parentIdentifier: .rootContainer, filename: name, kind: .file,
                contentType: .data, creationDate: Date(), contentModificationDate: Date(), capabilities: .all))
    }

    func testActsAsADictionaryByRow() {
        var table = RecordTable()
        XCTAssertNil(table[5])
        table[5] = record(5, "a")
        table[9] = record(9, "b")
        XCTAssertEqual(table.count, 2)
        XCTAssertEqual(table[5]?.item.filename, "a")
        table[5]!.item.filename = "renamed"
        table[9]?.item.documentSize = 42
        XCTAssertEqual(table[5]?.item.filename, "renamed")
        XCTAssertEqual(table[9]?.item.documentSize, 42)
        XCTAssertEqual(table.removeValue(forKey: 5)?.item.filename, "renamed")
        XCTAssertNil(table.removeValue(forKey: 5))
        XCTAssertNil(table[5])
        table[9] = nil
        XCTAssertEqual(table.count, 0)
        XCTAssertEqual(Array(table.keys), [])
    }

    func testFreedSlotsAreReusedAndIterationSeesEveryLiveRecord() {
        var table = RecordTable()
        for row in Int64(1)...1000 { table[row] = record(row, "f\(row)") }
        for row in Int64(1)...1000 where row % 2 == 0 { table[row] = nil }
        for row in Int64(1001)...1500 { table[row] = record(row, "g\(row)") }
        XCTAssertEqual(table.count, 1000)
        var seen: [Int64: String] = [:]
        for (row, record) in table {
            XCTAssertEqual(record.row, row)
            seen[row] = record.item.filename
        }
        XCTAssertEqual(seen.count, 1000)
        XCTAssertEqual(seen[999], "f999")
        XCTAssertNil(seen[998])
        XCTAssertEqual(seen[1500], "g1500")
        XCTAssertEqual(Set(table.values.map(\.row)), Set(seen.keys))
        XCTAssertEqual(table.keys.max(), 1500)
    }
}
