import XCTest
import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSStore

/// A create's attributes are one value (`ReplicatedAttributes`) shared by the outbox and the
/// server client, while the outbox's JSON keeps the flat form every docfs wrote: entries already
/// waiting in a store read as before, and what is written now reads the same to an older docfs
/// (and to the `json_set` that renumbers a link's file).
final class OutboxDetailsJSONTests: StoreTestCase {
    /// Written as `Schema` writes an entry's details (sorted keys).
    func json(_ details: OutboxDetails) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(details), as: UTF8.self)
    }

    func decode(_ json: String) throws -> OutboxDetails {
        try JSONDecoder().decode(OutboxDetails.self, from: Data(json.utf8))
    }

    /// A create as today's outbox holds it: the attributes read into `newItem`, and written back
    /// byte for byte.
    func testACreateInTodaysFormReadsIntoItsNewItemAndRoundTrips() throws {
        // "red,work" in base64; a favourite rank a create records (the server's create takes none).
        let today =
            #"{"contentVersion":1,"createdNs":1700000000123456789,"favoriteRank":3,"favoriteRankChanged":true,"#
            + #""gid":100,"kind":"file","mode":420,"modifiedNs":1700000001987654321,"tagData":"cmVkLHdvcms=","tagsChanged":true,"uid":1000}"#
        let details = try decode(today)
        XCTAssertEqual(details.kind, .file)
        XCTAssertEqual(
            details.newItem,
            ReplicatedAttributes(
                ownerID: 1000, groupID: 100, posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 1_700_000_000_123_456_789),
                modificationTime: FileTime(totalNanoseconds: 1_700_000_001_987_654_321),
                tagData: Data("red,work".utf8)))
        XCTAssertNil(details.changes.ownerID, "a create's attributes are its new item's, not changes")
        XCTAssertNil(details.changes.tagData)
        XCTAssertEqual(details.changes.favoriteRank, .some(3))
        XCTAssertEqual(details.contentVersion, 1)
        XCTAssertEqual(try json(details), today)
        XCTAssertEqual(try decode(try json(details)), details)

        // JSONEncoder writes "/" as "\/", as the outbox always has.
        let link = #"{"contentVersion":1,"createdNs":5,"gid":0,"kind":"symlink","mode":511,"modifiedNs":5,"symlinkTarget":"..\/a b","uid":0}"#
        let linkDetails = try decode(link)
        XCTAssertEqual(linkDetails.newItem?.symlinkTargetPath, "../a b")
        XCTAssertEqual(ServerTags.array(linkDetails.newItem?.tagData), [])
        XCTAssertEqual(try json(linkDetails), link)
    }

    /// A create missing attributes sends what it always did (0, 0, 0644, times 0).
    func testACreateWithoutAttributesSendsTheOldDefaults() throws {
        let details = try decode(#"{"kind":"directory"}"#)
        XCTAssertEqual(details.kind, .folder)
        XCTAssertEqual(
            details.newItem,
            ReplicatedAttributes(
                ownerID: 0, groupID: 0, posixPermissions: 0o644,
                creationTime: FileTime(totalNanoseconds: 0),
                modificationTime: FileTime(totalNanoseconds: 0)))
        XCTAssertEqual(try decode(try json(details)), details)
    }

    /// Tag bytes that are not UTF-8 travel as one "base64:" word; written again, the entry
    /// still gives that word, to this docfs and to one that reads `tagData` itself.
    func testTagBytesThatAreNotUTF8KeepTheirServerWord() throws {
        let bytes = Data([0xff, 0xfe, 0x00])
        let today =
            #"{"createdNs":1,"gid":0,"kind":"file","mode":420,"modifiedNs":1,"tagData":""# + bytes.base64EncodedString()
            + #"","tagsChanged":true,"uid":0}"#
        let details = try decode(today)
        XCTAssertEqual(ServerTags.array(details.newItem?.tagData), ["base64:" + bytes.base64EncodedString()])
        let again = try json(details)
        XCTAssertEqual(try decode(again), details)
        let stored = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(again.utf8)) as? [String: Any])
        let tagData = try XCTUnwrap(Data(base64Encoded: try XCTUnwrap(stored["tagData"] as? String)))
        XCTAssertEqual(ServerTags.array(tagData), ServerTags.array(details.newItem?.tagData))
    }

    /// The other entries keep their flat fields: an attributes change (only what changed), a
    /// content change, a move and a link.
    func testOtherEntriesKeepTheirFlatFields() throws {
        let forms = [
            #"{"mode":384}"#,
            #"{"favoriteRank":2,"favoriteRankChanged":true,"tagData":"Ymx1ZQ==","tagsChanged":true,"uid":7}"#,
            #"{"accessedNs":9,"createdNs":4,"modifiedNs":5}"#,
            #"{"baseVersion":1,"contentVersion":2,"modifiedNs":5}"#,
            #"{"fromName":"a.txt","fromParent":1}"#,
            #"{"linkOf":40}"#,
            #"{}"#,
        ]
        for form in forms {
            let details = try decode(form)
            XCTAssertNil(details.newItem, form)
            XCTAssertEqual(try json(details), form)
        }
        let change = try decode(forms[1])
        XCTAssertEqual(change.changes.ownerID, 7)
        XCTAssertEqual(change.changes.tagData, .some(Data("blue".utf8)))
        XCTAssertNil(change.changes.groupID, "only what changed")
    }

    /// What a replica store records for a create is its `newItem`, and reads back the same from
    /// its outbox table after a reopen.
    func testAStoreRecordsACreateAsItsNewItem() async throws {
        try makeReplica()
        let link = try await store.createSymbolicLink(
            withName: "l", target: "a/b", inParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: 1000, groupID: 100, posixPermissions: 0o777))
        let before = try store.replica!.outboxEntries(limit: 10)
        let create = try XCTUnwrap(before.first)
        XCTAssertEqual(create.kind, .create)
        XCTAssertEqual(create.details.kind, .symlink)
        XCTAssertEqual(create.details.newItem?.symlinkTargetPath, "a/b")
        XCTAssertEqual(link.ownerID, 1000)
        XCTAssertEqual(create.details.newItem?.ownerID, link.ownerID)
        XCTAssertEqual(create.details.newItem?.groupID, link.groupID)
        XCTAssertEqual(create.details.newItem?.posixPermissions, link.posixPermissions)
        XCTAssertEqual(create.details.newItem?.creationTime, link.creationTime)
        XCTAssertNil(create.details.newItem?.types, "worked out when sent")
        try reopen()
        XCTAssertEqual(try store.replica!.outboxEntries(limit: 10), before)
    }
}
