import XCTest
import Foundation
import Logging
import DocFSProvider
@testable import DocFSStore
#if canImport(Glibc)
    import Glibc
#endif

/// A temporary store per test.
class StoreTestCase: XCTestCase {
    var directory: URL!
    var storeURL: URL!
    var store: LocalStore!
    let logger = Logger(label: "docfs.store.tests")

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        storeURL = directory.appendingPathComponent("store")
    }

    override func tearDownWithError() throws {
        store?.close()
        store = nil
        try? FileManager.default.removeItem(at: directory)
    }

    func makeStore(layout: Layout? = nil) throws {
        try LocalStore.create(at: storeURL, layout: layout)
        store = try LocalStore.open(at: storeURL, logger: logger)
    }

    /// A replica's store (its remote link points nowhere: nothing here talks to a server).
    func makeReplica() throws {
        try LocalStore.create(at: storeURL, layout: nil)
        try LocalStore.linkRemote(
            at: storeURL,
            RemoteLink(
                postgres: "postgres://u@127.0.0.1:1/db", bucket: "b", prefix: "p",
                endpoint: "http://127.0.0.1:1", region: "us-east-1", credentialsFile: nil))
        store = try LocalStore.open(at: storeURL, logger: logger)
    }

    func reopen() throws {
        store.close()
        store = nil
        store = try LocalStore.open(at: storeURL, logger: logger)
    }

    /// Writes a staged file in the store's staging directory, as the bridge does.
    func stage(_ name: String, _ text: String = "hello") throws -> URL {
        let dir = store.stagingDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let url = dir.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    @discardableResult
    func importFile(_ name: String, _ text: String = "hello", into parent: ItemIdentifier = .rootContainer) async throws -> Item {
        try await store.importDocument(at: stage(name, text), toParentItemIdentifier: parent)
    }

    func mkdir(_ name: String, in parent: ItemIdentifier = .rootContainer) async throws -> Item {
        try await store.createDirectory(withName: name, inParentItemIdentifier: parent)
    }

    func names(in parent: ItemIdentifier = .rootContainer) throws -> [String] {
        try store.enumerateItems(in: parent).map(\.filename)
    }

    func contents(of identifier: ItemIdentifier) throws -> String {
        let fd = try store.openContents(of: identifier)
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    }

    func inode(_ path: String) -> UInt64? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    /// Asserts that `body` throws a ProviderError with `code`; returns it.
    @discardableResult
    func expectError<T>(
        _ code: ProviderError.Code, file: StaticString = #filePath, line: UInt = #line,
        _ body: () async throws -> T
    ) async -> ProviderError? {
        do {
            _ = try await body()
            XCTFail("expected \(code), got success", file: file, line: line)
            return nil
        } catch let error as ProviderError {
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            return error
        } catch {
            XCTFail("expected ProviderError \(code), got \(error)", file: file, line: line)
            return nil
        }
    }
}

