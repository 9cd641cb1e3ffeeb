import Foundation
import DocFSProvider
import GRDB

// Renames, moves to another folder (replacing an item there) and deletes.
extension LocalStore {
    package func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let (record, parentRecord) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard let parent = record.parent, let parentRecord = tree.records[parent] else {
                    throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be renamed")
                }
                if let existing = tree.children[parent]?[NameKey(name)], existing != row {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parent))")
                }
                return (record, parentRecord)
            }
            if record.item.filename.utf8.elementsEqual(name.utf8) { return record.item }
            let now = FileTime.now()
            var renamed = record
            renamed.item.filename = name
            renamed.item.noteMetadataChange(at: now)
            renamed.item = retyped(record, as: renamed.item, name: name, policy: parentRecord.contentsPolicy)
            let newParent = Self.touched(parentRecord, now: now)
            try commit(database, saving: [renamed, newParent], "rename \(record.item.filename) to \(name)")
            return tree.update { tree -> Item in
                tree.move(row, to: renamed)
                tree.replaceKeepingCounts(newParent)
                return tree.records[row]!.item
            }
        }
    }

    package func reparentItem(withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
                             newName: String?, replacing: ItemIdentifier?) async throws(ProviderError) -> Item {
        if let newName { try ItemNames.validate(newName) }
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let destinationRow = try self.parentRow(parent)
            return try moveSync(row: row, identifier: identifier, to: destinationRow, parent: parent, newName: newName,
                         replacing: replacing, database: database, trashing: nil)
        }
    }

    /// How a move concerns the trash (LocalStore+Trash): into it, remembering the original name,
    /// or out of it, forgetting the origin.
    enum TrashMove { case into(originalName: String), outOf }

    /// Moves an item to another folder (or the same one under a new name), replacing the item at
    /// the destination if `replacing` names it. One transaction; the replaced content file is
    /// unlinked after the commit.
    func moveSync(row: Int64, identifier: ItemIdentifier, to destinationRow: Int64, parent: ItemIdentifier,
                  newName: String?, replacing: ItemIdentifier?, database: DatabaseQueue,
                  trashing: TrashMove?, gathering: [Record] = []) throws(ProviderError) -> Item {
        struct Plan {
            var record: Record
            var oldParent: Record
            var newParent: Record
            var replaced: Record?
        }
        let plan = try read { (tree) throws(ProviderError) -> Plan? in
            guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
            guard let oldParentRow = record.parent, let oldParent = tree.records[oldParentRow] else {
                throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be moved")
            }
            guard let newParent = tree.records[destinationRow] else { throw ProviderError(.noSuchItem, "no folder with identifier '\(parent)'") }
            guard newParent.item.isFolder else { throw ProviderError(.notDirectory, "\(tree.path(of: destinationRow)) is not a folder") }
            let name = newName ?? record.item.filename
            if record.item.isFolder {
                // A folder may not move into itself or below itself.
                var cursor: Int64? = destinationRow
                while let current = cursor {
                    if current == row {
                        throw ProviderError(.invalidArgument, "cannot move \(tree.path(of: row)) into itself (\(tree.path(of: destinationRow)))")
                    }
                    cursor = tree.records[current]?.parent
                }
            }
            var replaced: Record?
            if let existingRow = tree.children[destinationRow]?[NameKey(name)] {
                if existingRow == row { return nil }  // already there under that name
                guard let replacing, Self.row(for: replacing).map(tree.resolve) == existingRow, let existing = tree.records[existingRow] else {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: destinationRow))")
                }
                if record.item.isFolder && !existing.item.isFolder {
                    throw ProviderError(.notDirectory, "cannot replace \(tree.path(of: existingRow)), which is not a folder, with a folder")
                }
                if !record.item.isFolder && existing.item.isFolder {
                    throw ProviderError(.isDirectory, "cannot replace the folder \(tree.path(of: existingRow)) with a non-folder")
                }
                if existing.item.isFolder, !(tree.children[existingRow]?.isEmpty ?? true) {
                    throw ProviderError(.directoryNotEmpty, "cannot replace \(tree.path(of: existingRow)): the folder is not empty")
                }
                // One name of an item with several: only `moveName` (LocalStore+Links) removes it.
                if existing.linkOf != nil || existing.item.linkCount > 1 {
                    throw ProviderError(.busy, "\(tree.path(of: existingRow)) is one name of a file with several; replace it with moveName")
                }
                replaced = existing
            }
            var moved = record
            moved.parent = destinationRow
            moved.item.parentIdentifier = newParent.item.identifier
            moved.item.filename = name
            moved.item.noteMetadataChange(at: FileTime.now())
            if newName != nil { moved.item = retyped(record, as: moved.item, name: name, policy: oldParent.contentsPolicy) }
            if destinationRow != Self.trashRow { try checkMove(moved, into: destinationRow, in: tree) }
            switch trashing {
            case .into(let originalName):
                moved.trashedFrom = oldParentRow
                moved.trashedName = originalName
            case .outOf, .none:
                if destinationRow != Self.trashRow {
                    moved.trashedFrom = nil
                    moved.trashedName = nil
                } else if oldParentRow != Self.trashRow {
                    // Moved into the trash by hand: remember the origin as trashItem does.
                    moved.trashedFrom = oldParentRow
                    moved.trashedName = record.item.filename
                }
            }
            return Plan(record: moved, oldParent: oldParent, newParent: newParent, replaced: replaced)
        }
        guard let plan else { return try item(for: identifier) }
        let now = plan.record.item.changeTime
        let oldParent = Self.touched(plan.oldParent, now: now)
        var saving = [plan.record, oldParent]
        if plan.newParent.row != plan.oldParent.row { saving.append(Self.touched(plan.newParent, now: now)) }
        let deleting = plan.replaced.map { [$0.row] } ?? []
        try commit(database, saving: gathering + saving, deleting: deleting, "move \(plan.record.item.filename)")
        if let replaced = plan.replaced, replaced.item.kind == .file {
            let replacedRow = replaced.row
            contents.drop(replacedRow) { "the contents of replaced item \(replacedRow)" }
        }
        return tree.update { tree -> Item in
            if let replaced = plan.replaced { tree.remove(replaced.row) }
            for gathered in gathering { tree.move(gathered.row, to: gathered) }
            tree.move(row, to: plan.record)
            for parentRecord in saving.dropFirst() { tree.replaceKeepingCounts(parentRecord) }
            return tree.records[row]!.item
        }
    }

    package func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            let row = try self.itemRow(identifier)
            let (record, parentRecord) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                guard let parent = record.parent, let parentRecord = tree.records[parent] else {
                    throw ProviderError(.notPermitted, "\(tree.path(of: row)) cannot be deleted")
                }
                if record.item.isFolder, !(tree.children[row]?.isEmpty ?? true) {
                    throw ProviderError(.directoryNotEmpty, "cannot delete \(tree.path(of: row)): the folder is not empty")
                }
                return (record, parentRecord)
            }
            let newParent = Self.touched(parentRecord, now: FileTime.now())
            // An item deleted for good goes under all its names (hard links, LocalStore+Links).
            let names = record.item.linkCount > 1 ? try nameRows(of: row, database) : []
            try commit(database, saving: [newParent], deleting: names + [row], "delete \(record.item.filename)")
            if record.item.kind == .file {
                contents.drop(row) { "the contents of deleted item \(row)" }
            }
            tree.update { tree in
                for name in names { tree.remove(name) }
                tree.remove(row)
                tree.replaceKeepingCounts(newParent)
            }
        }
    }
}
