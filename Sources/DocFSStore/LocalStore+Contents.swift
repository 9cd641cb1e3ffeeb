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
    public func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        let found = try item(for: identifier)
        switch found.kind {
        case .folder: throw ProviderError(.isDirectory, "\(path(of: identifier)) is a folder")
        case .symlink: throw ProviderError(.invalidArgument, "\(path(of: identifier)) is a symbolic link")
        case .fifo, .socket: throw ProviderError(.invalidArgument, "\(path(of: identifier)) has no stored contents (a FIFO or socket)")
        case .file: break
        }
        let row = self.row(for: identifier)!
        var path = contentPath(row)
        if !found.isDownloaded, let record = state.withLock({ $0.record(currentRow(row)) }), !record.item.isDownloaded {
            path = try downloadedPath(of: record)  // a replica's file on the server only
        }
        let fd = sysOpen(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw ProviderError.posix(errno, "open contents of \(self.path(of: identifier))") }
        replica?.onDemand.noteOpen(currentRow(row))
        return fd
    }

    public func modifyContents(ofItemWithIdentifier identifier: ItemIdentifier, from fileURL: URL) async throws(ProviderError) -> Item {
        let sourcePath = fileURL.path
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                switch record.item.kind {
                case .folder: throw ProviderError(.isDirectory, "\(tree.path(of: row)) is a folder")
                case .symlink, .fifo, .socket: throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not a regular file")
                case .file: return record
                }
            }
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
            record.item.noteMetadataChange(at: FileTime.now())
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
            return state.withLock { tree -> Item in
                tree.replaceKeepingCounts(record)
                tree.dirty.insert(row)
                return tree.records[row]!.item
            }
        }
    }
}
