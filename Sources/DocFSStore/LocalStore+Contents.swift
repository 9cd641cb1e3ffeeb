#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The bytes of file items as the provider hands them out and takes them in: opening them for
// reading, small files read in place or imported from memory, and new content versions. The
// files themselves are the contents part's (`StoreContents`); these actions check the items and
// commit the rows.
extension LocalStore {
    package func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        let fd = try openStoredContents(of: identifier)
        if let replica, let onDemand = replica.onDemandHandler, let row = row(for: identifier) {
            onDemand.contentsOpened(row: replica.currentRow(row))
        }
        return fd
    }

    /// The file's contents opened for reading, downloaded first when only the server has them;
    /// contents on demand is not told (`openContents` tells it).
    package func openStoredContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        let found = try item(for: identifier)
        switch found.kind {
        case .folder: throw ProviderError(.isDirectory, "\(path(of: identifier)) is a folder")
        case .symlink: throw ProviderError(.invalidArgument, "\(path(of: identifier)) is a symbolic link")
        case .fifo, .socket, .characterDevice, .blockDevice:
            throw ProviderError(.invalidArgument, "\(path(of: identifier)) has no stored contents (a FIFO or socket)")
        case .file: break
        }
        let row = self.row(for: identifier)!
        if let fd = try contents.openSegmentContents(row) { return fd }
        var path = contents.path(row)
        if !found.isDownloaded, let current = replica?.currentRow(row), let record = tree.record(current),
            !record.item.isDownloaded
        {
            path = try downloadedPath(of: record) // a replica's file on the server only
        }
        let fd = sysOpen(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw ProviderError.posix(errno, "open contents of \(self.path(of: identifier))") }
        return fd
    }

    /// A new version based on `baseVersion`: when the item has another content version now
    /// (another replica's arrived since the writer's copy began), the bytes become a conflicted
    /// copy beside it, "NAME (conflicted copy from HOST DATE).EXT", and the item keeps the newer
    /// version: nothing written is put over what another replica wrote, and nothing is dropped.
    package func modifyContents(
        ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
        from fileURL: URL
    ) async throws(ProviderError) -> Item {
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
                case .symlink, .fifo, .socket, .characterDevice, .blockDevice:
                    throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not a regular file")
                case .file: return record
                }
            }
            if let base, base != record.item.itemVersion.contentVersion { return .moved(record) }
            logger.debug(
                "modify \(record.item.filename): version \(record.item.itemVersion.contentVersion + 1) over \(base.map(String.init) ?? "any")")
            let status = try fileStatus(sourcePath).get()
            guard status.kind == .file else {
                throw ProviderError(.invalidArgument, "new contents for \(record.item.filename) must be a regular file")
            }
            record = try admitModified(record, from: sourcePath)
            // The old contents stay reachable until the row is committed, to undo a failed commit.
            let replacement = try contents.replace(
                row, version: record.item.itemVersion.contentVersion, with: sourcePath,
                record.item.filename)
            record.item.documentSize = status.size
            // The staged file's time: the last write, or what the program set (futimens) after it.
            record.item.modificationTime = status.modificationTime
            FaultInjection.point(.modifyCommit) // test-only crash point (DOCFS_FAULT)
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
                contents.undo(replacement)
                throw error
            }
            contents.finish(replacement)
            return .modified(
                tree.update { tree -> Item in
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

    /// The writer's bytes beside the item, which keeps its newer version; answers the item. The
    /// copy's name and what is noted of it are the replica's decision (its `WriterConflictHandler`,
    /// DocFSReplica's `WriterConflicts`, beside the incoming conflicts); the store makes the copy.
    private func keepAsConflictedCopy(_ record: Record, from sourcePath: String, base: UInt64) throws(ProviderError) -> Item {
        guard let parent = record.parent else { throw ProviderError(.noSuchItem, "\(record.item.filename) has no folder") }
        let conflict = WriterConflict(
            row: record.row, name: record.item.filename, path: path(of: record.item.identifier),
            base: base, current: record.item.itemVersion.contentVersion)
        let handler = replica?.writerConflicts
        let place = tree.uniqueName(
            handler?.copyName(for: conflict) ?? Self.conflictCopyName(of: record.item.filename),
            in: parent, isFolder: false)
        let copy = try importSync(
            path: sourcePath, name: place, toParent: Self.identifier(forRow: parent),
            attributes: NewItemAttributes(
                ownerID: record.item.ownerID, groupID: record.item.groupID,
                posixPermissions: record.item.posixPermissions))
        if let handler {
            handler.kept(conflict, asCopy: self.row(for: copy.identifier) ?? 0, named: place)
        } else {
            logger.warning(
                "\(conflict.path): written while another replica's version \(conflict.current) arrived (the writer began at \(base)): the new version keeps the name, this one is \"\(place)\""
            )
        }
        return try item(for: record.item.identifier)
    }

    /// A conflicted copy's name without a replica to choose it: the name marked as a conflicted
    /// copy, its extension kept last.
    private static func conflictCopyName(of name: String) -> String {
        let (base, ext) = ItemNames.split(name)
        return ItemNames.fitted(base: base, marker: " (conflicted copy)", ext: ext)
    }

    /// A new file from the bridge's memory (`SmallFileImportProvider`): imported like a staged file,
    /// its bytes appended to a segment (or, past `smallFileLimit`, written to a content file).
    package func importDocument(
        contents: [UInt8], named name: String, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes
    ) async throws(ProviderError) -> Item {
        try importSync(path: "", contents: contents, name: name, toParent: parent, attributes: attributes)
    }

    /// A file kept in a segment, to be read in place (`StoredSliceProvider`); nil for a file with a
    /// content file of its own.
    package func openStoredSlice(of identifier: ItemIdentifier) throws(ProviderError) -> StoredSlice? {
        guard let row = self.row(for: identifier) else { return nil }
        return try contents.segments.slice(row)
    }

    /// A path to read a file item's bytes from, for whoever needs one (a replica's upload): a
    /// segment-stored file is given its content file first.
    package func readablePath(of identifier: ItemIdentifier) throws(ProviderError) -> String? {
        guard let row = self.row(for: identifier) else { return nil }
        if contents.segments.location(of: row) != nil {
            try write { (_) throws(ProviderError) in try contents.moveOutOfSegment(row) }
        }
        return contents.path(row)
    }
}

extension LocalStore: SmallFileImportProvider, StoredSliceProvider {}
