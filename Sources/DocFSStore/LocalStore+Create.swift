#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB
import Logging

// New items: the checks and records every new item goes through (imports too), and the actions
// that make folders, symbolic links, FIFOs and sockets.
extension LocalStore: SpecialItemProvider {
    /// A folder that can receive a new child named `name`, or the rule that refuses.
    func checkedParent(_ tree: TreeState, _ parentRow: Int64, _ parent: ItemIdentifier, name: String) throws(ProviderError) -> Record {
        guard let folder = tree.records[parentRow] else {
            throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'")
        }
        guard folder.item.isFolder else {
            throw ProviderError(.notDirectory, "\(tree.path(of: parentRow)) is not a folder")
        }
        if tree.children[parentRow]?[NameKey(name)] != nil {
            throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parentRow))")
        }
        return folder
    }

    /// A parent's record after a child was added or removed: directory-mtime semantics.
    static func touched(_ record: Record, now: FileTime) -> Record {
        var record = record
        record.item.modificationTime = now
        record.item.noteMetadataChange(at: now)
        return record
    }

    /// A folder an entry appeared in at `entry` (a copy's create, earlier than its import): its
    /// times move to then, never back before a later change already recorded.
    static func touched(_ record: Record, entry: FileTime) -> Record {
        var record = record
        record.item.modificationTime = max(record.item.modificationTime, entry)
        record.item.noteMetadataChange(at: max(record.item.changeTime, entry))
        return record
    }

    /// A new record for an item created inside `parent`, with the parent's contents policy.
    /// `typed: false` leaves the content type to the caller (an import types every item from its
    /// bytes afterwards; typing the name here too cost a glob match per file).
    /// Owner, group and mode come from `attributes` (the caller's, set by the bridge); without
    /// them the item belongs to whoever runs the store. Times: `modified` (and `accessed`) as
    /// given, birth and change time now.
    func newRecord(
        row: Int64, parent: Record, name: String, kind: ItemKind, size: Int64 = 0,
        now: FileTime, modified: FileTime? = nil, accessed: FileTime? = nil,
        attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil,
        typed: Bool = true
    ) -> Record {
        let policy = parent.contentsPolicy ?? .all
        let type = typed || kind != .file ? types.type(forFilename: name, kind: kind) : ContentType.data
        var item = Item(
            identifier: Self.identifier(forRow: row), parentIdentifier: parent.item.identifier, filename: name,
            kind: kind, contentType: type, documentSize: size,
            childItemCount: kind == .folder ? 0 : nil, creationDate: .distantPast, contentModificationDate: .distantPast,
            capabilities: types.capabilities(policy, for: type), symlinkTargetPath: target,
            posixPermissions: mode ?? attributes?.posixPermissions, ownerID: attributes?.ownerID, groupID: attributes?.groupID)
        item.creationTime = now
        item.changeTime = now
        item.modificationTime = modified ?? attributes?.modificationTime ?? now
        // An item made through the mount was last used when it was made, as on ext4.
        item.accessTime = accessed ?? attributes?.accessTime ?? (attributes == nil ? nil : now)
        if kind == .symlink { item.posixPermissions = 0o777 }
        var record = Record(row: row, parent: parent.row, item: item)
        if kind == .folder { record.contentsPolicy = parent.contentsPolicy }
        return record
    }

    /// A new folder (see `Provider`); it takes its parent's contents policy. Without
    /// `attributes` it belongs to whoever runs the store, mode 0755.
    package func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try createSync(name: name, parent: parent, kind: .folder, target: nil, attributes: attributes)
    }

    /// A new symbolic link, its target stored as given (see `Provider`).
    package func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try ItemNames.validateSymbolicLinkTarget(target)
        return try createSync(name: name, parent: parent, kind: .symlink, target: target, attributes: attributes)
    }

    /// FIFOs and sockets: items with no contents, never typed or validated as documents.
    package func createSpecialItem(
        withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        guard kind.isSpecial else { throw ProviderError(.invalidArgument, "only FIFOs, sockets and device nodes are special items") }
        return try createSync(name: name, parent: parent, kind: kind, target: nil, attributes: attributes)
    }

    private func createSync(
        name: String, parent: ItemIdentifier, kind: ItemKind, target: String?,
        attributes: NewItemAttributes?
    ) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let parentRecord = try read { (tree) throws(ProviderError) in try checkedParent(tree, parentRow, parent, name: name) }
            let row = tree.nextRow
            let now = FileTime.now()
            var record = newRecord(
                row: row, parent: parentRecord, name: name, kind: kind,
                size: Int64(target?.utf8.count ?? 0), now: now, attributes: attributes, target: target)
            if kind.isDevice { record.item.deviceNumber = attributes?.deviceNumber ?? 0 }
            let newParent = Self.touched(parentRecord, now: now)
            try commit(
                database, saving: [record, newParent],
                "create \(kind == .folder ? "folder" : kind == .symlink ? "symbolic link" : kind == .fifo ? "FIFO" : kind.isDevice ? "device node" : "socket") \(name)"
            )
            return tree.update { tree -> Item in
                tree.nextRow = max(tree.nextRow, row + 1)
                tree.insert(record)
                tree.replaceKeepingCounts(newParent)
                return tree.records[row]!.item
            }
        }
    }
}

