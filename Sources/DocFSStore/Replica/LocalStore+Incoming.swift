import Foundation
import DocFSProvider
import GRDB

/// An item as the server has it now (deleted and trashed ones included).
package struct IncomingItem: Sendable, Equatable {
    package var row: Int64
    /// The parent's row (1: the root); for a trashed item, the folder it was trashed from.
    package var parentRow: Int64
    package var name: String
    package var kind: ItemKind
    package var uid: UInt32
    package var gid: UInt32
    package var mode: UInt16
    package var createdNs: Int64
    package var modifiedNs: Int64
    package var tagData: Data?
    package var favoriteRank: Int64?
    package var symlinkTarget: String?
    package var size: Int64
    package var contentVersion: Int64
    /// The content object; nil for a file without contents (empty).
    package var contentKey: String?
    package var trashed: Bool
    package var deleted: Bool
    /// A further name of the item with this row (a hard link, `LocalStore+RemoteNames`).
    package var linkOf: Int64?

    package init(row: Int64, parentRow: Int64, name: String, kind: ItemKind, uid: UInt32, gid: UInt32,
                mode: UInt16, createdNs: Int64, modifiedNs: Int64, tagData: Data?, favoriteRank: Int64?,
                symlinkTarget: String?, size: Int64, contentVersion: Int64, contentKey: String?,
                trashed: Bool, deleted: Bool, linkOf: Int64? = nil) {
        self.linkOf = linkOf
        self.row = row
        self.parentRow = parentRow
        self.name = name
        self.kind = kind
        self.uid = uid
        self.gid = gid
        self.mode = mode
        self.createdNs = createdNs
        self.modifiedNs = modifiedNs
        self.tagData = tagData
        self.favoriteRank = favoriteRank
        self.symlinkTarget = symlinkTarget
        self.size = size
        self.contentVersion = contentVersion
        self.contentKey = contentKey
        self.trashed = trashed
        self.deleted = deleted
    }
}

/// What `applyIncoming` did and what it could not do yet.
package struct IncomingResult: Sendable, Equatable {
    package var applied = 0
    /// Items left as they are because this replica's own changes to them are still waiting.
    package var pending: Set<Int64> = []
    /// Folders the items need that this replica does not have: fetch them and apply again.
    package var missingParents: Set<Int64> = []
    /// Items of this replica moved aside from a name an incoming item takes; their own state
    /// on the server is worth applying too.
    package var movedAside: Set<Int64> = []
    /// Folders not moved because here they would go below themselves (another move not
    /// applied yet, this replica's own still waiting): apply them again later.
    package var deferred: Set<Int64> = []
    package init() {}
}

