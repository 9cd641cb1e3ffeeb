import Foundation
import DocFSProvider
import GRDB

// Hard links (`HardLinkProvider`). An item keeps its own row (identifier, contents, owner, mode,
// times, `links` = its number of names) at its first name; each further name is a *name row*:
// a row with a place of its own (`parent`, `name`) and `linkOf` set to the item's row, read as
// the item under that name (`TreeState.presented`). Each action is one journal entry, so a
// `kill -9` leaves it complete or absent; `docfs check` counts the names and `--repair` mends
// the counts.
extension LocalStore: HardLinkProvider {
    package func linkItem(withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
                          name: String) async throws(ProviderError) -> Item {
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
            FaultInjection.point(.linkCommit)  // test-only crash point (DOCFS_FAULT)
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

    package func removeName(_ name: String, inParentItemIdentifier parent: ItemIdentifier,
                            ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
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

    package func moveName(_ name: String, inParentItemIdentifier parent: ItemIdentifier, ofItemWithIdentifier identifier: ItemIdentifier,
                          toParentItemIdentifier newParent: ItemIdentifier, newName: String) async throws(ProviderError) -> Item {
        try ItemNames.validate(newName)
        return try write { (database) throws(ProviderError) -> Item in
            let parentRow = try self.parentRow(parent)
            let targetRow = try self.itemRow(identifier)
            let destinationRow = try self.parentRow(newParent)
            let (named, target, fromParent) = try namedRecords(name, in: parentRow, of: targetRow)
            let intoTrash = destinationRow == Self.trashRow && fromParent.row != Self.trashRow
            if intoTrash, let replica, replica.knownServerSchema() < StoreReplica.serverTrashedNamesVersion {
                throw ProviderError(.notPermitted, "the server's docfs schema keeps no trashed names (version \(StoreReplica.serverTrashedNamesVersion) does: its owner runs `docfs remote setup`); rm removes just that name")
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
              let otherRecord = try read({ $0.records[other] }) else {
            changed.item.linkCount = 1
            plan.deleting.append(target.row)
            if target.item.kind == .file { plan.dropped.append(target.row) }
            logger.warning("store \(url.path): item \(target.row) counted \(target.item.linkCount) names but has one; deleted with it (docfs check --repair mends such counts)")
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
