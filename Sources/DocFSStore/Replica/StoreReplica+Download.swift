import Foundation
import DocFSProvider
import DocFSWire

// Items that come from the server (`docfs init --remote` of a tree the server already has):
// stored under the server's identifiers, and not sent back (no outbox entry); files as metadata,
// their contents downloaded when first opened.
extension StoreReplica {
    /// Stores one item from the server under its permanent identifier; its parent first.
    /// `contentFile`: a file's downloaded contents (moved into the store); nil for an empty file,
    /// or for one left on the server (`contentKey`), downloaded when first opened.
    package func addServerItem(_ server: ServerItem, contentFile: String? = nil) throws(ProviderError) {
        guard server.row > Self.trashRow, server.row < Self.temporaryRowBase else {
            throw ProviderError(.invalidArgument, "item \(server.row) from the server has an identifier docfs cannot keep")
        }
        try ItemNames.validate(server.name)
        try write { (database) throws(ProviderError) in
            let parent = try read { (tree) throws(ProviderError) -> Record in
                guard let parent = tree.records[server.parentRow], parent.item.isFolder else {
                    throw ProviderError(.noSuchItem, "no folder \(server.parentRow) for item \(server.row) from the server")
                }
                if tree.childRecord(named: server.name, in: server.parentRow) != nil {
                    throw ProviderError(.filenameCollision, "'\(server.name)' twice in folder \(server.parentRow) on the server")
                }
                return parent
            }
            let kind: ItemKind = server.kind == .file ? .file : server.kind == .folder ? .folder : .symlink
            var size: Int64 = 0
            if let file = contentFile {
                size = try fileStatus(file).get().size
            } else if kind == .file, server.contentKey != nil {
                size = server.size
            } else if let target = server.symlinkTargetPath {
                size = Int64(target.utf8.count)
            }
            let attributes = NewItemAttributes(ownerID: server.ownerID, groupID: server.groupID, posixPermissions: server.posixPermissions)
            var record = newRecord(
                row: server.row, parent: parent, name: server.name, kind: kind, size: size,
                now: server.creationTime,
                modified: server.modificationTime,
                attributes: attributes, mode: server.posixPermissions, target: server.symlinkTargetPath)
            record.item.changeTime = FileTime.now()
            // A folder the layout declares keeps its rules here too (its capabilities, and those of what is made in it).
            let folderPath = try read { (tree) throws(ProviderError) -> String in tree.path(of: parent.row) } + "/" + server.name
            if kind == .folder, let declared = layout.folder(atPath: folderPath) {
                record.item.capabilities = try declared.folderCapabilities
                record.contentsPolicy = try declared.contentsCapabilities
            }
            if kind == .file {
                // The server's version number: a later edit here is checked against it.
                record.item.itemVersion.contentVersion = UInt64(max(1, server.contentVersion))
                record.remoteKey = server.contentKey
                record.item.isDownloaded = contentFile != nil || server.contentKey == nil || server.size == 0
            }
            if kind == .file, record.item.isDownloaded {
                if let file = contentFile {
                    try sysRename(file, contents.path(server.row), "move the downloaded contents of \(server.name) into the store")
                } else {
                    let fd = sysOpen(contents.path(server.row), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw ProviderError.posix(errno, "create the contents of \(server.name)") }
                    sysClose(fd)
                }
            }
            try commit(database, saving: [record], replicated: false, "add \(server.name) from the server")
            self.tree.update { tree in
                tree.insert(record)
                if kind == .file && record.item.isDownloaded { tree.dirty.insert(server.row) }
            }
        }
    }
}