// Changes other replicas made, as the server has them now, applied to this replica's tree (not
// sent back: no outbox entry). An item with changes of this replica still waiting is left as it
// is: those changes go to the server first, which decides (see SyncEngine), and the item is
// applied again once they are in. The mount is told what moved so that the kernel forgets it.
extension LocalStore {
    /// The content version of the item here (nil: no such item), for the replica's choice of
    /// what to fetch before applying (DocFSReplica's `IncomingSync.contentsNeeded`).
    package func contentVersion(ofRow row: Int64) -> UInt64? {
        state.withLock { $0.records[row]?.item.itemVersion.contentVersion }
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

    /// Applies the server's state of these items; `contents` holds downloaded files (moved into
    /// the store) by row. Folders first (an item's parent before it), deletions last, children
    /// before their folder.
    package func applyIncoming(_ items: [IncomingItem], contents: [Int64: String] = [:]) throws(ProviderError) -> IncomingResult {
        guard replica != nil else { return IncomingResult() }
        var result = IncomingResult()
        var changes: [ProviderChange] = []
        try write { (database) throws(ProviderError) in
            let pending = try pendingRows(database)
            // Names removed go first: the item may take one's place (the server passed it its name).
            var namesGone = Set<Int64>()
            for item in items where item.deleted && !pending.contains(item.row) {
                if try applyIncomingUnlink(item.row, database: database, changes: &changes) {
                    namesGone.insert(item.row)
                    result.applied += 1
                }
            }
            var live = items.filter { !$0.deleted }
            var progress = true
            while progress && !live.isEmpty {
                progress = false
                var waiting: [IncomingItem] = []
                for item in live {
                    if pending.contains(item.row) { result.pending.insert(item.row); progress = true; continue }
                    // Open for writing here: another replica's version waits for the writer's close.
                    if item.kind == .file, try keepAsideForWriter(item.row, database) { result.pending.insert(item.row); progress = true; continue }
                    if let named = item.linkOf {
                        if try applyIncomingName(item, of: named, database: database, result: &result, changes: &changes) {
                            progress = true
                        } else {
                            waiting.append(item)
                        }
                        continue
                    }
                    switch try applyLive(item, contents: contents, database: database, result: &result, changes: &changes) {
                    case .done: progress = true
                    case .needsParent: waiting.append(item)
                    }
                }
                live = waiting
            }
            for item in live { result.missingParents.insert(item.trashed ? item.parentRow : item.parentRow) }
            result.missingParents.subtract(items.filter { !$0.deleted }.map(\.row))
            // A name whose file is not here (its folder deleted here by a change still waiting,
            // which the server may refuse and undo): tried again with the next changes, since
            // what brings the file back lists its folder, not the names of it elsewhere, and the
            // change log names the name no more.
            let absent = try read { (tree) throws(ProviderError) -> Set<Int64> in
                Set(live.compactMap { item in item.linkOf.flatMap { tree.records[$0] == nil ? item.row : nil } })
            }
            result.deferred.formUnion(absent)

            var deletions = items.filter { $0.deleted && !namesGone.contains($0.row) }
            progress = true
            while progress && !deletions.isEmpty {
                progress = false
                var waiting: [IncomingItem] = []
                for item in deletions {
                    if pending.contains(item.row) { result.pending.insert(item.row); continue }
                    // Open for writing here: the edit wins if the writer changes it (its close
                    // restores the file on the server); otherwise the delete applies at its close.
                    if try keepAsideForWriter(item.row, database) { result.pending.insert(item.row); continue }
                    let outcome = try read { (tree) throws(ProviderError) -> (Record, Bool)? in
                        guard let record = tree.records[item.row] else { return nil }
                        return (record, tree.children[item.row]?.isEmpty ?? true)
                    }
                    guard let (record, empty) = outcome else { progress = true; continue }
                    // A folder that still holds something of this replica's stays (its children go first,
                    // or are this replica's new items, which bring it back on the server).
                    guard empty else { waiting.append(item); continue }
                    // An item goes with every name it still has here.
                    let names = record.linkOf == nil && record.item.linkCount > 1 ? try nameRows(of: item.row, database) : []
                    try commit(database, saving: [], deleting: names + [item.row], replicated: false, "delete \(record.item.filename) (deleted on another replica)")
                    if record.item.kind == .file { reaper.remove(contentPath(item.row)) { "the contents of item \(item.row), deleted on another replica" } }
                    state.withLock { tree in for name in names { tree.remove(name) }; tree.remove(item.row) }
                    if let parent = record.parent {
                        changes.append(.nameChanged(parent: Self.identifier(forRow: parent), name: record.item.filename))
                    }
                    changes.append(.modified(record.item.identifier))
                    result.applied += 1
                    progress = true
                }
                deletions = waiting
            }
        }
        if !changes.isEmpty { replica?.notify(changes) }
        return result
    }

    private enum LiveOutcome { case done, needsParent }

    /// One live (or trashed) item: created, moved, renamed, re-owned or given new contents here.
    private func applyLive(_ item: IncomingItem, contents: [Int64: String], database: DatabaseQueue,
                           result: inout IncomingResult, changes: inout [ProviderChange]) throws(ProviderError) -> LiveOutcome {
        let parentRow = item.trashed ? Self.trashRow : item.parentRow
        struct Plan { var local: Record?; var parent: Record; var name: String; var occupant: Record?; var cycle: Bool }
        let plan = try read { (tree) throws(ProviderError) -> Plan? in
            guard let parent = tree.records[parentRow], parent.item.isFolder else { return nil }
            let local = tree.records[item.row]
            var name = item.name
            if item.trashed {
                if let local, local.parent == Self.trashRow { name = local.item.filename }
                else { name = tree.uniqueName(item.name, in: Self.trashRow, isFolder: item.kind == .folder) }
            }
            var occupant: Record?
            if let other = tree.children[parentRow]?[NameKey(name)], other != item.row { occupant = tree.records[other] }
            // A folder moved below itself here (another move not applied yet): wait for that one.
            var cycle = false
            if item.kind == .folder {
                var cursor: Int64? = parentRow
                while let current = cursor, current != Self.rootRow {
                    if current == item.row { cycle = true; break }
                    cursor = tree.records[current]?.parent
                }
            }
            return Plan(local: local, parent: parent, name: name, occupant: occupant, cycle: cycle)
        }
        guard let plan else { return .needsParent }
        if plan.cycle { result.deferred.insert(item.row); return .done }
        let kind: ItemKind = item.kind == .file ? .file : item.kind == .folder ? .folder : .symlink
        if let local = plan.local, local.item.kind != kind { return .done }  // identifiers never change kind

        // The name is this replica's for another item: that one steps aside (a new item of this
        // replica keeps its place in the outbox under its new name; the server suffixes the same way).
        if let occupant = plan.occupant {
            if try moveAside(occupant, in: parentRow, database: database, changes: &changes) { result.movedAside.insert(occupant.row) }
        }

        let now = FileTime.now()
        var record = plan.local ?? newRecord(row: item.row, parent: plan.parent, name: plan.name, kind: kind, size: 0,
                                             now: FileTime(totalNanoseconds: item.createdNs),
                                             modified: FileTime(totalNanoseconds: item.modifiedNs),
                                             attributes: nil, mode: item.mode, target: item.symlinkTarget)
        let before = plan.local
        record.parent = parentRow
        record.item.parentIdentifier = plan.parent.item.identifier
        if !record.item.filename.utf8.elementsEqual(plan.name.utf8) || before?.parent != parentRow {
            let renamedFrom = record
            record.item.filename = plan.name
            record.item = retyped(renamedFrom, as: record.item, name: plan.name, policy: plan.parent.contentsPolicy)
        }
        record.item.ownerID = item.uid
        record.item.groupID = item.gid
        if kind != .symlink { record.item.posixPermissions = item.mode & 0o7777 }
        record.item.creationTime = FileTime(totalNanoseconds: item.createdNs)
        if kind != .folder { record.item.modificationTime = FileTime(totalNanoseconds: item.modifiedNs) }
        record.item.tagData = item.tagData
        record.item.favoriteRank = item.favoriteRank
        record.trashedFrom = item.trashed ? item.parentRow : nil
        record.trashedName = item.trashed ? item.name : nil
        if kind == .symlink {
            record.item.symlinkTargetPath = item.symlinkTarget
            record.item.documentSize = Int64(item.symlinkTarget?.utf8.count ?? 0)
        }
        var newContents: String?
        var contentsChanged = false
        if kind == .file, before == nil || before!.item.itemVersion.contentVersion != UInt64(item.contentVersion) {
            // Downloaded now only when given (pinned); otherwise on the server only, fetched on open.
            newContents = item.contentKey == nil ? nil : contents[item.row]
            record.item.isDownloaded = item.contentKey == nil || newContents != nil || item.size == 0
            record.remoteKey = item.contentKey
            record.item.documentSize = item.size
            record.item.itemVersion.contentVersion = UInt64(item.contentVersion)
            contentsChanged = true
        }
        if let before, !contentsChanged, Self.sameAsServer(before, record) { return .done }
        record.item.noteMetadataChange(at: now)

        // New contents replace the file by a rename: a reader that has it open keeps the old one.
        if kind == .file && contentsChanged && record.item.isDownloaded {
            if let newContents {
                try sysRename(newContents, contentPath(item.row), "move the contents of \(plan.name) from the server into the store")
            } else {
                let fd = sysOpen(contentPath(item.row) + ".empty", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { throw ProviderError.posix(errno, "create the contents of \(plan.name)") }
                sysClose(fd)
                try sysRename(contentPath(item.row) + ".empty", contentPath(item.row), "empty the contents of \(plan.name)")
            }
        }
        try commit(database, saving: [record], replicated: false, "apply \(plan.name) from another replica")
        state.withLock { tree in
            if before == nil { tree.insert(record) } else { tree.move(item.row, to: record) }
            if contentsChanged && record.item.isDownloaded { tree.dirty.insert(item.row) }
            if !record.item.isDownloaded { tree.dirty.remove(item.row) }
        }
        // The older version's bytes go once the item says they are on the server only (a reader
        // that has them open keeps them).
        if kind == .file && contentsChanged && !record.item.isDownloaded { _ = sysUnlink(contentPath(item.row)) }
        if let before, let oldParent = before.parent,
           oldParent != parentRow || !before.item.filename.utf8.elementsEqual(plan.name.utf8) {
            changes.append(.nameChanged(parent: Self.identifier(forRow: oldParent), name: before.item.filename))
        }
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: plan.name))
        if before != nil { changes.append(.modified(record.item.identifier)) }
        result.applied += 1
        return .done
    }

