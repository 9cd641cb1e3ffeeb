import Foundation
import DocFSProvider
import GRDB

// The trash: trashing, restoring, and gathering what was trashed out of a folder.
extension LocalStore: TrashProvider {
    /// Moves the item to the top of the trash under a unique name, remembering its folder and
    /// name (`trashOrigin`); a folder takes along what was trashed out of it (`gatherTrashed`).
    /// Trashing what is already at the top of the trash answers it unchanged.
    package func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let (record, name, gathering) = try read { (tree) throws(ProviderError) -> (Record, String, [Record]) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard record.parent != nil else { throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be trashed") }
                let gathering = record.parent == Self.trashRow ? [] : Self.gatherTrashed(from: row, tree)
                return (record, tree.uniqueName(record.item.filename, in: Self.trashRow, isFolder: record.item.isFolder), gathering)
            }
            if record.parent == Self.trashRow { return record.item }
            return try moveSync(row: row, identifier: identifier, to: Self.trashRow, parent: .trashContainer, newName: name,
                                replacing: nil, database: database, trashing: .into(originalName: record.item.filename),
                                gathering: gathering)
        }
    }

    /// Trashing a folder takes along what was trashed out of it and is still at the top of the
    /// trash: `rm -r` trashes the files first, one by one, and then the emptied folders, so
    /// without this a folder would land in the trash empty and its files loose beside it. Each
    /// gathered item gets its original name back (unless that is taken in the folder).
    static func gatherTrashed(from folderRow: Int64, _ tree: borrowing TreeState) -> [Record] {
        guard tree.records[folderRow]?.item.isFolder == true else { return [] }
        var gathered: [Record] = []
        var used = tree.childNames(of: folderRow)
        for trashedRow in tree.sortedChildrenUncached(of: trashRow) {
            guard var record = tree.records[trashedRow], record.trashedFrom == folderRow else { continue }
            var name = record.trashedName ?? record.item.filename
            if used.contains(NameKey(name)) { name = record.item.filename }
            if used.contains(NameKey(name)) { continue }  // leave it loose rather than rename it twice
            used.insert(NameKey(name))
            record.parent = folderRow
            record.item.parentIdentifier = identifier(forRow: folderRow)
            record.item.filename = name
            record.item.noteMetadataChange(at: FileTime.now())
            record.trashedFrom = nil
            record.trashedName = nil
            gathered.append(record)
        }
        return gathered
    }

    /// `mv .Trash/x FOLDER/NAME`: restores under the name the move gives, in one step (see
    /// `Provider`; the plain form, back where it came from, is built on this).
    package func untrashItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
                            newName: String) async throws(ProviderError) -> Item {
        try ItemNames.validate(newName)
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let destination = try self.parentRow(parent)
            try read { (tree) throws(ProviderError) in
                guard tree.records[row] != nil else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard tree.isInTrash(row) else { throw ProviderError(.invalidArgument, "\(tree.path(of: row)) is not in the trash") }
                if tree.isInTrash(destination) || destination == Self.trashRow {
                    throw ProviderError(.invalidArgument, "cannot restore into the trash")
                }
            }
            return try moveSync(row: row, identifier: identifier, to: destination, parent: parent,
                                newName: newName, replacing: nil, database: database, trashing: .outOf)
        }
    }

    /// The folder and name an item at the top of the trash had before it was trashed. For an
    /// item with several names (hard links), the origin of its name at the top of the trash,
    /// whichever of its names that is (its own first; a name moved there with `moveName`).
    package func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? {
        guard let row = self.row(for: identifier) else { return nil }
        return tree.reading { tree -> TrashOrigin? in
            let row = tree.resolve(row)
            guard let record = tree.records[row] else { return nil }
            var trashed = record.parent == Self.trashRow ? record : nil
            if trashed?.trashedFrom == nil, record.linkOf == nil, record.item.linkCount > 1 {
                trashed = tree.childRecords(of: Self.trashRow).first { $0.linkOf == row && $0.trashedFrom != nil }
            }
            guard let trashed, let from = trashed.trashedFrom else { return nil }
            return TrashOrigin(parentIdentifier: Self.identifier(forRow: from), filename: trashed.trashedName ?? trashed.item.filename)
        }
    }
}
