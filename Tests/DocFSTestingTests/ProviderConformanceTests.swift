import DocFS
import DocFSMemory
import DocFSStore
import Foundation
import Glibc
import Logging
import XCTest
import DocFSTesting
@testable import docfs_archive

/// `ProviderConformance` run against the three providers docfs ships (the store, the in-memory
/// provider, the archive example) and README's smallest one: each passes every check it
/// declares, and runs the ones it should (a read-only tree skips the writing checks, and only
/// those).
final class ProviderConformanceTests: XCTestCase {
    var work: URL!

    override func setUpWithError() throws {
        guard access("/dev/fuse", R_OK | W_OK) == 0, getuid() == 0 else {
            throw XCTSkip("needs /dev/fuse and root (the mounted tests' environment)")
        }
        work = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-conformance-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    let writingChecks = [
        "a new file is the provider's", "identifiers stay across renames and moves", "a refusal leaves nothing half-done",
        "a change the provider signals shows through the kernel's caches", "a refused modification keeps the old version",
        "the trash round trip keeps the item", "extended attributes round trip", "hard links share one item",
        "chmod, chown and utimens reach the provider", "truncate changes the provider's contents",
        "unlink and rmdir remove the provider's items", "special items are the provider's",
        "tags and favourite rank round trip",
    ]

    func assertRan(_ report: ProviderConformance.Report, skipping skipped: Set<String>, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssert(report.passed, "\n\(report)", file: file, line: line)
        XCTAssertEqual(report.outcomes.count, 4 + writingChecks.count, "\(report)", file: file, line: line)
        for outcome in report.outcomes {
            XCTAssertEqual(outcome.status, skipped.contains(outcome.check) ? .skipped : .passed, "\(outcome)", file: file, line: line)
        }
    }

    /// A PNG's first bytes: what the shared MIME database knows a PNG by.
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 64)

    func testTheStoreConforms() throws {
        try XCTSkipIf(!FileManager.default.fileExists(atPath: "/usr/share/mime/magic"), "shared-mime-info is not installed")
        let url = work.appendingPathComponent("store")
        try LocalStore.create(
            at: url,
            layout: Layout(
                trash: true,
                folders: [
                    .init(path: "Photos", allowedContentTypes: ["image/png"]),
                    .init(path: "Archive", capabilities: ["read", "enumerate"]),
                    .init(path: "Projects"),
                ]))
        let store = try LocalStore.open(at: url, logger: Logger(label: "conformance.store"))
        defer { store.close() }
        var options = ProviderConformance.Options()
        options.trash = true
        options.refusedModification = .init(folder: "Photos", name: "f0001", accepted: Self.png, refused: Array("plain text, not a PNG\n".utf8))
        // A store of its own changes only through the mount (a replica's changes from the server
        // are signalled: the replica tests cover them).
        assertRan(
            try ProviderConformance.check(store, options: options), skipping: ["a change the provider signals shows through the kernel's caches"])
    }

    func testTheMemoryProviderConforms() throws {
        let provider = try MemoryProvider(
            folders: [
                .init(path: "Archive", capabilities: [.allowsReading, .allowsContentEnumerating]),
                .init(path: "Projects", capabilities: .all),
            ], stagingParent: work)
        var options = ProviderConformance.Options()
        options.trash = true
        options.onItsOwn = .init(rename: { try await provider.renameOnItsOwn($0, to: $1) }, delete: { try await provider.deleteOnItsOwn($0) })
        assertRan(try ProviderConformance.check(provider, options: options), skipping: ["a refused modification keeps the old version"])
    }

    func testTheArchiveExampleConforms() throws {
        let tree = work.appendingPathComponent("tree")
        try FileManager.default.createDirectory(at: tree.appendingPathComponent("docs/deep"), withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: tree.appendingPathComponent("hello.txt"))
        try Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0) }).write(to: tree.appendingPathComponent("docs/deep/bytes.bin"))
        try Data().write(to: tree.appendingPathComponent("docs/empty"))
        XCTAssertEqual(symlink("../hello.txt", tree.appendingPathComponent("docs/link").path), 0)
        let archive = work.appendingPathComponent("tree.tar").path
        let tar = Process()
        tar.executableURL = URL(fileURLWithPath: "/usr/bin/tar")
        tar.arguments = ["-cf", archive, "-C", tree.path, "."]
        try tar.run()
        tar.waitUntilExit()
        XCTAssertEqual(tar.terminationStatus, 0)
        assertRan(try ProviderConformance.check(ArchiveProvider(archive: archive)), skipping: Set(writingChecks))
    }

    func testReadmesSmallestProviderConforms() throws {
        assertRan(try ProviderConformance.check(GreetingProvider()), skipping: Set(writingChecks))
    }

    /// The suite finds what is wrong: a provider whose folder miscounts its children fails the
    /// first check, by name.
    func testAMiscountingProviderFails() throws {
        let report = try ProviderConformance.check(MiscountingProvider())
        XCTAssertEqual(report["child counts, parents and identities agree"], .failed, "\(report)")
        XCTAssert(report.failures.first?.detail.contains("childItemCount 3, 2 enumerated") == true, "\(report)")
    }
}

extension ProviderConformanceTests {
    /// Each check of the calls beyond create, read and move fails against a provider that says
    /// yes and keeps nothing (`LyingProvider`), by name; the checks before them still pass.
    func testAProviderThatKeepsNothingFailsEachCallCheck() throws {
        let inner = try MemoryProvider(folders: [.init(path: "Projects", capabilities: .all)], stagingParent: work)
        let report = try ProviderConformance.check(LyingProvider(inner))
        for check in [
            "statfs gives the provider's storage statistics", "chmod, chown and utimens reach the provider",
            "truncate changes the provider's contents", "unlink and rmdir remove the provider's items",
            "special items are the provider's", "tags and favourite rank round trip",
        ] {
            XCTAssertEqual(report[check], .failed, "\(check)\n\(report)")
        }
        XCTAssertEqual(report["child counts, parents and identities agree"], .passed, "\(report)")
        XCTAssertEqual(report["a new file is the provider's"], .passed, "\(report)")
    }
}

/// README's greetings, with a root that says it has three children and enumerates two.
final class MiscountingProvider: Provider, @unchecked Sendable {
    let inner = GreetingProvider()
    func item(for id: ItemIdentifier) throws(ProviderError) -> Item {
        var item = try inner.item(for: id)
        if id == .rootContainer { item.childItemCount = 3 }
        return item
    }
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] { try inner.enumerateItems(in: container) }
    func openContents(of id: ItemIdentifier) throws(ProviderError) -> Int32 { try inner.openContents(of: id) }
}