    /// The name an item of the server takes here is this replica's for another item: that one
    /// steps aside (a new item of this replica keeps its place in the outbox under its new name;
    /// the server suffixes the same way). True when the occupant is on the server already (its
    /// own state there is worth applying).
    func moveAside(_ occupant: Record, in parentRow: Int64, database: DatabaseQueue,
                   changes: inout [ProviderChange]) throws(ProviderError) -> Bool {
        let aside = try read { (tree) throws(ProviderError) -> String in
            tree.uniqueName(occupant.item.filename, in: parentRow, isFolder: occupant.item.isFolder)
        }
        var moved = occupant
        moved.item.filename = aside
        moved.item.noteMetadataChange(at: FileTime.now())
        try commit(database, saving: [moved], replicated: false, "move \(occupant.item.filename) aside for an item of another replica")
        let onServer = occupant.row < Self.temporaryRowBase
        if !onServer {
            do {
                try database.inDatabase { db in
                    try db.execute(sql: "UPDATE outbox SET name = ? WHERE row = ? AND kind IN ('create', 'link')", arguments: [aside, occupant.row])
                }
            } catch {
                throw ProviderError(.ioError, "rename a waiting create in the outbox: \(error)")
            }
        }
        state.withLock { tree in tree.move(occupant.row, to: moved) }
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: occupant.item.filename))
        changes.append(.nameChanged(parent: Self.identifier(forRow: parentRow), name: aside))
        return onServer
    }

    /// Whether the local record already shows what the server has (a change of this replica
    /// coming back, or one applied before).
    static func sameAsServer(_ a: Record, _ b: Record) -> Bool {
        a.parent == b.parent && a.item.filename.utf8.elementsEqual(b.item.filename.utf8)
            && a.item.ownerID == b.item.ownerID && a.item.groupID == b.item.groupID
            && a.item.posixPermissions == b.item.posixPermissions && a.item.creationTime == b.item.creationTime
            && a.item.modificationTime == b.item.modificationTime && a.item.tagData == b.item.tagData
            && a.item.favoriteRank == b.item.favoriteRank && a.item.symlinkTargetPath == b.item.symlinkTargetPath
            && a.trashedFrom == b.trashedFrom
    }
}