final class LocalStoreLifecycleTests: StoreTestCase {
    func testCreateOpenClose() throws {
        try makeStore()
        for name in ["store.sqlite", "contents", "staging", "lock"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: storeURL.appendingPathComponent(name).path), name)
        }
        let root = try store.item(for: .rootContainer)
        XCTAssertEqual(root.kind, .folder)
        XCTAssertEqual(root.childItemCount, 0)
        XCTAssertFalse(root.capabilities.contains(.allowsRenaming))
        XCTAssertFalse(root.capabilities.contains(.allowsDeleting))
        XCTAssertTrue(root.capabilities.contains(.allowsAddingSubItems))
        let trash = try store.item(for: .trashContainer)
        XCTAssertEqual(trash.kind, .folder)
        XCTAssertEqual(try names(), [], "the trash is not listed in the root")
        XCTAssertEqual(try store.enumerateItems(in: .trashContainer), [])
        XCTAssertEqual(store.stagingDirectory.path, storeURL.appendingPathComponent("staging").path)
        XCTAssertGreaterThan(store.storageStatistics().totalBlocks, 0)
        // The lock file names our pid while open.
        let pid = try String(contentsOf: storeURL.appendingPathComponent("lock"), encoding: .utf8)
        XCTAssertEqual(pid.trimmingCharacters(in: .whitespacesAndNewlines), String(getpid()))
        store.close()
        store.close() // idempotent
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try store.item(for: .rootContainer).filename, root.filename)
    }

    func testCreateRefusesNonEmptyDirectoryAndFiles() throws {
        try FileManager.default.createDirectory(at: storeURL, withIntermediateDirectories: true)
        try Data("x".utf8).write(to: storeURL.appendingPathComponent("something"))
        XCTAssertThrowsError(try LocalStore.create(at: storeURL, layout: nil)) { error in
            XCTAssertTrue("\(error)".contains("not empty"), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: storeURL.path), ["something"])
        let file = directory.appendingPathComponent("plain")
        try Data().write(to: file)
        XCTAssertThrowsError(try LocalStore.create(at: file, layout: nil))
        // An existing empty directory is fine.
        let empty = directory.appendingPathComponent("empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        XCTAssertNoThrow(try LocalStore.create(at: empty, layout: nil))
        XCTAssertThrowsError(try LocalStore.create(at: empty, layout: nil), "a store is not empty")
    }

    func testOpenRefusesMissingOrForeignDirectories() throws {
        XCTAssertThrowsError(try LocalStore.open(at: storeURL, logger: logger)) { error in
            XCTAssertTrue("\(error)".contains("does not exist"), "\(error)")
        }
        try FileManager.default.createDirectory(at: storeURL, withIntermediateDirectories: true)
        XCTAssertThrowsError(try LocalStore.open(at: storeURL, logger: logger)) { error in
            XCTAssertTrue("\(error)".contains("not a docfs store"), "\(error)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: storeURL.path), [], "nothing was written")
    }

    func testOpenRefusesCorruptDatabaseWithoutChangingIt() throws {
        try LocalStore.create(at: storeURL, layout: nil)
        let db = storeURL.appendingPathComponent("store.sqlite")
        let garbage = Data(repeating: 0x5A, count: 8192)
        try garbage.write(to: db)
        XCTAssertThrowsError(try LocalStore.open(at: storeURL, logger: logger)) { error in
            XCTAssertEqual((error as? ProviderError)?.code, .corruptFile, "\(error)")
            XCTAssertTrue("\(error)".contains(self.storeURL.path), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: db), garbage)
        // The lock was released: after repairing by hand, a mount could take it.
        let fd = open(storeURL.appendingPathComponent("lock").path, O_RDWR)
        defer { close(fd) }
        XCTAssertEqual(flock(fd, LOCK_EX | LOCK_NB), 0)
    }

    func testSecondOpenIsBusy() async throws {
        try makeStore()
        await expectError(.busy) { try LocalStore.open(at: storeURL, logger: logger) }
        do {
            _ = try LocalStore.open(at: storeURL, logger: logger)
        } catch {
            XCTAssertTrue("\(error)".contains("already mounted by another docfs (pid \(getpid()))"), "\(error)")
        }
        store.close()
        store = try LocalStore.open(at: storeURL, logger: logger)
    }

    func testLeftoversAreCleanedOnOpen() async throws {
        try makeStore()
        let kept = try await importFile("kept.txt", "kept")
        // A crash leaves these (a clean shutdown leaves no content file without its item, so a
        // clean open does not read contents/: `docfs check` finds anything put there by hand).
        try store.synchronizeSync()
        store.abandonForTesting()
        store = nil
        let staging = storeURL.appendingPathComponent("staging")
        try Data("half".utf8).write(to: staging.appendingPathComponent("half-written"))
        try FileManager.default.createDirectory(at: staging.appendingPathComponent("dir/sub"), withIntermediateDirectories: true)
        let contentsDir = storeURL.appendingPathComponent("contents")
        try Data("orphan".utf8).write(to: contentsDir.appendingPathComponent("99999"))
        try Data("junk".utf8).write(to: contentsDir.appendingPathComponent("junk.tmp"))
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: staging.path), [])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: contentsDir.path), [kept.identifier.rawValue])
        XCTAssertEqual(try contents(of: kept.identifier), "kept")
    }

    func testReopenAfterCrashKeepsCommitsAndMendsTheRest() async throws {
        try makeStore()
        let kept = try await importFile("kept.txt", "kept")
        let changed = try await importFile("changed.txt", "short")
        store.abandonForTesting()
        store = nil
        // What a crash can leave: a content file renamed in without its row, a modify whose
        // rename landed but whose row did not, a half-staged file.
        let contentsDir = storeURL.appendingPathComponent("contents")
        try Data("orphan".utf8).write(to: contentsDir.appendingPathComponent("4242"))
        try Data("much longer contents".utf8).write(to: contentsDir.appendingPathComponent(changed.identifier.rawValue))
        try Data("x".utf8).write(to: storeURL.appendingPathComponent("staging/partial"))
        store = try LocalStore.open(at: storeURL, logger: logger)
        XCTAssertEqual(try contents(of: kept.identifier), "kept")
        XCTAssertEqual(try store.item(for: changed.identifier).documentSize, 20, "sizes follow the contents after a crash")
        XCTAssertFalse(FileManager.default.fileExists(atPath: contentsDir.appendingPathComponent("4242").path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: store.stagingDirectory.path), [])
        try reopen()
        XCTAssertEqual(try store.item(for: changed.identifier).documentSize, 20)
    }

    func testReopenKeepsEverything() async throws {
        try makeStore(
            layout: Layout(trash: true, folders: [Layout.Folder(path: "Inbox", capabilities: ["read", "enumerate", "add"], contents: ["read"])]))
        let inbox = try store.childItem(named: "Inbox", in: .rootContainer)
        let docs = try await mkdir("Docs")
        let file = try await importFile("a.txt", "alpha", into: docs.identifier)
        let link = try await store.createSymbolicLink(withName: "ln", target: "Docs/a.txt", inParentItemIdentifier: .rootContainer)
        _ = try await store.setTagData(Data("red,blue".utf8), forItemIdentifier: file.identifier)
        _ = try await store.setFavoriteRank(7, forItemIdentifier: file.identifier)
        let used = Date(timeIntervalSince1970: 1_700_000_000)
        _ = try await store.setLastUsedDate(used, forItemIdentifier: file.identifier)
        _ = try await store.setAttributes(ofItemWithIdentifier: file.identifier, posixPermissions: 0o600, contentModificationDate: nil)
        let inInbox = try await importFile("b.txt", "beta", into: inbox.identifier)
        let trashed = try await store.trashItem(withIdentifier: inInbox.identifier)
        let before = try [
            ItemIdentifier.rootContainer, .trashContainer, inbox.identifier, docs.identifier,
            file.identifier, link.identifier, trashed.identifier,
        ].map { try store.item(for: $0) }
        try reopen()
        let after = try before.map { try store.item(for: $0.identifier) }
        for (old, new) in zip(before, after) {
            XCTAssertEqual(old.identifier, new.identifier)
            XCTAssertEqual(old.filename, new.filename)
            XCTAssertEqual(old.parentIdentifier, new.parentIdentifier)
            XCTAssertEqual(old.kind, new.kind)
            XCTAssertEqual(old.capabilities, new.capabilities)
            XCTAssertEqual(old.documentSize, new.documentSize)
            XCTAssertEqual(old.childItemCount, new.childItemCount)
            XCTAssertEqual(old.childFolderCount, new.childFolderCount)
            XCTAssertEqual(old.itemVersion, new.itemVersion)
            XCTAssertEqual(old.tagData, new.tagData)
            XCTAssertEqual(old.favoriteRank, new.favoriteRank)
            XCTAssertEqual(old.symlinkTargetPath, new.symlinkTargetPath)
            XCTAssertEqual(old.posixPermissions, new.posixPermissions)
            XCTAssertEqual(old.contentType, new.contentType)
            XCTAssertEqual(old.contentModificationDate.timeIntervalSince1970, new.contentModificationDate.timeIntervalSince1970, accuracy: 0.001)
        }
        let reloaded = try store.item(for: file.identifier)
        XCTAssertEqual(reloaded.lastUsedDate?.timeIntervalSince1970, used.timeIntervalSince1970)
        XCTAssertEqual(reloaded.posixPermissions, 0o600)
        XCTAssertEqual(try contents(of: file.identifier), "alpha")
        XCTAssertEqual(store.layout.trash, true)
        XCTAssertEqual(store.layout.folders.map(\.path), ["Inbox"])
        // Untrash after a remount still knows where the item came from.
        let restored = try await store.untrashItem(withIdentifier: trashed.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(restored.parentIdentifier, inbox.identifier)
        // New identifiers do not reuse old ones.
        let fresh = try await mkdir("Fresh")
        XCTAssertFalse(before.map(\.identifier).contains(fresh.identifier))
    }

    func testIdentifiersAreNotReusedAfterDelete() async throws {
        try makeStore()
        let a = try await mkdir("a")
        try await store.deleteItem(withIdentifier: a.identifier)
        try reopen()
        let b = try await mkdir("b")
        XCTAssertNotEqual(a.identifier, b.identifier)
    }
}