// Imports: a staged file, symbolic link or folder tree becomes items and content files in one
// commit (content types and the folder's rules are checked first, in LocalStore+Attributes).
extension LocalStore {
    /// Imports a staged file, link or folder tree (see `Provider`): typed from its bytes, checked
    /// against the folder's rules, moved (renamed) into `contents/` and committed in one journal
    /// entry. The store takes the staged file by its sealed name (`withSealedPath`), so there is
    /// no rename into the access window first. The bridge and `docfs import --store` hand files
    /// over by path instead (`importStagedFile`). `attributes`: see `importSync`.
    package func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try file.withSealedPath { (path) throws(ProviderError) -> Item in
            let item = try importSync(path: path, name: file.name, toParent: parent, attributes: attributes)
            file.noteMovedAway() // an import that succeeded has taken (or removed) the staged file
            return item
        }
    }

    /// The store's own hand-over (`StagedFileImportProvider`): the staged file at `path` in
    /// `staging/` becomes the item `name`, with no scope in between. On success the file is
    /// taken; on a refusal it is where it was.
    package func importStagedFile(
        at path: String, named name: String, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try importSync(path: path, name: name, toParent: parent, attributes: attributes)
    }

    /// Without `attributes` (`docfs import --store` of a user's files, the plain API), the items keep the
    /// mode and times of the files imported and belong to whoever runs the store. With them (a
    /// copy through the mount), the top item takes the caller's owner, group and mode and the
    /// times the program set; its contents (a package's files) belong to the same owner.
    /// With `contents` (a small file from the bridge's memory) there is no staged file: the
    /// bytes are the file's, and `attributes` give its times and mode.
    func importSync(
        path sourcePath: String, contents: [UInt8]? = nil, name: String, toParent parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let status: FileStatus
            if let contents {
                let now = FileTime.now()
                status = FileStatus(
                    kind: .file, size: Int64(contents.count), mode: attributes?.posixPermissions ?? 0o644,
                    modificationTime: attributes?.modificationTime ?? now, accessTime: attributes?.accessTime ?? now,
                    changeTime: attributes?.changeTime ?? now, inode: 0, device: 0)
            } else {
                status = try fileStatus(sourcePath).get()
            }
            let parentRecord = try read { (tree) throws(ProviderError) in try checkedParent(tree, parentRow, parent, name: name) }
            // Plan the new items: one for a file or symlink, a tree for a directory.
            var plan: [PlannedItem] = []
            var nextRow = tree.nextRow
            let now = FileTime.now()
            try planImport(
                path: sourcePath, name: name, status: status, parent: parentRecord, into: &plan, nextRow: &nextRow,
                now: now, attributes: attributes, top: true)
            // Content types from the bytes, the folder's allowed types, document validation:
            // refused here, nothing has been moved yet. A copy through the mount leaves the type
            // of a file no rule checks to the first reader; `docfs import` of a user's files
            // (no `attributes`) types them now, from the files themselves.
            let admitted = try admitImport(
                plan.map { ($0.record, $0.source) }, into: parentRecord, contents: contents,
                lazily: attributes != nil)
            for index in plan.indices { plan[index].record = admitted[index] }
            // Move the contents in first, then commit the rows: a crash in between leaves only
            // content files without rows, which the next open removes (`StoreContents.placeNew`).
            let placed = try self.contents.placeNew(
                plan.lazy.filter { $0.record.item.kind == .file }
                    .map { (row: $0.record.row, source: $0.source, size: $0.record.item.documentSize) }, contents: contents)
            FaultInjection.point(.importCommit) // test-only crash point (DOCFS_FAULT)
            let newParent = Self.touched(parentRecord, entry: attributes?.entryTime ?? now)
            do throws(ProviderError) {
                try commit(database, saving: plan.map(\.record) + [newParent], "import \(name)")
            } catch {
                self.contents.undo(placed)
                throw error
            }
            self.contents.finish(placed, staged: contents == nil)
            // Committed: the staged directories (and symlinks) are no longer needed.
            if status.kind != .file, contents == nil { removeTree(sourcePath) }
            let top = tree.update { tree -> Item in
                tree.nextRow = max(tree.nextRow, nextRow)
                for planned in plan {
                    tree.insert(planned.record)
                    if planned.record.item.kind == .file { tree.dirty.insert(planned.record.row) }
                }
                tree.replaceKeepingCounts(newParent)
                return tree.records[plan[0].record.row]!.item
            }
            return top
        }
    }

    private struct PlannedItem {
        var record: Record
        var source: String
    }

    private func planImport(
        path: String, name: String, status: FileStatus, parent: Record,
        into plan: inout [PlannedItem], nextRow: inout Int64,
        now: FileTime, attributes: NewItemAttributes?, top: Bool
    ) throws(ProviderError) {
        try ItemNames.validate(name)
        let row = nextRow
        nextRow += 1
        // The top item of a copy through the mount: the caller's owner, group and mode, and the
        // times the staged file carries (what the program wrote or set). Otherwise the source's.
        let given = top ? attributes : nil
        var owned = attributes
        owned?.posixPermissions = status.mode
        let own = given ?? owned
        switch status.kind {
        case .file:
            var record = newRecord(
                row: row, parent: parent, name: name, kind: .file, size: status.size, now: now,
                modified: given?.modificationTime ?? status.modificationTime,
                accessed: given?.accessTime ?? (attributes == nil ? nil : status.accessTime),
                attributes: own, mode: given == nil ? status.mode : nil, typed: false)
            // A copy's change time is its last write's (or attribute change's), not the import's.
            if let changed = given?.changeTime, changed < record.item.changeTime { record.item.changeTime = changed }
            plan.append(PlannedItem(record: record, source: path))
        case .symlink:
            let target = try sysReadlink(path)
            let record = newRecord(
                row: row, parent: parent, name: name, kind: .symlink, size: Int64(target.utf8.count),
                now: now, modified: given?.modificationTime ?? status.modificationTime,
                attributes: own, target: target)
            plan.append(PlannedItem(record: record, source: path))
        case .directory:
            var folder = newRecord(
                row: row, parent: parent, name: name, kind: .folder, now: now,
                modified: given?.modificationTime ?? status.modificationTime,
                attributes: own, mode: given == nil ? status.mode : nil)
            let index = plan.count
            plan.append(PlannedItem(record: folder, source: path))
            let names = try directoryEntries(path).sorted()
            var folderCount = 0
            for child in names {
                let childPath = path + "/" + child
                let childStatus = try fileStatus(childPath).get()
                if childStatus.kind == .directory { folderCount += 1 }
                try planImport(
                    path: childPath, name: child, status: childStatus, parent: folder, into: &plan, nextRow: &nextRow,
                    now: now, attributes: attributes, top: false)
            }
            folder.item.childItemCount = names.count
            folder.item.childFolderCount = folderCount
            plan[index].record = folder
        case .other:
            throw ProviderError(
                .unsupported,
                "cannot import '\(name)': only files, folders, symbolic links, FIFOs and sockets can be stored, and only FIFOs and sockets made in the mount"
            )
        }
    }
}