// Conflicts between replicas, as this replica met them.
extension LocalStore {
    package func conflict(of identifier: ItemIdentifier) -> String? {
        guard let replica, let row = row(for: identifier) else { return nil }
        return replica.conflict(of: currentRow(row))
    }

    /// Records a conflict on an item (`user.docfs.conflict`) and for `docfs status`.
    package func noteConflict(_ message: String, row: Int64, summary: String) {
        replica?.noteConflict(message, row: row, summary: summary)
    }

    package var conflictSummary: (count: Int, recent: [String]) { replica?.conflictSummary ?? (0, []) }

    /// Concurrent edits: this replica's version of `row` becomes a new item `copyRow` (already on
    /// the server under `name` in the folder `parentRow`), sharing the contents file; the item itself
    /// is set to be replaced by the server's version (its content version no longer matches any),
    /// and its waiting content changes are dropped (the copy holds them).
    /// `contentKey`: the server's object holding the copy's contents (what `seq` sent), kept as
    /// the copy's, so that it is evictable and a damaged block of it is sent again from here.
    package func forkConflictedCopy(of row: Int64, as copyRow: Int64, name: String, parentRow: Int64, sending seq: Int64,
                                    contentKey: String? = nil) throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            try flushJournal(database)
            let (original, parent) = try read { (tree) throws(ProviderError) -> (Record, Record) in
                guard let original = tree.records[row] else { throw ProviderError(.noSuchItem, "no item \(row) to copy") }
                let parent = tree.records[parentRow] ?? original.parent.flatMap { tree.records[$0] }
                guard let parent, parent.item.isFolder else { throw ProviderError(.noSuchItem, "no folder for the conflicted copy of \(original.item.filename)") }
                return (original, parent)
            }
            // The copy takes the name the server gave it. A local item holding that name that is
            // not on the server yet (its create waits) steps aside, as for any item of the server;
            // one that is there already keeps it and the copy is suffixed here (logged). The copy
            // itself may be here already: its create on the server was announced, and applied
            // as another replica's item, before this ran; it is the same item and keeps its name.
            var changes: [ProviderChange] = []
            let occupant = try read { (tree) throws(ProviderError) -> Record? in
                tree.children[parent.row]?[NameKey(name)].flatMap { tree.records[$0] }
            }
            if let occupant, occupant.row >= Self.temporaryRowBase {
                _ = try moveAside(occupant, in: parent.row, database: database, changes: &changes)
            }
            let place = try read { (tree) throws(ProviderError) -> String in
                occupant?.row == copyRow ? name : tree.uniqueName(name, in: parent.row, isFolder: false)
            }
            if place != name {
                logger.warning("conflicted copy of \(original.item.filename): \"\(name)\" is taken here by an item the server has; the copy is \"\(place)\" here")
            }
            var copy = newRecord(row: copyRow, parent: parent, name: place, kind: .file, size: original.item.documentSize,
                                 now: original.item.creationTime, modified: original.item.modificationTime,
                                 attributes: NewItemAttributes(ownerID: original.item.ownerID, groupID: original.item.groupID,
                                                               posixPermissions: original.item.posixPermissions),
                                 mode: original.item.posixPermissions)
            copy.item.changeTime = FileTime.now()
            copy.remoteKey = contentKey
            if !sysLink(contentPath(row), contentPath(copyRow)) && errno != EEXIST {
                throw ProviderError.posix(errno, "keep the contents of \(original.item.filename) as its conflicted copy")
            }
            var stale = original
            stale.item.itemVersion.contentVersion = 0
            try commit(database, saving: [copy, stale], replicated: false, "conflicted copy of \(original.item.filename)")
            state.withLock { tree in
                tree.move(copyRow, to: copy)  // the copy may have arrived already (above)
                tree.move(row, to: stale)
            }
            let later = try laterContents(of: row, than: seq, database)
            if later.count > 0 {
                // The file was written again after the upload being sent read it: the copy here
                // holds those bytes, so they go to the server's copy as its next version (dropped,
                // they would stay on this replica alone). Journaled before the entries go.
                var newer = copy
                newer.item.itemVersion.contentVersion += 1
                newer.remoteKey = nil  // those bytes are not on the server yet
                try commit(database, saving: [newer], "the newer contents of the conflicted copy of \(original.item.filename)")
                state.withLock { $0.move(copyRow, to: newer) }
            }
            do {
                // The entry being sent is completed by the engine; the later ones are dropped here.
                try database.inDatabase { db in
                    try db.execute(sql: "DELETE FROM outbox WHERE row = ? AND kind = 'content' AND seq != ?", arguments: [row, seq])
                }
                replica?.didComplete(count: later.count, bytes: later.bytes)  // counted above, under the same writer lock
            } catch {
                throw ProviderError(.ioError, "drop the waiting contents of \(original.item.filename): \(error)")
            }
            replica?.notify(changes + [.nameChanged(parent: parent.item.identifier, name: place)])
        }
    }
}

