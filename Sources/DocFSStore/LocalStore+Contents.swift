#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The bytes of file items: opening them for reading, and new content versions.
extension LocalStore {
    package func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        let found = try item(for: identifier)
        switch found.kind {
        case .folder: throw ProviderError(.isDirectory, "\(path(of: identifier)) is a folder")
        case .symlink: throw ProviderError(.invalidArgument, "\(path(of: identifier)) is a symbolic link")
        case .fifo, .socket, .characterDevice, .blockDevice: throw ProviderError(.invalidArgument, "\(path(of: identifier)) has no stored contents (a FIFO or socket)")
        case .file: break
        }
        let row = self.row(for: identifier)!
        if let fd = try openSegmentContents(row) { return fd }
        var path = contentPath(row)
        if !found.isDownloaded, let record = state.withLock({ $0.record(currentRow(row)) }), !record.item.isDownloaded {
            path = try downloadedPath(of: record)  // a replica's file on the server only
        }
        let fd = sysOpen(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw ProviderError.posix(errno, "open contents of \(self.path(of: identifier))") }
        replica?.onDemand.noteOpen(currentRow(row))
        return fd
    }

    /// A new version based on `baseVersion`: when the item has another content version now
    /// (another replica's arrived since the writer's copy began), the bytes become a conflicted
    /// copy beside it, "NAME (conflicted copy from HOST DATE).EXT", and the item keeps the newer
    /// version: nothing written is put over what another replica wrote, and nothing is dropped.
    package func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
                               from fileURL: URL) async throws(ProviderError) -> Item {
        try modify(identifier, from: fileURL.path, base: baseVersion?.contentVersion)
    }

    private func modify(_ identifier: ItemIdentifier, from sourcePath: String, base: UInt64?) throws(ProviderError) -> Item {
        enum Outcome { case modified(Item), moved(Record) }
        let outcome = try write { (database) throws(ProviderError) -> Outcome in
            let row = try self.itemRow(identifier)
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                switch record.item.kind {
                case .folder: throw ProviderError(.isDirectory, "\(tree.path(of: row)) is a folder")
                case .symlink, .fifo, .socket, .characterDevice, .blockDevice: throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not a regular file")
                case .file: return record
                }
            }
            if let base, base != record.item.itemVersion.contentVersion { return .moved(record) }
            logger.debug("modify \(record.item.filename): version \(record.item.itemVersion.contentVersion + 1) over \(base.map(String.init) ?? "any")")
            let status = try fileStatus(sourcePath).get()
            guard status.kind == .file else {
                throw ProviderError(.invalidArgument, "new contents for \(record.item.filename) must be a regular file")
            }
            record = try admitModified(record, from: sourcePath)
            // Keep the old contents reachable until the row is committed, to undo a failed commit.
            let target = contentPath(row)
            // Named per version: the old backup of this item may still be waiting for the reaper.
            let backup = stagingPath + "/.previous-\(row)-\(record.item.itemVersion.contentVersion)"
            _ = sysUnlink(backup)
            let hasBackup = sysLink(target, backup)
            try sysRename(sourcePath, target, "rename staged file over the contents of \(record.item.filename)")
            record.item.documentSize = status.size
            // The staged file's time: the last write, or what the program set (futimens) after it.
            record.item.modificationTime = status.modificationTime
            FaultInjection.point(.modifyCommit)  // test-only crash point (DOCFS_FAULT)
            record.item.itemVersion.contentVersion += 1
            // The change time of the last write (or attribute change) the staged file saw, so a
            // write leaves ctime equal to mtime, as on ext4; never earlier than the item's own.
            record.item.noteMetadataChange(at: max(record.item.changeTime, status.changeTime))
            // New bytes here: no object on the server has them yet.
            record.item.isDownloaded = true
            record.remoteKey = nil
            do throws(ProviderError) {
                try commit(database, saving: [record], "modify \(record.item.filename)")
            } catch {
                if hasBackup {
                    try? sysRename(target, sourcePath, "")
                    try? sysRename(backup, target, "")
                }
                throw error
            }
            if hasBackup { reaper.remove(backup) { "the previous contents of item \(row)" } }
            // A small file kept in a segment has a content file of its own from now on.
            if segments.location(of: row) != nil {
                segments.remove(row)
                scheduleCompaction()
            }
            return .modified(state.withLock { tree -> Item in
                tree.replaceKeepingCounts(record)
                tree.dirty.insert(row)
                return tree.records[row]!.item
            })
        }
        switch outcome {
        case .modified(let item): return item
        case .moved(let record): return try keepAsConflictedCopy(record, from: sourcePath, base: base ?? 0)
        }
    }

    /// The writer's bytes beside the item, which keeps its newer version; answers the item.
    private func keepAsConflictedCopy(_ record: Record, from sourcePath: String, base: UInt64) throws(ProviderError) -> Item {
        guard let parent = record.parent else { throw ProviderError(.noSuchItem, "\(record.item.filename) has no folder") }
        let name = ConflictNames.copy(of: record.item.filename, host: ConflictNames.hostName, date: Date())
        let place = state.withLock { $0.uniqueName(name, in: parent, isFolder: false) }
        let copy = try importSync(path: sourcePath, name: place, toParent: Self.identifier(forRow: parent),
                                  attributes: NewItemAttributes(ownerID: record.item.ownerID, groupID: record.item.groupID,
                                                                posixPermissions: record.item.posixPermissions))
        let path = self.path(of: record.item.identifier)
        let copyRow = self.row(for: copy.identifier) ?? 0
        noteConflict("this replica's edit of \"\(record.item.filename)\" (based on version \(base)) is \"\(place)\" beside it: another replica's version \(record.item.itemVersion.contentVersion) came first",
                     row: record.row, summary: "\(path): written while another replica's version arrived; this one's is \"\(place)\"")
        noteConflict("conflicted copy of \"\(record.item.filename)\": another replica's version arrived while it was being written",
                     row: copyRow, summary: "\(path): conflicted copy \"\(place)\"")
        logger.warning("\(path): written while another replica's version \(record.item.itemVersion.contentVersion) arrived (the writer began at \(base)): the new version keeps the name, this one is \"\(place)\"")
        return try item(for: record.item.identifier)
    }
}
