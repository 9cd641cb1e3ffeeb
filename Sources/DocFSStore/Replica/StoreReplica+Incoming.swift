import Foundation
import DocFSProvider
import DocFSWire
import GRDB

/// The server's item (deleted and trashed ones included) as this replica's tree places it: the
/// server's identifiers are the store's rows, and the root's children are in row 1.
extension ServerItem {
    package var row: Int64 {
        get { id }
        set { id = newValue }
    }
    package var parentRow: Int64 {
        get { parentID ?? LocalStore.rootRow }
        set { parentID = newValue }
    }
}

// Changes other replicas made, as the server has them now, written to this replica's tree (not
// sent back: no outbox entry) as DocFSReplica's `IncomingApply` decided them, through a
// `ReplicaTreeEdit`: these are the mechanics (records, contents, commit, memory, the changes the
// kernel is told of).
extension StoreReplica {
    /// The content version of the item here (nil: no such item), for the replica's choice of
    /// what to fetch before applying (DocFSReplica's `IncomingSync.contentsNeeded`).
    package func contentVersion(ofRow row: Int64) -> UInt64? {
        self.tree.record(row)?.item.itemVersion.contentVersion
    }

    /// Rows with outbox entries still waiting, under the writer lock: the journal goes to SQLite first.
    func pendingRows(_ database: DatabaseQueue) throws(ProviderError) -> Set<Int64> {
        try flushJournal(database)
        do {
            return try database.inDatabase { db in Set(try Int64.fetchAll(db, sql: "SELECT DISTINCT row FROM outbox")) }
        } catch {
            throw ProviderError(.ioError, "read the outbox: \(error)")
        }
    }

    /// Runs the replica's edits of the tree under the writer lock; the kernel is told what they
    /// changed afterwards.
    package func editReplicaTree<T>(_ body: (ReplicaTreeEdit) throws(ProviderError) -> T) throws(ProviderError) -> T {
        let (result, changes) = try write { (database) throws(ProviderError) -> (T, [ProviderChange]) in
            // The journal's batch goes to SQLite first: edits read and rewrite the outbox's rows there.
            try flushJournal(database)
            let edit = ReplicaTreeEdit(store: self, database: database)
            let result = try body(edit)
            return (result, edit.changes)
        }
        if !changes.isEmpty { state.notify(changes) }
        return result
    }