extension LocalStore {
    /// The content changes of `row` waiting in the outbox besides `seq`, and their bytes.
    func laterContents(of row: Int64, than seq: Int64, _ database: DatabaseQueue) throws(ProviderError) -> (count: Int, bytes: Int64) {
        do {
            return try database.inDatabase { db -> (Int, Int64) in
                let found = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(bytes), 0) FROM outbox WHERE row = ? AND kind = 'content' AND seq != ?",
                                             arguments: [row, seq])
                return (found?[0] ?? 0, found?[1] ?? 0)
            }
        } catch {
            throw ProviderError(.ioError, "read the waiting contents of item \(row): \(error)")
        }
    }

    /// The rows of items the server numbered (not the root, the trash, or temporary ones).
    /// The kind and creation time of each item under a server identifier: what a restored server's
    /// item with the same identifier must agree with to be the same item (names and contents
    /// change; a birth does not).
    package func permanentIdentities() throws(ProviderError) -> [Int64: (kind: ItemKind, createdNs: Int64)] {
        try write { (database) throws(ProviderError) -> [Int64: (kind: ItemKind, createdNs: Int64)] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    var out: [Int64: (kind: ItemKind, createdNs: Int64)] = [:]
                    let rows = try Row.fetchCursor(db, sql: "SELECT id, kind, created FROM item WHERE id > ? AND id < ?",
                                                   arguments: [Self.trashRow, Self.temporaryRowBase])
                    while let row = try rows.next() {
                        out[row[0]] = (ItemKind(rawValue: UInt8(clamping: row[1] as Int)) ?? .file, row[2])
                    }
                    return out
                }
            } catch {
                throw ProviderError(.ioError, "list the store's items: \(error)")
            }
        }
    }

    package func permanentRows() throws(ProviderError) -> [Int64] {
        try write { (database) throws(ProviderError) -> [Int64] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    try Int64.fetchAll(db, sql: "SELECT id FROM item WHERE id > ? AND id < ?", arguments: [Self.trashRow, Self.temporaryRowBase])
                }
            } catch {
                throw ProviderError(.ioError, "list the store's items: \(error)")
            }
        }
    }
}
