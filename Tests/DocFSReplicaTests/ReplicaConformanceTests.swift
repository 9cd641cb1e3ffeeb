import XCTest
import Foundation
import Glibc
import DocFS
import DocFSTesting
@testable import DocFSRemote
@testable import DocFSStore
@testable import DocFSReplica

/// `ProviderConformance` against a replica: the store with its sync engine running against the
/// in-memory server, mounted in this process. What another replica does on the server (a rename,
/// a delete) is the provider changing on its own, and must show through the kernel's caches.
final class ReplicaConformanceTests: ReplicaTestCase {
    func testAReplicaConforms() async throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0, getuid() == 0 else {
            throw XCTSkip("needs /dev/fuse and root (the mounted tests' environment)")
        }
        startEngine()
        let (store, server) = (self.store!, self.server!)
        /// The server's identifier of an item of this replica, once its create has reached the server.
        @Sendable func permanent(_ id: ItemIdentifier) async throws -> Int64 {
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if let row = LocalStore.row(for: id).map(store.replica!.currentRow), ReplicaRows.isPermanent(row) { return row }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw ProviderError(.ioError, "\(id) did not reach the server")
        }
        @Sendable func applied(_ change: RemoteOperation.Change) async throws {
            for answer in try await server.apply([RemoteOperation(id: UUID(), change)]) { _ = try answer.get() }
        }
        var options = ProviderConformance.Options()
        options.onItsOwn = .init(
            rename: { id, name in
                let row = try await permanent(id)
                let parent = try await permanent(try store.item(for: id).parentIdentifier)
                try await applied(.move(item: .item(row), toParent: .item(parent), name: name, expectedParentID: nil, expectedName: nil, types: nil))
            },
            delete: { id in try await applied(.delete(item: .item(try await permanent(id)), expectedContentVersion: nil)) })
        // The suite blocks its thread while it drives the mount: off the cooperative pool, which
        // the engine needs meanwhile.
        let given = options
        let report = try await withCheckedThrowingContinuation { (done: CheckedContinuation<ProviderConformance.Report, any Error>) in
            Thread.detachNewThread {
                do { done.resume(returning: try ProviderConformance.check(store, options: given)) } catch { done.resume(throwing: error) }
            }
        }
        XCTAssert(report.passed, "\n\(report)")
        XCTAssertEqual(report["a change the provider signals shows through the kernel's caches"], .passed, "\(report)")
        for check in [
            "chmod, chown and utimens reach the provider", "truncate changes the provider's contents",
            "unlink and rmdir remove the provider's items", "statfs gives the provider's storage statistics",
            "the trash round trip keeps the item", "hard links share one item",
        ] {
            XCTAssertEqual(report[check], .passed, "\(check)\n\(report)")
        }
        try await waitForOutbox()
    }
}
