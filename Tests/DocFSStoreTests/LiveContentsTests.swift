import XCTest
import Foundation
import DocFSProvider
@testable import DocFSStore
#if canImport(Glibc)
    import Glibc
#endif

/// `detachLiveContents`: the stored file passthrough readers hold becomes a writer's live file,
/// the version it held kept byte-exact in its place (a conflicted copy's link too); refused
/// where the file is no longer the item's or has a name no item accounts for.
final class LiveContentsTests: StoreTestCase {
    private func identity(_ fd: Int32) -> (device: UInt64, inode: UInt64) {
        var st = stat()
        XCTAssertEqual(fstat(fd, &st), 0)
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    private func bytes(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var offset: off_t = 0
        while true {
            let n = pread(fd, &buffer, buffer.count, offset)
            guard n > 0 else { break }
            out += buffer[0..<n]
            offset += off_t(n)
        }
        return out
    }

    func testTheReadersFileBecomesLiveAndItsVersionIsKept() async throws {
        try makeStore()
        let text = String(repeating: "version one ", count: 40_000)
        let item = try await importFile("a.bin", text)
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        let live = try XCTUnwrap(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        XCTAssertEqual(live.item.itemVersion, item.itemVersion)
        // The live file is the readers' file: a write to it shows through their descriptor.
        let writer = open(live.path, O_WRONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(writer, 0)
        XCTAssertEqual(pwrite(writer, "NEW", 3, 0), 3)
        close(writer)
        XCTAssertEqual(Array(bytes(reader).prefix(3)), Array("NEW".utf8))
        // The item's version is still the bytes before the write, and the store checks clean.
        let stored = try store.openContents(of: item.identifier)
        defer { close(stored) }
        XCTAssertEqual(bytes(stored), Array(text.utf8))
        XCTAssertEqual(try store.item(for: item.identifier).itemVersion, item.itemVersion)
        // The readers' file is no longer the stored one: not made live again.
        XCTAssertNil(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        unlink(live.path)
        try reopen()
        let again = try store.openContents(of: item.identifier)
        defer { close(again) }
        XCTAssertEqual(bytes(again), Array(text.utf8))
    }

    /// A conflicted copy's contents are a hard link to the item's (StoreReplica+Incoming): the
    /// copy's name takes the kept version too, so that a write in place reaches this item alone.
    func testAConflictedCopysLinkTakesTheKeptVersion() async throws {
        try makeStore()
        let text = String(repeating: "shared ", count: 40_000)
        let item = try await importFile("b.bin", text)
        let copy = try await importFile("b (conflicted copy).bin", String(repeating: "other! ", count: 40_000))
        let path = try XCTUnwrap(store.contentURL(of: item.identifier)).path
        let copyPath = try XCTUnwrap(store.contentURL(of: copy.identifier)).path
        XCTAssertEqual(unlink(copyPath), 0)
        XCTAssertEqual(link(path, copyPath), 0)
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        let live = try XCTUnwrap(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        let writer = open(live.path, O_WRONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(writer, 0)
        XCTAssertEqual(pwrite(writer, "NEW", 3, 0), 3)
        close(writer)
        XCTAssertEqual(Array(bytes(reader).prefix(3)), Array("NEW".utf8))
        // Both items still read the version before the write, from a file that is not the live one.
        for identifier in [item.identifier, copy.identifier] {
            let fd = try store.openContents(of: identifier)
            defer { close(fd) }
            XCTAssertEqual(bytes(fd), Array(text.utf8))
            XCTAssertNotEqual(identity(fd).inode, held.inode)
        }
        unlink(live.path)
        try reopen()
        let again = try store.openContents(of: copy.identifier)
        defer { close(again) }
        XCTAssertEqual(bytes(again), Array(text.utf8))
    }

    /// A name the store cannot account for (not an item's content file): the file stays as it is.
    func testAFileWithANameNoItemHasIsNotMadeLive() async throws {
        try makeStore()
        let item = try await importFile("b.bin", String(repeating: "shared ", count: 40_000))
        let path = try XCTUnwrap(store.contentURL(of: item.identifier)).path
        let other = path + "-copy"
        XCTAssertEqual(link(path, other), 0)
        defer { unlink(other) }
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        XCTAssertNil(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        // Nothing moved: the stored file is still the one the reader has.
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(UInt64(st.st_ino), held.inode)
    }

    /// A replica's file whose version is still waiting to be sent is made live at once; an upload
    /// that noted `liveDetaches` before opening it learns to read it again, and the path then
    /// names the kept version, byte-exact.
    func testAVersionNotYetSentIsMadeLiveAndItsUploadReadsAgain() async throws {
        try makeReplica()
        let text = String(repeating: "to be sent ", count: 40_000)
        let item = try await importFile("u.bin", text)
        XCTAssertFalse(try store.replica!.outboxEntries(limit: 100).isEmpty)
        // The upload's read: noted, then opened by path.
        let noted = store.liveDetaches.sequence
        let upload = open(try XCTUnwrap(store.contentURL(of: item.identifier)).path, O_RDONLY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(upload, 0)
        defer { close(upload) }
        let read = identity(upload)
        XCTAssertFalse(store.liveDetaches.madeLive(since: noted, device: read.device, inode: read.inode))
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        let live = try XCTUnwrap(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        let writer = open(live.path, O_WRONLY | O_CLOEXEC)
        XCTAssertEqual(pwrite(writer, "NEW", 3, 0), 3)
        close(writer)
        XCTAssertTrue(store.liveDetaches.madeLive(since: noted, device: read.device, inode: read.inode))
        // Read again: the kept version, which no writer reaches.
        let again = open(try XCTUnwrap(store.contentURL(of: item.identifier)).path, O_RDONLY | O_CLOEXEC)
        defer { close(again) }
        let second = identity(again)
        XCTAssertFalse(store.liveDetaches.madeLive(since: store.liveDetaches.sequence, device: second.device, inode: second.inode))
        XCTAssertEqual(bytes(again), Array(text.utf8))
        unlink(live.path)
    }

    /// The readers' file is no longer the stored one (a new version replaced it while they had
    /// it open): it becomes the live file with the current version's bytes, which its readers
    /// then see; a conflicted copy that still names it keeps its bytes in a file of its own.
    func testAReplacedFileTakesTheCurrentVersionAndBecomesLive() async throws {
        try makeStore()
        let one = String(repeating: "version one ", count: 40_000)
        let two = String(repeating: "version two, longer ", count: 30_000)
        let item = try await importFile("r.bin", one)
        // A conflicted copy has its item's size (the rows sharing a file are found by it).
        let copy = try await importFile("r (conflicted copy).bin", String(repeating: "other! other", count: 40_000))
        let path = try XCTUnwrap(store.contentURL(of: item.identifier)).path
        let copyPath = try XCTUnwrap(store.contentURL(of: copy.identifier)).path
        XCTAssertEqual(unlink(copyPath), 0)
        XCTAssertEqual(link(path, copyPath), 0)
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        let replaced = try await store.modifyContents(ofItemWithIdentifier: item.identifier, baseVersion: item.itemVersion, from: stage("r2", two))
        // Not the stored file: `detachLiveContents` declines, `adoptStaleContents` takes it.
        XCTAssertNil(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode))
        let current = try store.openContents(of: item.identifier)
        defer { close(current) }
        // Another version since: declined.
        XCTAssertNil(try store.adoptStaleContents(of: item.identifier, readersFile: reader, current: current, version: item.itemVersion))
        let live = try XCTUnwrap(
            try store.adoptStaleContents(of: item.identifier, readersFile: reader, current: current, version: replaced.itemVersion))
        let writer = try XCTUnwrap(live.descriptor)
        XCTAssertEqual(live.item.itemVersion, replaced.itemVersion)
        XCTAssertEqual(identity(writer).inode, held.inode)
        XCTAssertEqual(bytes(reader), Array(two.utf8), "the readers see the current version")
        XCTAssertEqual(pwrite(writer, "NEW", 3, 0), 3)
        close(writer)
        XCTAssertEqual(Array(bytes(reader).prefix(3)), Array("NEW".utf8))
        for (identifier, text) in [(item.identifier, two), (copy.identifier, one)] {
            let fd = try store.openContents(of: identifier)
            defer { close(fd) }
            XCTAssertEqual(bytes(fd), Array(text.utf8))
            XCTAssertNotEqual(identity(fd).inode, held.inode)
        }
        try reopen()
        let again = try store.openContents(of: copy.identifier)
        defer { close(again) }
        XCTAssertEqual(bytes(again), Array(one.utf8))
    }

    /// `LiveDetaches` past its bound forgets, and then any read begun before reads again.
    func testLiveDetachesPastItsBoundSaysReadAgain() {
        let detaches = LiveDetaches(limit: 2)
        let noted = detaches.sequence
        detaches.record(device: 1, inode: 10)
        XCTAssertTrue(detaches.madeLive(since: noted, device: 1, inode: 10))
        XCTAssertFalse(detaches.madeLive(since: noted, device: 1, inode: 11))
        XCTAssertFalse(detaches.madeLive(since: detaches.sequence, device: 1, inode: 10))
        detaches.record(device: 1, inode: 12)
        detaches.record(device: 1, inode: 13)
        XCTAssertTrue(detaches.madeLive(since: noted, device: 1, inode: 11))
        XCTAssertFalse(detaches.madeLive(since: detaches.sequence, device: 1, inode: 13))
    }

    func testAFileOtherThanTheStoredOneIsNotMadeLive() async throws {
        try makeStore()
        let item = try await importFile("c.bin", String(repeating: "c ", count: 100_000))
        let reader = try store.openContents(of: item.identifier)
        defer { close(reader) }
        let held = identity(reader)
        XCTAssertNil(try store.detachLiveContents(of: item.identifier, device: held.device, inode: held.inode + 1))
        XCTAssertNil(try store.detachLiveContents(of: ItemIdentifier("999999"), device: held.device, inode: held.inode))
    }

    func testASmallFileInASegmentIsNotMadeLive() async throws {
        try LocalStore.create(at: storeURL, layout: nil)
        store = try LocalStore.open(at: storeURL, logger: logger, smallFileLimit: 4096)
        let item = try await store.importDocument(
            contents: Array("small".utf8), named: "s.txt", toParentItemIdentifier: .rootContainer,
            attributes: NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o644))
        XCTAssertNotNil(try store.openStoredSlice(of: item.identifier))
        XCTAssertNil(try store.detachLiveContents(of: item.identifier, device: 0, inode: 0))
    }
}