extension LocalStore: StagedFileImportProvider {}

/// The shape of a generated tree for scale tests and `make bench-scale`: one flat folder of
/// `bigFolderFiles` files (`/big/f0000000…`) and a tree of the remaining files, `filesPerFolder` in
/// each leaf folder (`/tree/dNNNN/sNN/fNNNN`), ten leaves per middle folder.
package struct ScaleShape: Sendable {
    package var items: Int
    package var bigFolderFiles: Int
    package var filesPerFolder: Int
    /// Bytes in each file's contents (0: empty content files).
    package var fileSize: Int

    package init(items: Int, bigFolderFiles: Int? = nil, filesPerFolder: Int = 1000, fileSize: Int = 0) {
        self.items = max(items, 10)
        self.bigFolderFiles = min(bigFolderFiles ?? min(100_000, self.items / 10), self.items / 2)
        self.filesPerFolder = max(filesPerFolder, 1)
        self.fileSize = max(fileSize, 0)
    }

    /// Files of the tree part and its leaf and middle folders, with the two top folders counted
    /// as items too, so that the total is about `items`.
    package var treeFiles: Int {
        let rest = items - bigFolderFiles - 2
        let leaves = max(1, rest / (filesPerFolder + 1))
        return max(0, rest - leaves - (leaves + 9) / 10)
    }
}