final class LocalStoreCapabilityTests: StoreTestCase {
    static let layout = Layout(
        trash: true,
        folders: [
            Layout.Folder(
                path: "Inbox", capabilities: ["read", "enumerate", "add"], allowedContentTypes: ["com.adobe.pdf"],
                contents: ["read", "rename", "delete", "trash"]),
            Layout.Folder(path: "Archive", capabilities: ["read", "enumerate"], contents: ["read"]),
            Layout.Folder(path: "Projects/Team", contents: ["read", "write"]),
            Layout.Folder(path: "Projects"),
        ])

    func testLayoutFoldersAndInheritance() async throws {
        try makeStore(layout: Self.layout)
        XCTAssertEqual(try names(), ["Archive", "Inbox", "Projects"])
        let root = try store.item(for: .rootContainer)
        XCTAssertEqual(root.childItemCount, 3)
        XCTAssertEqual(root.childFolderCount, 3)
        let inbox = try store.childItem(named: "Inbox", in: .rootContainer)
        XCTAssertEqual(inbox.capabilities, [.allowsReading, .allowsContentEnumerating, .allowsAddingSubItems])
        let archive = try store.childItem(named: "Archive", in: .rootContainer)
        XCTAssertEqual(archive.capabilities, [.allowsReading, .allowsContentEnumerating])
        let projects = try store.childItem(named: "Projects", in: .rootContainer)
        XCTAssertEqual(projects.capabilities, .all)
        let team = try store.childItem(named: "Team", in: projects.identifier)
        XCTAssertEqual(team.capabilities, .all)
        XCTAssertEqual(projects.childFolderCount, 1)

        let contentsCaps: Capabilities = [.allowsReading, .allowsRenaming, .allowsDeleting, .allowsTrashing]
        let file = try await importFile("scan.pdf", "%PDF-1.4\n", into: inbox.identifier)
        XCTAssertEqual(file.capabilities, contentsCaps)
        let sub = try await mkdir("2024", in: inbox.identifier)
        XCTAssertEqual(sub.capabilities, contentsCaps)
        let deep = try await importFile("deep.pdf", "%PDF-1.4\n", into: sub.identifier)
        XCTAssertEqual(deep.capabilities, contentsCaps, "subfolders pass the contents policy on")
        let link = try await store.createSymbolicLink(withName: "l", target: "x", inParentItemIdentifier: inbox.identifier)
        XCTAssertEqual(link.capabilities, contentsCaps)

        let teamFile = try await importFile("t.txt", into: team.identifier)
        XCTAssertEqual(teamFile.capabilities, [.allowsReading, .allowsWriting])
        let free = try await importFile("free.txt", into: projects.identifier)
        XCTAssertEqual(free.capabilities, .all)
        let rootFile = try await importFile("root.txt")
        XCTAssertEqual(rootFile.capabilities, .all)

        // Moving keeps capabilities.
        let moved = try await store.reparentItem(
            withIdentifier: file.identifier, toParentItemWithIdentifier: projects.identifier,
            newName: nil, replacing: nil)
        XCTAssertEqual(moved.capabilities, contentsCaps)
        try reopen()
        XCTAssertEqual(try store.item(for: deep.identifier).capabilities, contentsCaps)
        let again = try await mkdir("later", in: sub.identifier)
        XCTAssertEqual(again.capabilities, contentsCaps, "the contents policy survives a remount")
    }