    /// The server's state of an item at the place the replica decided (DocFSReplica's
    /// `IncomingApply`): created, moved, renamed, re-owned, or given new contents here.
    func putIncoming(
        _ item: ServerItem, as kind: ItemKind, at place: ReplicaPlace, contents: ReplicaNewContents?,
        database: DatabaseQueue, changes: inout [ProviderChange]
    ) throws(ProviderError) {
        let parentRow = place.parentRow
        let (local, parent) = try read { (tree) throws(ProviderError) -> (Record?, Record) in
            guard let parent = tree.records[parentRow], parent.item.isFolder else {
                throw ProviderError(.noSuchItem, "no folder \(parentRow) for \(place.name) from another replica")
            }
            return (tree.records[item.row], parent)
        }
        let now = FileTime.now()
        var record =
            local
            ?? newRecord(
                row: item.row, parent: parent, name: place.name, kind: kind, size: 0,
                now: item.creationTime,
                modified: item.modificationTime,
                attributes: nil, mode: item.posixPermissions, target: item.symlinkTargetPath)
        let before = local
        record.parent = parentRow
        record.item.parentIdentifier = parent.item.identifier
        if !record.item.filename.utf8.elementsEqual(place.name.utf8) || before?.parent != parentRow {
            let renamedFrom = record
            record.item.filename = place.name
            record.item = retyped(renamedFrom, as: record.item, name: place.name, policy: parent.contentsPolicy)
        }
        record.item.ownerID = item.ownerID
        record.item.groupID = item.groupID
        if kind != .symlink { record.item.posixPermissions = item.posixPermissions & 0o7777 }
        record.item.creationTime = item.creationTime
        if kind != .folder { record.item.modificationTime = item.modificationTime }
        record.item.tagData = item.tagData
        record.item.favoriteRank = item.favoriteRank
        record.trashedFrom = place.trashedFrom
        record.trashedName = place.trashedName
        if kind == .symlink {
            record.item.symlinkTargetPath = item.symlinkTargetPath
            record.item.documentSize = Int64(item.symlinkTargetPath?.utf8.count ?? 0)
        }
        let contentsChanged = kind == .file && contents != nil
        if kind == .file, let contents {
            record.item.isDownloaded = contents.downloaded
            record.remoteKey = item.contentKey
            record.item.documentSize = item.size
            record.item.itemVersion.contentVersion = UInt64(item.contentVersion)
        }
        record.item.noteMetadataChange(at: now)

        // New contents replace the file by a rename: a reader that has it open keeps the old one.
        if contentsChanged && record.item.isDownloaded {
            if let newContents = contents?.staged {
                try sysRename(newContents, self.contents.path(item.row), "move the contents of \(place.name) from the server into the store")
            } else {
                let fd = sysOpen(self.contents.path(item.row) + ".empty", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw ProviderError.posix(errno, "create the contents of \(place.name)") }
                sysClose(fd)
                try sysRename(self.contents.path(item.row) + ".empty", self.contents.path(item.row), "empty the contents of \(place.name)")
            }
        }
        try commit(database, saving: [record], replicated: false, "apply \(place.name) from another replica")
        self.tree.update { tree in
            if before == nil { tree.insert(record) } else { tree.move(item.row, to: record) }
            if contentsChanged && record.item.isDownloaded { tree.dirty.insert(item.row) }
            if !record.item.isDownloaded { tree.dirty.remove(item.row) }
        }
        // The older version's bytes go once the item says they are on the server only (a reader
        // that has them open keeps them).
        if contentsChanged && !record.item.isDownloaded { _ = sysUnlink(self.contents.path(item.row)) }
        if let before, let oldParent = before.parent,
            oldParent != parentRow || !before.item.filename.utf8.elementsEqual(place.name.utf8)
        {
            changes.append(.nameChanged(parent: Self.identifier(forRow: oldParent), name: before.item.filename))
        }
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: place.name))
        if before != nil { changes.append(.modified(record.item.identifier)) }
    }

    /// An item another replica deleted goes here, with every name it still has and its contents.
    func deleteIncoming(_ row: Int64, database: DatabaseQueue, changes: inout [ProviderChange]) throws(ProviderError) {
        guard let record = try read({ (tree) throws(ProviderError) -> Record? in tree.records[row] }) else { return }
        let names = record.linkOf == nil && record.item.linkCount > 1 ? try nameRows(of: row, database) : []
        try commit(database, saving: [], deleting: names + [row], replicated: false, "delete \(record.item.filename) (deleted on another replica)")
        if record.item.kind == .file { contents.reaper.remove(contents.path(row)) { "the contents of item \(row), deleted on another replica" } }
        self.tree.update { tree in
            for name in names { tree.remove(name) }; tree.remove(row)
        }
        if let parent = record.parent {
            changes.append(.nameChanged(parent: Self.identifier(forRow: parent), name: record.item.filename))
        }
        changes.append(.modified(record.item.identifier))
    }

    /// An item takes another name in its folder (`aside`); `waitingCreate`: its create (or link)
    /// waiting in the outbox takes the name too.
    func renameAside(
        _ occupant: Record, in parentRow: Int64, to aside: String, waitingCreate: Bool, database: DatabaseQueue,
        changes: inout [ProviderChange]
    ) throws(ProviderError) {
        var moved = occupant
        moved.item.filename = aside
        moved.item.noteMetadataChange(at: FileTime.now())
        try commit(database, saving: [moved], replicated: false, "move \(occupant.item.filename) aside for an item of another replica")
        if waitingCreate {
            do {
                try database.inDatabase { db in
                    try db.execute(sql: "UPDATE outbox SET name = ? WHERE row = ? AND kind IN ('create', 'link')", arguments: [aside, occupant.row])
                }
            } catch {
                throw ProviderError(.ioError, "rename a waiting create in the outbox: \(error)")
            }
        }
        self.tree.update { tree in tree.move(occupant.row, to: moved) }
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: occupant.item.filename))
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: aside))
    }
}

// Conflicts between replicas, as this replica met them.
extension StoreReplica {
    func conflict(ofRow row: Int64) -> String? { state.conflict(of: currentRow(row)) }

    /// Records a conflict on an item (`user.docfs.conflict`) and for `docfs status`.
    package func noteConflict(_ message: String, row: Int64, summary: String) {
        state.noteConflict(message, row: row, summary: summary)
    }

    package var conflictSummary: (count: Int, recent: [String]) { state.conflictSummary }

