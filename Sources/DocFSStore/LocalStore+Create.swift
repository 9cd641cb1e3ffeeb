#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

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
    func newRecord(row: Int64, parent: Record, name: String, kind: ItemKind, size: Int64 = 0,
                   now: FileTime, modified: FileTime? = nil, accessed: FileTime? = nil,
                   attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil,
                   typed: Bool = true) -> Record {
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
    package func createDirectory(withName name: String, inParentItemIdentifier parent: ItemIdentifier,
                                attributes: NewItemAttributes?) async throws(ProviderError) -> Item {
        try createSync(name: name, parent: parent, kind: .folder, target: nil, attributes: attributes)
    }

    /// A new symbolic link, its target stored as given (see `Provider`).
    package func createSymbolicLink(withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
                                   attributes: NewItemAttributes?) async throws(ProviderError) -> Item {
        try ItemNames.validateSymbolicLinkTarget(target)
        return try createSync(name: name, parent: parent, kind: .symlink, target: target, attributes: attributes)
    }

    /// FIFOs and sockets: items with no contents, never typed or validated as documents.
    package func createSpecialItem(withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
                                  attributes: NewItemAttributes?) async throws(ProviderError) -> Item {
        guard kind.isSpecial else { throw ProviderError(.invalidArgument, "only FIFOs, sockets and device nodes are special items") }
        return try createSync(name: name, parent: parent, kind: kind, target: nil, attributes: attributes)
    }

    private func createSync(name: String, parent: ItemIdentifier, kind: ItemKind, target: String?,
                            attributes: NewItemAttributes?) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let parentRecord = try read { (tree) throws(ProviderError) in try checkedParent(tree, parentRow, parent, name: name) }
            let row = tree.nextRow
            let now = FileTime.now()
            var record = newRecord(row: row, parent: parentRecord, name: name, kind: kind,
                                   size: Int64(target?.utf8.count ?? 0), now: now, attributes: attributes, target: target)
            if kind.isDevice { record.item.deviceNumber = attributes?.deviceNumber ?? 0 }
            let newParent = Self.touched(parentRecord, now: now)
            try commit(database, saving: [record, newParent], "create \(kind == .folder ? "folder" : kind == .symlink ? "symbolic link" : kind == .fifo ? "FIFO" : kind.isDevice ? "device node" : "socket") \(name)")
            return tree.update { tree -> Item in
                tree.nextRow = max(tree.nextRow, row + 1)
                tree.insert(record)
                tree.replaceKeepingCounts(newParent)
                return tree.records[row]!.item
            }
        }
    }
}