    func testContentTypes() async throws {
        try makeStore(
            layout: Layout(types: [
                Layout.TypeDeclaration(identifier: "com.example.invoice", conformsTo: ["com.adobe.pdf"], extensions: ["invoice", "txt"])
            ]))
        // Types come from the name, checked against the bytes (DocFSContentTypes has the details).
        let pdf = "%PDF-1.4\n", png = "\u{89}PNG\r\n\u{1A}\n", jpeg = "\u{FF}\u{D8}\u{FF}\u{E0}", zip = "PK\u{03}\u{04}"
        let cases: [(String, String, String)] = [
            ("a.pdf", pdf, "com.adobe.pdf"), ("b.PNG", png, "public.png"), ("c.jpeg", jpeg, "public.jpeg"), ("c2.jpg", jpeg, "public.jpeg"),
            ("d.json", "{}", "public.json"), ("e.html", "<html></html>", "public.html"), ("f.xml", "<?xml version=\"1.0\"?><a/>", "public.xml"),
            ("g.zip", zip, "public.zip-archive"),
            ("h.unknown", "\u{0}\u{1}\u{2}", "public.data"), ("noext", "\u{0}\u{1}", "public.data"), (".hidden", "\u{0}", "public.data"),
            ("text-noext", "hello", "public.plain-text"), ("png-noext", png, "public.png"), ("fake.pdf", "hello", "public.plain-text"),
            ("i.invoice", pdf, "com.example.invoice"), ("j.txt", pdf, "com.example.invoice"),
        ]
        for (name, contents, type) in cases {
            let staged = try stage(name)
            // Byte for byte (the escapes above are bytes, not UTF-8 scalars).
            try Data(contents.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }).write(to: staged)
            let item = try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
            XCTAssertEqual(item.contentType.rawValue, type, name)
        }
        let folder = try await mkdir("dir")
        XCTAssertEqual(folder.contentType, .folder)
        let link = try await store.createSymbolicLink(withName: "ln", target: "a.pdf", inParentItemIdentifier: .rootContainer)
        XCTAssertEqual(link.contentType, .symbolicLink)
        XCTAssertEqual(link.kind, .symlink)
        XCTAssertEqual(link.documentSize, 5)
        XCTAssertEqual(link.symlinkTargetPath, "a.pdf")
        // Renaming a file re-derives its type.
        let renamed = try await store.renameItem(withIdentifier: store.childItem(named: "a.pdf", in: .rootContainer).identifier, toName: "a.png")
        XCTAssertEqual(renamed.contentType, .png)
    }
}

