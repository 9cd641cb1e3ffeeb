#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// Imports: a staged file, symbolic link or folder tree becomes items and content files in one
// commit (content types and the folder's rules are checked first, in LocalStore+ContentTypes).
extension LocalStore {
    /// Imports a staged file, link or folder tree (see `Provider`): typed from its bytes, checked
    /// against the folder's rules, moved (renamed) into `contents/` and committed in one journal
    /// entry. The store takes the staged file by its sealed name (`withSealedPath`), so there is
    /// no rename into the access window first. The bridge and `docfs import --store` hand files
    /// over by path instead (`importStagedFile`). `attributes`: see `importSync`.
    package func importDocument(from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
                               attributes: NewItemAttributes?) async throws(ProviderError) -> Item {
        try file.withSealedPath { (path) throws(ProviderError) -> Item in
            let item = try importSync(path: path, name: file.name, toParent: parent, attributes: attributes)
            file.noteMovedAway()  // an import that succeeded has taken (or removed) the staged file
            return item
        }
    }

    /// The store's own hand-over (`StagedFileImportProvider`): the staged file at `path` in
    /// `staging/` becomes the item `name`, with no scope in between. On success the file is
    /// taken; on a refusal it is where it was.
    package func importStagedFile(at path: String, named name: String, toParentItemIdentifier parent: ItemIdentifier,
                                  attributes: NewItemAttributes?) async throws(ProviderError) -> Item {
        try importSync(path: path, name: name, toParent: parent, attributes: attributes)
    }

    /// Without `attributes` (`docfs import --store` of a user's files, the plain API), the items keep the
    /// mode and times of the files imported and belong to whoever runs the store. With them (a
    /// copy through the mount), the top item takes the caller's owner, group and mode and the
    /// times the program set; its contents (a package's files) belong to the same owner.
    /// With `contents` (a small file from the bridge's memory) there is no staged file: the
    /// bytes are the file's, and `attributes` give its times and mode.
    func importSync(path sourcePath: String, contents: [UInt8]? = nil, name: String, toParent parent: ItemIdentifier,
                    attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let status: FileStatus
            if let contents {
                let now = FileTime.now()
                status = FileStatus(kind: .file, size: Int64(contents.count), mode: attributes?.posixPermissions ?? 0o644,
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
            try planImport(path: sourcePath, name: name, status: status, parent: parentRecord, into: &plan, nextRow: &nextRow,
                           now: now, attributes: attributes, top: true)
            // Content types from the bytes, the folder's allowed types, document validation:
            // refused here, nothing has been moved yet. A copy through the mount leaves the type
            // of a file no rule checks to the first reader; `docfs import` of a user's files
            // (no `attributes`) types them now, from the files themselves.
            let admitted = try admitImport(plan.map { ($0.record, $0.source) }, into: parentRecord, contents: contents,
                                           lazily: attributes != nil)
            for index in plan.indices { plan[index].record = admitted[index] }
            // Move the contents in first, then commit the rows: a crash in between leaves only
            // content files without rows, which the next open removes (`StoreContents.placeNew`).
            let placed = try self.contents.placeNew(plan.lazy.filter { $0.record.item.kind == .file }
                .map { (row: $0.record.row, source: $0.source, size: $0.record.item.documentSize) }, contents: contents)
            FaultInjection.point(.importCommit)  // test-only crash point (DOCFS_FAULT)
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

    private func planImport(path: String, name: String, status: FileStatus, parent: Record,
                            into plan: inout [PlannedItem], nextRow: inout Int64,
                            now: FileTime, attributes: NewItemAttributes?, top: Bool) throws(ProviderError) {
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
            var record = newRecord(row: row, parent: parent, name: name, kind: .file, size: status.size, now: now,
                                   modified: given?.modificationTime ?? status.modificationTime,
                                   accessed: given?.accessTime ?? (attributes == nil ? nil : status.accessTime),
                                   attributes: own, mode: given == nil ? status.mode : nil, typed: false)
            // A copy's change time is its last write's (or attribute change's), not the import's.
            if let changed = given?.changeTime, changed < record.item.changeTime { record.item.changeTime = changed }
            plan.append(PlannedItem(record: record, source: path))
        case .symlink:
            let target = try sysReadlink(path)
            let record = newRecord(row: row, parent: parent, name: name, kind: .symlink, size: Int64(target.utf8.count),
                                   now: now, modified: given?.modificationTime ?? status.modificationTime,
                                   attributes: own, target: target)
            plan.append(PlannedItem(record: record, source: path))
        case .directory:
            var folder = newRecord(row: row, parent: parent, name: name, kind: .folder, now: now,
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
                try planImport(path: childPath, name: child, status: childStatus, parent: folder, into: &plan, nextRow: &nextRow,
                               now: now, attributes: attributes, top: false)
            }
            folder.item.childItemCount = names.count
            folder.item.childFolderCount = folderCount
            plan[index].record = folder
        case .other:
            throw ProviderError(.unsupported, "cannot import '\(name)': only files, folders, symbolic links, FIFOs and sockets can be stored, and only FIFOs and sockets made in the mount")
        }
    }
}

extension LocalStore: StagedFileImportProvider {}
