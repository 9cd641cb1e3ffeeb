import XCTest
import Foundation
import DocFSProvider
@testable import DocFSReplica

/// The replica's side of bounds: `incoming` in the status cannot overflow whatever positions
/// the log holds, and set-ID bits from the server are cleared unless the mount allows them.
final class BoundedIncomingTests: XCTestCase {
    func testTheIncomingCountSaturatesInsteadOfTrapping() {
        XCTAssertEqual(SyncEngine.incomingCount(latest: 10, anchor: 4, deferred: 2, held: 1), 9)
        XCTAssertEqual(SyncEngine.incomingCount(latest: 3, anchor: 7, deferred: 0, held: 0), 0, "never below 0")
        XCTAssertEqual(SyncEngine.incomingCount(latest: .max, anchor: 0, deferred: 5, held: 5), .max)
        XCTAssertEqual(SyncEngine.incomingCount(latest: .max, anchor: -1, deferred: .max, held: .max), .max)
        XCTAssertEqual(SyncEngine.incomingCount(latest: 0, anchor: 0, deferred: .max, held: .max), .max)
    }

    func testSetIDBitsFromTheServerAreClearedUnlessKept() {
        XCTAssertEqual(SetIDBits.applied(0o4755, kind: .file, keep: false), 0o755)
        XCTAssertEqual(SetIDBits.applied(0o6711, kind: .file, keep: false), 0o711)
        XCTAssertEqual(SetIDBits.applied(0o4755, kind: .file, keep: true), 0o4755)
        XCTAssertEqual(SetIDBits.applied(0o2775, kind: .folder, keep: false), 0o2775, "a folder's set-group-ID bit is no privilege")
        XCTAssertEqual(SetIDBits.applied(0o1777, kind: .folder, keep: false), 0o1777, "the sticky bit stays")
        XCTAssertEqual(SetIDBits.applied(0o644, kind: .file, keep: false), 0o644)
    }
}