final class LocalStoreActionTests: StoreTestCase {
    func testImportMovesTheStagedFile() async throws {
        try makeStore()
        let staged = try stage("notes.txt", "some notes")
        let stagedInode = try XCTUnwrap(inode(staged.path))
        let rootBefore = try store.item(for: .rootContainer)
        let item = try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path), "the staged file is gone")
        let content = try XCTUnwrap(store.contentURL(of: item.identifier))
        XCTAssertEqual(inode(content.path), stagedInode, "same inode: the import was a rename")
        XCTAssertEqual(item.filename, "notes.txt")
        XCTAssertEqual(item.kind, .file)
        XCTAssertEqual(item.documentSize, 10)
        XCTAssertEqual(item.contentType, .plainText)
        XCTAssertEqual(item.parentIdentifier, .rootContainer)
        XCTAssertEqual(try contents(of: item.identifier), "some notes")
        XCTAssertEqual(try store.item(for: item.identifier), item)
        XCTAssertEqual(try store.childItem(named: "notes.txt", in: .rootContainer), item)
        let root = try store.item(for: .rootContainer)
        XCTAssertEqual(root.childItemCount, 1)
        XCTAssertEqual(root.childFolderCount, 0)
        XCTAssertGreaterThan(root.itemVersion.metadataVersion, rootBefore.itemVersion.metadataVersion)
        XCTAssertGreaterThanOrEqual(root.contentModificationDate, rootBefore.contentModificationDate)
        await expectError(.isDirectory) { try store.openContents(of: .rootContainer) }
        await expectError(.noSuchItem) { try store.item(for: ItemIdentifier("424242")) }
        await expectError(.noSuchItem) { try store.item(for: ItemIdentifier("bogus")) }
        await expectError(.noSuchItem) { try store.childItem(named: "nope", in: .rootContainer) }
        await expectError(.notDirectory) { try store.childItem(named: "x", in: item.identifier) }
        await expectError(.notDirectory) { try store.enumerateItems(in: item.identifier) }
        try await store.synchronize()
    }

    func testImportKeepsStagedDatesAndMode() async throws {
        try makeStore()
        let staged = try stage("old.txt")
        let past = Date(timeIntervalSince1970: 1_600_000_000)
        try FileManager.default.setAttributes([.modificationDate: past, .posixPermissions: 0o640], ofItemAtPath: staged.path)
        let item = try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        XCTAssertEqual(item.contentModificationDate.timeIntervalSince1970, past.timeIntervalSince1970, accuracy: 0.001)
        XCTAssertEqual(item.posixPermissions, 0o640)
    }

    func testImportFromAnotherFilesystemCopies() async throws {
        try makeStore()
        let shm = URL(fileURLWithPath: "/dev/shm")
        var a = stat(), b = stat()
        guard stat(shm.path, &a) == 0, stat(storeURL.path, &b) == 0, a.st_dev != b.st_dev else {
            throw XCTSkip("no second filesystem at /dev/shm")
        }
        let dir = shm.appendingPathComponent("docfs-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let staged = dir.appendingPathComponent("far.txt")
        try Data("from afar".utf8).write(to: staged)
        let item = try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer)
        XCTAssertEqual(try contents(of: item.identifier), "from afar")
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path), "moved, not just copied")
    }

    func testImportDirectoryTree() async throws {
        try makeStore()
        let top = store.stagingDirectory.appendingPathComponent("upload/pkg")
        try FileManager.default.createDirectory(at: top.appendingPathComponent("sub/deeper"), withIntermediateDirectories: true)
        try Data("1".utf8).write(to: top.appendingPathComponent("one.txt"))
        try Data("22".utf8).write(to: top.appendingPathComponent("sub/two.json"))
        try Data("333".utf8).write(to: top.appendingPathComponent("sub/deeper/three"))
        try FileManager.default.createSymbolicLink(atPath: top.appendingPathComponent("link").path, withDestinationPath: "one.txt")
        let pkg = try await store.importDocument(at: top, toParentItemIdentifier: .rootContainer)
        XCTAssertEqual(pkg.kind, .folder)
        XCTAssertEqual(pkg.childItemCount, 3)
        XCTAssertEqual(pkg.childFolderCount, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: top.path))
        XCTAssertEqual(try names(in: pkg.identifier), ["link", "one.txt", "sub"])
        let sub = try store.childItem(named: "sub", in: pkg.identifier)
        XCTAssertEqual(sub.childItemCount, 2)
        XCTAssertEqual(sub.childFolderCount, 1)
        let two = try store.childItem(named: "two.json", in: sub.identifier)
        XCTAssertEqual(two.contentType, .json)
        XCTAssertEqual(try contents(of: two.identifier), "22")
        let deeper = try store.childItem(named: "deeper", in: sub.identifier)
        XCTAssertEqual(try contents(of: store.childItem(named: "three", in: deeper.identifier).identifier), "333")
        let link = try store.childItem(named: "link", in: pkg.identifier)
        XCTAssertEqual(link.kind, .symlink)
        XCTAssertEqual(link.symlinkTargetPath, "one.txt")
        XCTAssertEqual(try store.item(for: .rootContainer).childFolderCount, 1)
        try reopen()
        XCTAssertEqual(try names(in: pkg.identifier), ["link", "one.txt", "sub"])
        XCTAssertEqual(try store.item(for: sub.identifier).childItemCount, 2)
    }

    func testImportCollisionLeavesStagedFile() async throws {
        try makeStore()
        try await importFile("a.txt", "first")
        let staged = try stage("a.txt", "second")
        let error = await expectError(.filenameCollision) { try await store.importDocument(at: staged, toParentItemIdentifier: .rootContainer) }
        XCTAssertTrue(error?.reason.contains("'a.txt' already exists in /") ?? false, "\(String(describing: error))")
        XCTAssertTrue(FileManager.default.fileExists(atPath: staged.path), "a refused import moves nothing")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: storeURL.appendingPathComponent("contents").path).count, 1)
        let file = try store.childItem(named: "a.txt", in: .rootContainer)
        await expectError(.notDirectory) { try await store.importDocument(at: staged, toParentItemIdentifier: file.identifier) }
        await expectError(.noSuchItem) { try await store.importDocument(at: staged, toParentItemIdentifier: ItemIdentifier("777")) }
        await expectError(.noSuchItem) {
            try await store.importDocument(at: store.stagingDirectory.appendingPathComponent("missing.txt"), toParentItemIdentifier: .rootContainer)
        }
        _ = try await mkdir("dir")
        await expectError(.filenameCollision) { try await mkdir("dir") }
        await expectError(.filenameCollision) {
            try await store.createSymbolicLink(withName: "dir", target: "x", inParentItemIdentifier: .rootContainer)
        }
    }

    func testNameValidation() async throws {
        try makeStore()
        for bad in ["", ".", "..", "a/b"] {
            await expectError(.invalidName) { try await mkdir(bad) }
        }
        let long = String(repeating: "x", count: 256)
        await expectError(.nameTooLong) { try await mkdir(long) }
        let multibyte = String(repeating: "é", count: 128) // 256 bytes
        await expectError(.nameTooLong) { try await mkdir(multibyte) }
        XCTAssertNoThrow(try store.item(for: .rootContainer))
        _ = try await mkdir(String(repeating: "y", count: 255))
        let file = try await importFile("ok.txt")
        await expectError(.invalidName) { try await store.renameItem(withIdentifier: file.identifier, toName: "..") }
        await expectError(.nameTooLong) { try await store.renameItem(withIdentifier: file.identifier, toName: long) }
        // Distinct byte sequences are distinct names, even when canonically equivalent.
        _ = try await mkdir("caf\u{00E9}")
        _ = try await mkdir("cafe\u{0301}")
        XCTAssertEqual(try names().count, 4)
    }

    func testRenameAndReparent() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "A")
        _ = try await importFile("b.txt", "B")
        let dir = try await mkdir("dir")
        let renamed = try await store.renameItem(withIdentifier: a.identifier, toName: "c.txt")
        XCTAssertEqual(renamed.filename, "c.txt")
        XCTAssertEqual(renamed.identifier, a.identifier)
        XCTAssertGreaterThan(renamed.itemVersion.metadataVersion, a.itemVersion.metadataVersion)
        XCTAssertEqual(try names(), ["b.txt", "c.txt", "dir"])
        await expectError(.filenameCollision) { try await store.renameItem(withIdentifier: a.identifier, toName: "b.txt") }
        let same = try await store.renameItem(withIdentifier: a.identifier, toName: "c.txt")
        XCTAssertEqual(same.filename, "c.txt", "same name is a no-op")
        await expectError(.notPermitted) { try await store.renameItem(withIdentifier: .rootContainer, toName: "x") }

        let moved = try await store.reparentItem(
            withIdentifier: a.identifier, toParentItemWithIdentifier: dir.identifier, newName: nil, replacing: nil)
        XCTAssertEqual(moved.parentIdentifier, dir.identifier)
        XCTAssertEqual(try names(), ["b.txt", "dir"])
        XCTAssertEqual(try names(in: dir.identifier), ["c.txt"])
        XCTAssertEqual(try store.item(for: dir.identifier).childItemCount, 1)
        XCTAssertEqual(try store.item(for: .rootContainer).childItemCount, 2)
        let back = try await store.reparentItem(
            withIdentifier: a.identifier, toParentItemWithIdentifier: .rootContainer, newName: "a2.txt", replacing: nil)
        XCTAssertEqual(back.filename, "a2.txt")
        XCTAssertEqual(try contents(of: a.identifier), "A")
        XCTAssertEqual(try store.item(for: dir.identifier).childItemCount, 0)
    }

    func testReparentReplacing() async throws {
        try makeStore()
        let a = try await importFile("a.txt", "new")
        let dir = try await mkdir("dir")
        let old = try await importFile("a.txt", "old", into: dir.identifier)
        let oldContent = try XCTUnwrap(store.contentURL(of: old.identifier))
        // Without `replacing`, an existing name is a collision.
        await expectError(.filenameCollision) {
            try await store.reparentItem(withIdentifier: a.identifier, toParentItemWithIdentifier: dir.identifier, newName: nil, replacing: nil)
        }
        let replaced = try await store.reparentItem(
            withIdentifier: a.identifier, toParentItemWithIdentifier: dir.identifier,
            newName: nil, replacing: old.identifier)
        XCTAssertEqual(replaced.identifier, a.identifier)
        XCTAssertEqual(try store.childItem(named: "a.txt", in: dir.identifier).identifier, a.identifier)
        XCTAssertEqual(try contents(of: a.identifier), "new")
        await expectError(.noSuchItem) { try store.item(for: old.identifier) }
        store.contents.reaper.drain() // replaced contents are removed in the background
        XCTAssertFalse(FileManager.default.fileExists(atPath: oldContent.path), "the replaced contents are removed")
        XCTAssertEqual(try store.item(for: dir.identifier).childItemCount, 1)

        // Same folder, rename over an existing name.
        let b = try await importFile("b.txt", "bee", into: dir.identifier)
        _ = try await store.reparentItem(
            withIdentifier: b.identifier, toParentItemWithIdentifier: dir.identifier, newName: "a.txt", replacing: a.identifier)
        XCTAssertEqual(try names(in: dir.identifier), ["a.txt"])
        XCTAssertEqual(try contents(of: b.identifier), "bee")

        // Folders: replacing a non-empty folder is refused; an empty one is replaced.
        let full = try await mkdir("full")
        _ = try await importFile("x", into: full.identifier)
        let other = try await mkdir("other")
        await expectError(.directoryNotEmpty) {
            try await store.reparentItem(
                withIdentifier: other.identifier, toParentItemWithIdentifier: .rootContainer, newName: "full", replacing: full.identifier)
        }
        await expectError(.isDirectory) {
            try await store.reparentItem(
                withIdentifier: b.identifier, toParentItemWithIdentifier: .rootContainer, newName: "full", replacing: full.identifier)
        }
        let empty = try await mkdir("empty")
        _ = try await store.reparentItem(
            withIdentifier: other.identifier, toParentItemWithIdentifier: .rootContainer, newName: "empty", replacing: empty.identifier)
        XCTAssertEqual(try names(), ["dir", "empty", "full"])
        XCTAssertEqual(try store.item(for: .rootContainer).childFolderCount, 3)
        try reopen()
        XCTAssertEqual(try names(), ["dir", "empty", "full"])
        XCTAssertEqual(try store.childItem(named: "empty", in: .rootContainer).identifier, other.identifier)
    }

    func testFolderCannotMoveIntoItself() async throws {
        try makeStore()
        let a = try await mkdir("a")
        let b = try await mkdir("b", in: a.identifier)
        let c = try await mkdir("c", in: b.identifier)
        await expectError(.invalidArgument) {
            try await store.reparentItem(withIdentifier: a.identifier, toParentItemWithIdentifier: c.identifier, newName: nil, replacing: nil)
        }
        await expectError(.invalidArgument) {
            try await store.reparentItem(withIdentifier: a.identifier, toParentItemWithIdentifier: a.identifier, newName: nil, replacing: nil)
        }
        let moved = try await store.reparentItem(
            withIdentifier: c.identifier, toParentItemWithIdentifier: .rootContainer, newName: nil, replacing: nil)
        XCTAssertEqual(moved.parentIdentifier, .rootContainer)
        XCTAssertEqual(try store.item(for: b.identifier).childFolderCount, 0)
        XCTAssertEqual(try store.item(for: .rootContainer).childFolderCount, 2)
    }

    func testDelete() async throws {
        try makeStore()
        let dir = try await mkdir("dir")
        let file = try await importFile("f.txt", into: dir.identifier)
        let content = try XCTUnwrap(store.contentURL(of: file.identifier))
        await expectError(.directoryNotEmpty) { try await store.deleteItem(withIdentifier: dir.identifier) }
        try await store.deleteItem(withIdentifier: file.identifier)
        store.contents.reaper.drain() // contents are removed in the background, after the action answers
        XCTAssertFalse(FileManager.default.fileExists(atPath: content.path))
        await expectError(.noSuchItem) { try store.item(for: file.identifier) }
        try await store.deleteItem(withIdentifier: dir.identifier)
        XCTAssertEqual(try names(), [])
        XCTAssertEqual(try store.item(for: .rootContainer).childFolderCount, 0)
        await expectError(.noSuchItem) { try await store.deleteItem(withIdentifier: dir.identifier) }
        await expectError(.notPermitted) { try await store.deleteItem(withIdentifier: .rootContainer) }
        await expectError(.notPermitted) { try await store.deleteItem(withIdentifier: .trashContainer) }
        try reopen()
        XCTAssertEqual(try names(), [])
    }

    func testTrashAndUntrash() async throws {
        try makeStore()
        let dir = try await mkdir("dir")
        let first = try await importFile("note.txt", "1", into: dir.identifier)
        let trashedFirst = try await store.trashItem(withIdentifier: first.identifier)
        XCTAssertEqual(trashedFirst.parentIdentifier, .trashContainer)
        XCTAssertEqual(trashedFirst.filename, "note.txt")
        let second = try await importFile("note.txt", "2", into: dir.identifier)
        let trashedSecond = try await store.trashItem(withIdentifier: second.identifier)
        XCTAssertEqual(trashedSecond.filename, "note 2.txt", "a collision in the trash gets a suffix")
        let third = try await importFile("note.txt", "3")
        let trashedThird = try await store.trashItem(withIdentifier: third.identifier)
        XCTAssertEqual(trashedThird.filename, "note 3.txt")
        XCTAssertEqual(try names(in: .trashContainer), ["note 2.txt", "note 3.txt", "note.txt"])
        XCTAssertEqual(try store.item(for: .trashContainer).childItemCount, 3)
        XCTAssertEqual(try names(), ["dir"], "the trash is not a child of the root")
        XCTAssertEqual(try names(in: dir.identifier), [])

        // Back to where it came from, under its own name.
        let restored = try await store.untrashItem(withIdentifier: second.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(restored.parentIdentifier, dir.identifier)
        XCTAssertEqual(restored.filename, "note.txt")
        XCTAssertEqual(try contents(of: second.identifier), "2")
        // The first one now collides at its origin.
        await expectError(.filenameCollision) { try await store.untrashItem(withIdentifier: first.identifier, toParentItemIdentifier: nil) }
        // …but can go elsewhere.
        let elsewhere = try await store.untrashItem(withIdentifier: first.identifier, toParentItemIdentifier: .rootContainer)
        XCTAssertEqual(elsewhere.parentIdentifier, .rootContainer)
        XCTAssertEqual(elsewhere.filename, "note.txt")
        await expectError(.invalidArgument) { try await store.untrashItem(withIdentifier: first.identifier, toParentItemIdentifier: nil) }

        // A trashed folder keeps its contents; when its origin is gone the item goes to the root.
        let box = try await mkdir("box", in: dir.identifier)
        _ = try await importFile("inside", into: box.identifier)
        _ = try await store.trashItem(withIdentifier: box.identifier)
        try await store.deleteItem(withIdentifier: second.identifier)
        try await store.deleteItem(withIdentifier: dir.identifier)
        let back = try await store.untrashItem(withIdentifier: box.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(back.parentIdentifier, .rootContainer)
        XCTAssertEqual(try names(in: box.identifier), ["inside"])
        await expectError(.notPermitted) { try await store.trashItem(withIdentifier: .rootContainer) }
    }

    func testMovingIntoTheTrashByHandRemembersTheOrigin() async throws {
        try makeStore()
        let dir = try await mkdir("dir")
        let file = try await importFile("f.txt", into: dir.identifier)
        let moved = try await store.reparentItem(
            withIdentifier: file.identifier, toParentItemWithIdentifier: .trashContainer, newName: nil, replacing: nil)
        XCTAssertEqual(moved.parentIdentifier, .trashContainer)
        let back = try await store.untrashItem(withIdentifier: file.identifier, toParentItemIdentifier: nil)
        XCTAssertEqual(back.parentIdentifier, dir.identifier)
    }

    func testModifyContents() async throws {
        try makeStore()
        let item = try await importFile("doc.txt", "version one")
        let oldFD = try store.openContents(of: item.identifier)
        defer { close(oldFD) }
        let staged = try stage("whatever", "v2")
        let stagedInode = inode(staged.path)
        let modified = try await store.modifyContents(ofItemWithIdentifier: item.identifier, from: staged)
        XCTAssertEqual(modified.documentSize, 2)
        XCTAssertEqual(modified.itemVersion.contentVersion, item.itemVersion.contentVersion + 1)
        XCTAssertGreaterThan(modified.itemVersion.metadataVersion, item.itemVersion.metadataVersion)
        XCTAssertEqual(modified.filename, "doc.txt")
        XCTAssertFalse(FileManager.default.fileExists(atPath: staged.path))
        XCTAssertEqual(inode(try XCTUnwrap(store.contentURL(of: item.identifier)).path), stagedInode)
        XCTAssertEqual(try contents(of: item.identifier), "v2")
        // A reader that had the old contents open keeps seeing them.
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = pread(oldFD, &buffer, buffer.count, 0)
        XCTAssertEqual(String(decoding: buffer[0..<max(count, 0)], as: UTF8.self), "version one")
        store.contents.reaper.drain() // the old version is removed in the background
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: store.stagingDirectory.path).filter { $0.hasPrefix(".previous") }, [])
        let dir = try await mkdir("d")
        await expectError(.isDirectory) { try await store.modifyContents(ofItemWithIdentifier: dir.identifier, from: staged) }
        try reopen()
        XCTAssertEqual(try store.item(for: item.identifier).documentSize, 2)
        XCTAssertEqual(try store.item(for: item.identifier).itemVersion.contentVersion, modified.itemVersion.contentVersion)
    }

    func testMetadataActions() async throws {
        try makeStore()
        let item = try await importFile("x.txt")
        var version = item.itemVersion.metadataVersion
        let tagged = try await store.setTagData(Data("a,b".utf8), forItemIdentifier: item.identifier)
        XCTAssertEqual(tagged.tagData, Data("a,b".utf8))
        XCTAssertGreaterThan(tagged.itemVersion.metadataVersion, version); version = tagged.itemVersion.metadataVersion
        let ranked = try await store.setFavoriteRank(3, forItemIdentifier: item.identifier)
        XCTAssertEqual(ranked.favoriteRank, 3)
        XCTAssertEqual(ranked.tagData, Data("a,b".utf8))
        XCTAssertGreaterThan(ranked.itemVersion.metadataVersion, version)
        let when = Date(timeIntervalSince1970: 1_234_567_890)
        let attrs = try await store.setAttributes(ofItemWithIdentifier: item.identifier, posixPermissions: 0o100755, contentModificationDate: when)
        XCTAssertEqual(attrs.posixPermissions, 0o755)
        XCTAssertEqual(attrs.contentModificationDate, when)
        XCTAssertEqual(attrs.itemVersion.contentVersion, item.itemVersion.contentVersion)
        let cleared = try await store.setTagData(nil, forItemIdentifier: item.identifier)
        XCTAssertNil(cleared.tagData)
        let unranked = try await store.setFavoriteRank(nil, forItemIdentifier: item.identifier)
        XCTAssertNil(unranked.favoriteRank)
        await expectError(.noSuchItem) { try await store.setTagData(nil, forItemIdentifier: ItemIdentifier("5555")) }
    }

    func testActionsAfterCloseFail() async throws {
        try makeStore()
        store.close()
        await expectError(.ioError) { try await mkdir("late") }
        XCTAssertNoThrow(try store.item(for: .rootContainer))
    }

    func testConcurrentReadsDuringWrites() async throws {
        try makeStore()
        let dir = try await mkdir("dir")
        let reader = Task.detached { [store] in
            var reads = 0
            for _ in 0..<2000 {
                let items = (try? store!.enumerateItems(in: dir.identifier)) ?? []
                for item in items { _ = try? store!.item(for: item.identifier) }
                reads += 1
            }
            return reads
        }
        for index in 0..<200 { _ = try await mkdir("sub\(index)", in: dir.identifier) }
        let reads = await reader.value
        XCTAssertEqual(reads, 2000)
        XCTAssertEqual(try store.item(for: dir.identifier).childItemCount, 200)
        XCTAssertEqual(try store.item(for: dir.identifier).childFolderCount, 200)
    }

    func testManyItemsStayFast() async throws {
        try makeStore()
        let dir = try await mkdir("many")
        let count = 3000
        let start = Date()
        for index in 0..<count { _ = try await mkdir(String(format: "item-%05d", index), in: dir.identifier) }
        let writeTime = Date().timeIntervalSince(start)
        let readStart = Date()
        for index in stride(from: 0, to: count, by: 7) {
            _ = try store.childItem(named: String(format: "item-%05d", index), in: dir.identifier)
        }
        let listed = try store.enumerateItems(in: dir.identifier)
        XCTAssertEqual(listed.count, count)
        XCTAssertEqual(listed.first?.filename, "item-00000")
        XCTAssertEqual(listed.last?.filename, String(format: "item-%05d", count - 1))
        let readTime = Date().timeIntervalSince(readStart)
        XCTAssertLessThan(readTime, 1.0, "reads come from memory")
        print("\(count) creates in \(writeTime)s; lookups and a listing in \(readTime)s")
        let openStart = Date()
        try reopen()
        print("reopen with \(store.itemCount) items in \(Date().timeIntervalSince(openStart))s")
        XCTAssertEqual(try store.enumerateItems(in: dir.identifier).count, count)
    }

    /// 100,000 items: set DOCFS_STORE_BIG=1 to run (about a minute).
    func testHundredThousandItems() async throws {
        guard ProcessInfo.processInfo.environment["DOCFS_STORE_BIG"] == "1" else { throw XCTSkip("set DOCFS_STORE_BIG=1") }
        try makeStore()
        let start = Date()
        var folders: [ItemIdentifier] = []
        for index in 0..<100 { folders.append(try await mkdir("folder-\(index)").identifier) }
        for index in 0..<50_000 { _ = try await mkdir("item-\(index)", in: folders[index % 100]) }
        let flat = try await mkdir("flat")
        for index in 0..<50_000 { _ = try await mkdir("n\(index)", in: flat.identifier) }
        print("100k creates in \(Date().timeIntervalSince(start))s")
        var t = Date()
        for index in 0..<100_000 { _ = try store.childItem(named: "n\(index % 50_000)", in: flat.identifier) }
        print("100k lookups in \(Date().timeIntervalSince(t))s")
        t = Date()
        XCTAssertEqual(try store.enumerateItems(in: flat.identifier).count, 50_000)
        print("first listing of 50k in \(Date().timeIntervalSince(t))s")
        t = Date()
        XCTAssertEqual(try store.enumerateItems(in: flat.identifier).count, 50_000)
        print("second listing of 50k in \(Date().timeIntervalSince(t))s")
        t = Date()
        try reopen()
        print("reopen with \(store.itemCount) items in \(Date().timeIntervalSince(t))s")
        t = Date()
        _ = try await mkdir("one-more", in: flat.identifier)
        print("one create in a 50k folder in \(Date().timeIntervalSince(t))s")
    }
}