extension LocalStore {
    /// Adds a generated tree (`shape`) to a store that no mount has open, in transactions of
    /// 50,000 rows written straight to SQLite (the journal is for acknowledged actions; nobody
    /// waits for these), with an empty or small content file per file item. Built with the store's
    /// own record rules (`newRecord`: owner, mode, capabilities, type), not through FUSE, so a
    /// million items take a minute or so. Returns the number of items added.
    package static func populate(
        at url: URL, shape: ScaleShape, logger: Logger,
        progress: ((Int) -> Void)? = nil
    ) throws -> Int {
        let store = try open(at: url, logger: logger, cacheItems: 1024)
        defer { store.close() }
        return try store.populate(shape, progress: progress)
    }

    private func populate(_ shape: ScaleShape, progress: ((Int) -> Void)?) throws -> Int {
        try write { (database) throws(ProviderError) -> Int in
            try flushJournal(database)
            let root: Record = try read { (tree) throws(ProviderError) -> Record in
                guard let root = tree.records[Self.rootRow] else { throw ProviderError(.corruptFile, "no root") }
                for name in ["big", "tree"] where tree.children[Self.rootRow]?[NameKey(name)] != nil {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in the store's root: populate an empty store")
                }
                return root
            }
            var nextRow = tree.nextRow
            let now = FileTime.now()
            let attributes = NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o644)
            let folderAttributes = NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o755)
            var batch: [Record] = []
            batch.reserveCapacity(50_000)
            var added = 0
            let payload = [UInt8](repeating: UInt8(ascii: "x"), count: shape.fileSize)

            func flush() throws(ProviderError) {
                guard !batch.isEmpty else { return }
                let records = batch
                do {
                    try database.inDatabase { db in
                        try db.inTransaction {
                            for record in records { try Schema.upsert(db, record) }
                            return .commit
                        }
                    }
                } catch let error as DatabaseError {
                    throw StoreWriter.providerError(error, "populate")
                } catch {
                    throw ProviderError(.ioError, "populate: \(error)")
                }
                added += batch.count
                batch.removeAll(keepingCapacity: true)
                progress?(added)
            }
            func make(_ name: String, in parent: Record, kind: ItemKind) throws(ProviderError) -> Record {
                let record = newRecord(
                    row: nextRow, parent: parent, name: name, kind: kind,
                    size: kind == .file ? Int64(shape.fileSize) : 0, now: now,
                    attributes: kind == .folder ? folderAttributes : attributes)
                nextRow += 1
                if kind == .file {
                    let fd = sysOpen(contents.path(record.row), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw ProviderError.posix(errno, "create contents of \(name)") }
                    if !payload.isEmpty { _ = payload.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
                    sysClose(fd)
                }
                batch.append(record)
                if batch.count >= 50_000 { try flush() }
                return record
            }

            let big = try make("big", in: root, kind: .folder)
            for index in 0..<shape.bigFolderFiles {
                _ = try make(String(format: "f%07d.txt", index), in: big, kind: .file)
            }
            let tree = try make("tree", in: root, kind: .folder)
            var remaining = shape.treeFiles
            var top = 0
            while remaining > 0 {
                let middle = try make(String(format: "d%04d", top), in: tree, kind: .folder)
                top += 1
                for sub in 0..<10 where remaining > 0 {
                    let leaf = try make(String(format: "s%02d", sub), in: middle, kind: .folder)
                    let count = min(shape.filesPerFolder, remaining)
                    for index in 0..<count { _ = try make(String(format: "f%04d.txt", index), in: leaf, kind: .file) }
                    remaining -= count
                }
            }
            try flush()
            do {
                try database.inDatabase { db in
                    try db.execute(sql: "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'item'", arguments: [nextRow - 1])
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            } catch {
                throw ProviderError(.ioError, "populate: \(error)")
            }
            self.tree.update { tree in
                tree.nextRow = nextRow
                tree.forget(Self.rootRow)
                _ = tree.record(Self.rootRow)
            }
            return added
        }
    }
}
