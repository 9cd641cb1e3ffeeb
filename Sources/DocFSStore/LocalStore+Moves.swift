import Foundation
import DocFSProvider
import DocFSWire
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

    package func reparentItem(
        withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?
    ) async throws(ProviderError) -> Item {
        if let newName { try ItemNames.validate(newName) }
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let destinationRow = try self.parentRow(parent)
            return try moveSync(
                row: row, identifier: identifier, to: destinationRow, parent: parent, newName: newName,
                replacing: replacing, database: database, trashing: nil)
        }
    }

    /// How a move concerns the trash (below): into it, remembering the original name,
    /// or out of it, forgetting the origin.
    enum TrashMove { case into(originalName: String), outOf }

    /// Moves an item to another folder (or the same one under a new name), replacing the item at
    /// the destination if `replacing` names it. One transaction; the replaced content file is
    /// unlinked after the commit.
    func moveSync(
        row: Int64, identifier: ItemIdentifier, to destinationRow: Int64, parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?, database: DatabaseQueue,
        trashing: TrashMove?, gathering: [Record] = []
    ) throws(ProviderError) -> Item {
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
                if existingRow == row { return nil } // already there under that name
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
                // One name of an item with several: only `moveName` (below) removes it.
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
            // An item deleted for good goes under all its names (hard links, below).
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
            return try moveSync(
                row: row, identifier: identifier, to: Self.trashRow, parent: .trashContainer, newName: name,
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
            if used.contains(NameKey(name)) { continue } // leave it loose rather than rename it twice
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
    package func untrashItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        newName: String
    ) async throws(ProviderError) -> Item {
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
            return try moveSync(
                row: row, identifier: identifier, to: destination, parent: parent,
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

// Hard links (`HardLinkProvider`). An item keeps its own row (identifier, contents, owner, mode,
// times, `links` = its number of names) at its first name; each further name is a *name row*:
// a row with a place of its own (`parent`, `name`) and `linkOf` set to the item's row, read as
// the item under that name (`TreeState.presented`). Each action is one journal entry, so a
// `kill -9` leaves it complete or absent; `docfs check` counts the names and `--repair` mends
// the counts.
extension LocalStore: HardLinkProvider {
    package func linkItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        name: String
    ) async throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        if let refusal = replica?.linkRefusal() { throw ProviderError(.notPermitted, refusal) }
        try admitItem(named: name, kind: (try item(for: identifier)).kind, into: parent)
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            let parentRow = try self.parentRow(parent)
            let (target, parentRecord) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let target = tree.records[tree.resolve(row)], target.linkOf == nil else {
                    throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
                }
                if target.item.isFolder { throw ProviderError(.notPermitted, "\(tree.path(of: target.row)): folders cannot be hard-linked") }
                guard target.parent != nil else { throw ProviderError(.notPermitted, "\(tree.path(of: target.row)) cannot be linked") }
                return (target, try checkedParent(tree, tree.resolve(parentRow), parent, name: name))
            }
            let now = FileTime.now()
            let nameRow = tree.nextRow
            var nameRecord = Record(row: nameRow, parent: parentRecord.row, item: target.item)
            nameRecord.item.identifier = Self.identifier(forRow: nameRow)
            nameRecord.item.parentIdentifier = parentRecord.item.identifier
            nameRecord.item.filename = name
            nameRecord.item.documentSize = 0
            nameRecord.item.linkCount = 1
            nameRecord.item.tagData = nil
            nameRecord.item.favoriteRank = nil
            nameRecord.linkOf = target.row
            var linked = target
            linked.item.linkCount += 1
            linked.item.noteMetadataChange(at: now)
            let newParent = Self.touched(parentRecord, now: now)
            FaultInjection.point(.linkCommit) // test-only crash point (DOCFS_FAULT)
            try commit(database, saving: [nameRecord, linked, newParent], "link \(name) to item \(target.row)")
            return tree.update { tree -> Item in
                tree.nextRow = max(tree.nextRow, nameRow + 1)
                tree.insert(nameRecord)
                tree.move(linked.row, to: linked)
                tree.replaceKeepingCounts(newParent)
                return tree.presented(tree.records[nameRow]!)
            }
        }
    }

    package func removeName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier,
        ofItemWithIdentifier identifier: ItemIdentifier
    ) async throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            let parentRow = try self.parentRow(parent)
            let targetRow = try self.itemRow(identifier)
            let (named, target, parentRecord) = try namedRecords(name, in: parentRow, of: targetRow)
            let now = FileTime.now()
            var plan = try removal(of: named, target: target, now: now, database: database)
            plan.saving.append(Self.touched(parentRecord, now: now))
            try commit(database, saving: plan.saving, deleting: plan.deleting, "unlink \(name) of item \(target.row)")
            finish(plan)
        }
    }

    package func moveName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier, ofItemWithIdentifier identifier: ItemIdentifier,
        toParentItemIdentifier newParent: ItemIdentifier, newName: String
    ) async throws(ProviderError) -> Item {
        try ItemNames.validate(newName)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let targetRow = try self.itemRow(identifier)
            let destinationRow = try self.parentRow(newParent)
            let (named, target, fromParent) = try namedRecords(name, in: parentRow, of: targetRow)
            let intoTrash = destinationRow == Self.trashRow && fromParent.row != Self.trashRow
            if intoTrash, let replica, replica.knownServerSchema() < ServerSchemaVersions.trashedNames {
                throw ProviderError(
                    .notPermitted,
                    "the server's docfs schema keeps no trashed names (version \(ServerSchemaVersions.trashedNames) does: its owner runs `docfs remote setup`); rm removes just that name"
                )
            }
            let (toParent, existing) = try read { (tree) throws(ProviderError) -> (Record, Record?) in
                guard let folder = tree.records[tree.resolve(destinationRow)] else {
                    throw ProviderError(.noSuchItem, "no folder with identifier '\(newParent)'")
                }
                guard folder.item.isFolder else { throw ProviderError(.notDirectory, "\(tree.path(of: folder.row)) is not a folder") }
                if target.item.isFolder, (try? self.folderBelow(folder.row, of: target.row, tree)) == true {
                    throw ProviderError(.invalidArgument, "cannot move \(tree.path(of: target.row)) into itself")
                }
                let existing = tree.childRecord(named: newName, in: folder.row)
                if let existing {
                    let existingItem = existing.linkOf.flatMap { tree.records[$0] } ?? existing
                    if existingItem.row == target.row { throw ProviderError(.filenameCollision, "'\(newName)' already names the item") }
                    if target.item.isFolder && !existingItem.item.isFolder {
                        throw ProviderError(.notDirectory, "cannot replace \(tree.path(of: existing.row)), which is not a folder, with a folder")
                    }
                    if !target.item.isFolder && existingItem.item.isFolder {
                        throw ProviderError(.isDirectory, "cannot replace the folder \(tree.path(of: existing.row)) with a non-folder")
                    }
                    if existingItem.item.isFolder, !(tree.children[existingItem.row]?.isEmpty ?? true) {
                        throw ProviderError(.directoryNotEmpty, "cannot replace \(tree.path(of: existing.row)): the folder is not empty")
                    }
                }
                return (folder, existing)
            }
            let now = FileTime.now()
            var plan = Plan()
            if let existing {
                let existingTarget = try read { (tree) throws(ProviderError) -> Record in
                    guard let found = tree.records[existing.linkOf ?? existing.row] else {
                        throw ProviderError(.ioError, "\(tree.path(of: existing.row)) names an item the store does not have (docfs check --repair)")
                    }
                    return found
                }
                plan = try removal(of: existing, target: existingTarget, now: now, database: database)
            }
            // The name moves; the item's change time moves with it, as on ext4. The item's own
            // name retypes it, as a rename does.
            var changedTarget = target
            changedTarget.item.noteMetadataChange(at: now)
            var moved = named.linkOf == nil ? changedTarget : named
            moved.parent = toParent.row
            moved.item.parentIdentifier = toParent.item.identifier
            moved.item.filename = newName
            // A name in the trash is still a name of the item (the link count keeps it, as a
            // trash folder on ext4 would); it remembers where it came from, as a trashed item.
            if intoTrash {
                moved.trashedFrom = fromParent.row
                moved.trashedName = name
            } else if toParent.row != Self.trashRow {
                moved.trashedFrom = nil
                moved.trashedName = nil
            }
            if named.linkOf == nil {
                moved.item = retyped(target, as: moved.item, name: newName, policy: fromParent.contentsPolicy)
            } else {
                plan.saving.append(changedTarget)
            }
            plan.saving.append(moved)
            plan.saving.append(Self.touched(fromParent, now: now))
            if toParent.row != fromParent.row { plan.saving.append(Self.touched(toParent, now: now)) }
            try commit(database, saving: plan.saving, deleting: plan.deleting, "move \(name) of item \(target.row) to \(newName)")
            finish(plan)
            return tree.reading { tree -> Item in tree.presented(tree.records[moved.row]!) }
        }
    }

    // MARK: - Names

    /// Changes to make: rows deleted, records saved (in order: an item taking another name's
    /// place before the row that takes the item's), and contents to drop after the commit.
    struct Plan {
        var saving: [Record] = []
        var deleting: [Int64] = []
        var dropped: [Int64] = []
    }

    /// The record of the name `name` in `parentRow`, the item it names (which must be
    /// `targetRow`) and the folder.
    private func namedRecords(_ name: String, in parentRow: Int64, of targetRow: Int64) throws(ProviderError) -> (Record, Record, Record) {
        try read { (tree) throws(ProviderError) -> (Record, Record, Record) in
            let parentRow = tree.resolve(parentRow)
            guard let folder = tree.records[parentRow], folder.item.isFolder else {
                throw ProviderError(.noSuchItem, "no folder \(tree.path(of: parentRow))")
            }
            guard let named = tree.childRecord(named: name, in: parentRow) else {
                throw ProviderError(.noSuchItem, "no '\(name)' in \(tree.path(of: parentRow))")
            }
            let itemRow = named.linkOf ?? named.row
            guard itemRow == tree.resolve(targetRow), let target = tree.records[itemRow] else {
                throw ProviderError(.noSuchItem, "'\(name)' in \(tree.path(of: parentRow)) names another item")
            }
            return (named, target, folder)
        }
    }

    /// What removing the name `named` of `target` takes: a name row goes and the item counts one
    /// name less; the item's own name passes to one of its name rows (which goes); an item's
    /// last name takes the item (and its contents) with it.
    private func removal(of named: Record, target: Record, now: FileTime, database: DatabaseQueue) throws(ProviderError) -> Plan {
        var plan = Plan()
        if named.linkOf == nil, target.item.linkCount <= 1 {
            if target.item.isFolder, !(try read { $0.children[target.row]?.isEmpty ?? true }) {
                throw ProviderError(.directoryNotEmpty, "the folder is not empty")
            }
            plan.deleting.append(target.row)
            if target.item.kind == .file { plan.dropped.append(target.row) }
            return plan
        }
        var changed = target
        changed.item.linkCount = max(target.item.linkCount - 1, 1)
        changed.item.noteMetadataChange(at: now)
        if named.linkOf != nil {
            plan.deleting.append(named.row)
            plan.saving.append(changed)
            return plan
        }
        // The item's own name goes: it takes the place of another of its names.
        guard let other = try nameRows(of: target.row, database).first,
            let otherRecord = try read({ $0.records[other] })
        else {
            changed.item.linkCount = 1
            plan.deleting.append(target.row)
            if target.item.kind == .file { plan.dropped.append(target.row) }
            logger.warning(
                "store \(url.path): item \(target.row) counted \(target.item.linkCount) names but has one; deleted with it (docfs check --repair mends such counts)"
            )
            return plan
        }
        changed.parent = otherRecord.parent
        changed.item.parentIdentifier = otherRecord.item.parentIdentifier
        changed.item.filename = otherRecord.item.filename
        changed.trashedFrom = otherRecord.trashedFrom
        changed.trashedName = otherRecord.trashedName
        plan.deleting.append(other)
        plan.saving.append(changed)
        return plan
    }

    /// The name rows of an item, from SQLite once the journal's batch is in it.
    func nameRows(of row: Int64, _ database: DatabaseQueue) throws(ProviderError) -> [Int64] {
        try flushJournal(database)
        do {
            return try database.inDatabase { db in
                try Int64.fetchAll(db, sql: "SELECT id FROM item WHERE linkOf = ? ORDER BY id", arguments: [row])
            }
        } catch {
            throw ProviderError(.ioError, "store \(url.path): cannot read the names of item \(row): \(error)")
        }
    }

    /// Memory after a plan's commit: deleted rows out, saved records in their places, dropped
    /// contents to the reaper.
    private func finish(_ plan: Plan) {
        for row in plan.dropped { contents.drop(row) { "the contents of deleted item \(row)" } }
        tree.update { tree in
            for row in plan.deleting { tree.remove(row) }
            // Folders here are the folders a name left or entered (their counts follow the
            // removals and moves); everything else is an item or a name in its (new) place.
            for record in plan.saving {
                if record.item.isFolder { tree.replaceKeepingCounts(record) } else { tree.move(record.row, to: record) }
            }
        }
    }

    /// Whether `folder` is `row` or below it.
    private func folderBelow(_ folder: Int64, of row: Int64, _ tree: borrowing TreeState) throws(ProviderError) -> Bool {
        var cursor: Int64? = folder
        var steps = 0
        while let current = cursor, steps < 4096 {
            if current == row { return true }
            cursor = tree.records[current]?.parent
            steps += 1
        }
        return false
    }
}