    /// Concurrent edits: this replica's version of `row` becomes a new item `copyRow` (already on
    /// the server) at `place`, as DocFSReplica's `ConflictedCopy` chose it, sharing the contents
    /// file; the item itself is set to be replaced by the server's version (its content version no
    /// longer matches any), and its waiting content changes are dropped (the copy holds them).
    /// `contentKey`: the server's object holding the copy's contents (what `seq` sent), kept as
    /// the copy's, so that it is evictable and a damaged block of it is sent again from here.
    /// `asked`: the name the server gave the copy (logged when the copy has another here).
    func forkConflictedCopy(
        of row: Int64, as copyRow: Int64, at place: ReplicaPlace, asked name: String, sending seq: Int64,
        contentKey: String?, database: DatabaseQueue, changes: inout [ProviderChange]
    ) throws(ProviderError) {
        let (original, parent) = try read { (tree) throws(ProviderError) -> (Record, Record) in
            guard let original = tree.records[row] else { throw ProviderError(.noSuchItem, "no item \(row) to copy") }
            guard let parent = tree.records[place.parentRow], parent.item.isFolder else {
                throw ProviderError(.noSuchItem, "no folder for the conflicted copy of \(original.item.filename)")
            }
            return (original, parent)
        }
        let place = place.name
        if place != name {
            logger.warning(
                "conflicted copy of \(original.item.filename): \"\(name)\" is taken here by an item the server has; the copy is \"\(place)\" here")
        }
        var copy = newRecord(
            row: copyRow, parent: parent, name: place, kind: .file, size: original.item.documentSize,
            now: original.item.creationTime, modified: original.item.modificationTime,
            attributes: NewItemAttributes(
                ownerID: original.item.ownerID, groupID: original.item.groupID,
                posixPermissions: original.item.posixPermissions),
            mode: original.item.posixPermissions)
        copy.item.changeTime = FileTime.now()
        copy.remoteKey = contentKey
        if !sysLink(contents.path(row), contents.path(copyRow)) && errno != EEXIST {
            throw ProviderError.posix(errno, "keep the contents of \(original.item.filename) as its conflicted copy")
        }
        var stale = original
        stale.item.itemVersion.contentVersion = 0
        try commit(database, saving: [copy, stale], replicated: false, "conflicted copy of \(original.item.filename)")
        self.tree.update { tree in
            tree.move(copyRow, to: copy) // the copy may be here already (its create applied as another replica's)
            tree.move(row, to: stale)
        }
        let later = try laterContents(of: row, than: seq, database)
        if later.count > 0 {
            // The file was written again after the upload being sent read it: the copy here
            // holds those bytes, so they go to the server's copy as its next version (dropped,
            // they would stay on this replica alone). Journaled before the entries go.
            var newer = copy
            newer.item.itemVersion.contentVersion += 1
            newer.remoteKey = nil // those bytes are not on the server yet
            try commit(database, saving: [newer], "the newer contents of the conflicted copy of \(original.item.filename)")
            self.tree.update { $0.move(copyRow, to: newer) }
        }
        do {
            // The entry being sent is completed by the engine; the later ones are dropped here.
            try database.inDatabase { db in
                try db.execute(sql: "DELETE FROM outbox WHERE row = ? AND kind = 'content' AND seq != ?", arguments: [row, seq])
            }
            outbox.didComplete(count: later.count, bytes: later.bytes) // counted above, under the same writer lock
        } catch {
            throw ProviderError(.ioError, "drop the waiting contents of \(original.item.filename): \(error)")
        }
        changes.append(.nameChanged(parent: parent.item.identifier, name: place))
    }
}

extension StoreReplica {
    /// The content changes of `row` waiting in the outbox besides `seq`, and their bytes.
    func laterContents(of row: Int64, than seq: Int64, _ database: DatabaseQueue) throws(ProviderError) -> (count: Int, bytes: Int64) {
        do {
            return try database.inDatabase { db -> (Int, Int64) in
                let found = try Row.fetchOne(
                    db, sql: "SELECT count(*), coalesce(sum(bytes), 0) FROM outbox WHERE row = ? AND kind = 'content' AND seq != ?",
                    arguments: [row, seq])
                return (found?[0] ?? 0, found?[1] ?? 0)
            }
        } catch {
            throw ProviderError(.ioError, "read the waiting contents of item \(row): \(error)")
        }
    }

    /// The kind and creation time of each item under a server identifier: what a restored server's
    /// item with the same identifier must agree with to be the same item (names and contents
    /// change; a birth does not).
    package func permanentIdentities() throws(ProviderError) -> [Int64: (kind: ItemKind, creationTime: FileTime)] {
        try write { (database) throws(ProviderError) -> [Int64: (kind: ItemKind, creationTime: FileTime)] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    var out: [Int64: (kind: ItemKind, creationTime: FileTime)] = [:]
                    let rows = try Row.fetchCursor(
                        db, sql: "SELECT id, kind, created FROM item WHERE id > ? AND id < ?",
                        arguments: [Self.trashRow, Self.temporaryRowBase])
                    while let row = try rows.next() {
                        out[row[0]] = (ItemKind(rawValue: UInt8(clamping: row[1] as Int)) ?? .file, FileTime(totalNanoseconds: row[2]))
                    }
                    return out
                }
            } catch {
                throw ProviderError(.ioError, "list the store's items: \(error)")
            }
        }
    }
}
