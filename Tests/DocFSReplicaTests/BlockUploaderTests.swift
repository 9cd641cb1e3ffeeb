import Foundation
import Logging
import XCTest
import DocFSStore
@testable import DocFSRemote
@testable import DocFSReplica

/// The upload reads `contents/<row>` by path. A writer that joins passthrough readers makes that
/// file its live one and writes it in place (`LiveDetaches`); the path then names a copy of the
/// kept version. An upload that was reading the file meanwhile may hold the writer's bytes, so it
/// reads again, and the manifest is the kept version's, whole.
final class BlockUploaderTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "docfs-uploader-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
    }

    func testAFileMadeLiveWhileReadIsReadAgain() async throws {
        let (reference, raced) = try await uploadWhileAWriterJoins(recorded: true)
        XCTAssertEqual(raced.key, reference.key, "the manifest is the kept version's")
        XCTAssertEqual(raced.size, reference.size)
    }

    /// The control: had the store not recorded the file as made live, the writer's bytes would
    /// have gone up as that version (the race above does happen in this test).
    func testWithoutTheRecordTheWritersBytesWouldGoUp() async throws {
        let (reference, raced) = try await uploadWhileAWriterJoins(recorded: false)
        XCTAssertNotEqual(raced.key, reference.key)
    }

    /// Uploads a 20 MiB file (more than the reader's 8 MiB buffer) and, while the server is asked
    /// about its first block, does what the store does for a writer joining passthrough readers:
    /// the file moves aside as the live one, a copy of its bytes takes its path, the move is
    /// recorded (when `recorded`), and the writer changes the live file past what was read.
    /// Returns the same bytes' upload with nothing happening meanwhile, and the raced one.
    private func uploadWhileAWriterJoins(recorded: Bool) async throws -> (reference: RemoteContent, raced: RemoteContent) {
        let random = try XCTUnwrap(FileHandle(forReadingAtPath: "/dev/urandom"))
        let kept = try XCTUnwrap(try random.read(upToCount: 20 << 20))
        try random.close()
        let operation = UUID()
        let path = dir + "/contents-1", live = dir + "/staging-1", plain = dir + "/reference"
        try kept.write(to: URL(fileURLWithPath: path))
        try kept.write(to: URL(fileURLWithPath: plain))

        let quiet = try await Self.uploader(InMemoryServer(), nil).upload([.init(seqs: [1], operationID: operation, path: plain)])
        let reference = try XCTUnwrap(quiet.contents[1])

        let server = InMemoryServer()
        let detaches = LiveDetaches()
        server.holdNext("knownBlocks")
        let racing = Self.uploader(server, detaches)
        let upload = Task { try await racing.upload([.init(seqs: [1], operationID: operation, path: path)]) }
        let deadline = Date().addingTimeInterval(60)
        while !server.isHolding && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        XCTAssertTrue(server.isHolding, "the upload asks the server about its first block")

        XCTAssertEqual(rename(path, live), 0)
        try kept.write(to: URL(fileURLWithPath: path))
        var st = stat()
        XCTAssertEqual(stat(live, &st), 0)
        if recorded { detaches.record(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) }
        let fd = open(live, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let written = [UInt8](repeating: 0xEE, count: 1 << 20)
        XCTAssertEqual(pwrite(fd, written, written.count, 16 << 20), written.count)
        close(fd)
        server.releaseHold()

        let result = try await upload.value
        let raced = try XCTUnwrap(result.contents[1])
        return (reference, raced)
    }

    private static func uploader(_ server: InMemoryServer, _ detaches: LiveDetaches?) -> BlockUploader {
        var uploader = BlockUploader(
            server: server, objects: InMemoryObjects(), bucket: "bucket", prefix: "tree", writer: nil,
            logger: Logger(label: "test"))
        // The server is asked after each block, so the first question comes before the file's end is read.
        uploader.batchBytes = 1
        uploader.liveDetaches = detaches
        return uploader
    }
}
