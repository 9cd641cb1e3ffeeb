import Foundation
import DocFSProvider
import DocFSWire
import DocFSStore

/// What `IncomingApply` did and what it could not do yet.
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

/// Changes other replicas made, as the server has them now, applied to this replica's tree (not
/// sent back): what applies, in which order, what waits. An item with changes of this replica
/// still waiting is left as it is: those changes go to the server first, which decides (see
/// SyncEngine), and the item is applied again once they are in. A file open for writing here
/// keeps other replicas' changes aside until its writer closes it. The store writes what is
/// decided (`IncomingTreeEdit`), all in one action under its writer lock.
package struct IncomingApply {
    let edit: any IncomingTreeEdit
    /// Downloaded files (moved into the store) by row.
    let contents: [Int64: String]
    var result = IncomingResult()

    package init(_ edit: any IncomingTreeEdit, contents: [Int64: String] = [:]) {
        self.edit = edit
        self.contents = contents
    }

    /// Applies the server's state of these items. Names removed first, then folders before what
    /// they hold (an item's parent before it), deletions last, children before their folder.
    package mutating func apply(_ items: [ServerItem]) throws(ProviderError) -> IncomingResult {
        let pending = try edit.waitingRows()
        // Names removed go first: the item may take one's place (the server passed it its name).
        var namesGone = Set<Int64>()
        for item in items where item.deleted && !pending.contains(item.row) {
            if let node = try edit.node(item.row), node.linkOf != nil {
                try edit.removeName(item.row)
                namesGone.insert(item.row)
                result.applied += 1
            }
        }
        var live = items.filter { !$0.deleted }
        var progress = true
        while progress && !live.isEmpty {
            progress = false
            var waiting: [ServerItem] = []
            for item in live {
                if pending.contains(item.row) { result.pending.insert(item.row); progress = true; continue }
                // Open for writing here: another replica's version waits for the writer's close.
                if item.kind == .file, try edit.holdForWriter(item.row) { result.pending.insert(item.row); progress = true; continue }
                if let named = item.linkOf {
                    if try applyName(item, of: named) { progress = true } else { waiting.append(item) }
                    continue
                }
                if try applyLive(item) { progress = true } else { waiting.append(item) }
            }
            live = waiting
        }
        for item in live { result.missingParents.insert(item.parentRow) }
        result.missingParents.subtract(items.filter { !$0.deleted }.map(\.row))
        // A name whose file is not here (its folder deleted here by a change still waiting,
        // which the server may refuse and undo): tried again with the next changes, since
        // what brings the file back lists its folder, not the names of it elsewhere, and the
        // change log names the name no more.
        for item in live {
            if let named = item.linkOf, try edit.node(named) == nil { result.deferred.insert(item.row) }
        }

        var deletions = items.filter { $0.deleted && !namesGone.contains($0.row) }
        progress = true
        while progress && !deletions.isEmpty {
            progress = false
            var waiting: [ServerItem] = []
            for item in deletions {
                if pending.contains(item.row) { result.pending.insert(item.row); continue }
                // Open for writing here: the edit wins if the writer changes it (its close
                // restores the file on the server); otherwise the delete applies at its close.
                if try edit.holdForWriter(item.row) { result.pending.insert(item.row); continue }
                guard let node = try edit.node(item.row) else { progress = true; continue }
                // A folder that still holds something of this replica's stays (its children go first,
                // or are this replica's new items, which bring it back on the server).
                guard node.isEmpty else { waiting.append(item); continue }
                try edit.delete(item.row)
                result.applied += 1
                progress = true
            }
            deletions = waiting
        }
        return result
    }

    /// Where an item of the server goes here: in the trash, at the top, under a name free there
    /// (the one it has there already, if it is there), remembering where it came from.
    private func place(of item: ServerItem, local: ReplicaNode?, isFolder: Bool) throws(ProviderError) -> ReplicaPlace {
        guard item.trashed else { return ReplicaPlace(parentRow: item.parentRow, name: item.name) }
        var name = item.name
        if let local, local.parent == ReplicaRows.trash {
            name = local.name
        } else {
            name = try edit.uniqueName(item.name, in: ReplicaRows.trash, isFolder: isFolder)
        }
        return ReplicaPlace(parentRow: ReplicaRows.trash, name: name, trashedFrom: item.parentRow, trashedName: item.name)
    }

    /// The name is this replica's for another item: that one steps aside (a new item of this
    /// replica keeps its place in the outbox under its new name; the server suffixes the same
    /// way). One on the server already is noted: its own state there is worth applying.
    private mutating func clear(_ place: ReplicaPlace, for row: Int64) throws(ProviderError) {
        guard let other = try edit.child(named: place.name, in: place.parentRow), other != row,
            let occupant = try edit.node(other)
        else { return }
        let aside = try edit.uniqueName(occupant.name, in: place.parentRow, isFolder: occupant.kind == .folder)
        let onServer = occupant.row < ReplicaRows.temporaryBase
        try edit.rename(occupant.row, to: aside, waitingCreate: !onServer)
        if onServer { result.movedAside.insert(occupant.row) }
    }

    /// One live (or trashed) item: created, moved, renamed, re-owned or given new contents here.
    /// False: its folder is not here (yet).
    private mutating func applyLive(_ item: ServerItem) throws(ProviderError) -> Bool {
        let parentRow = item.trashed ? ReplicaRows.trash : item.parentRow
        guard let parent = try edit.node(parentRow), parent.kind == .folder else { return false }
        let local = try edit.node(item.row)
        let place = try place(of: item, local: local, isFolder: item.kind == .folder)
        // A folder moved below itself here (another move not applied yet): wait for that one.
        if item.kind == .folder {
            var cursor: Int64? = parentRow
            while let current = cursor, current != ReplicaRows.root {
                if current == item.row { result.deferred.insert(item.row); return true }
                cursor = try edit.node(current)?.parent
            }
        }
        let kind: ItemKind = item.kind == .file ? .file : item.kind == .folder ? .folder : .symlink
        if let local, local.kind != kind { return true } // identifiers never change kind

        try clear(place, for: item.row)

        // Downloaded now only when given (pinned); otherwise on the server only, fetched on open.
        var newContents: ReplicaNewContents?
        if kind == .file, local == nil || local!.contentVersion != UInt64(item.contentVersion) {
            let staged = item.contentKey == nil ? nil : contents[item.row]
            newContents = ReplicaNewContents(downloaded: item.contentKey == nil || staged != nil || item.size == 0, staged: staged)
        }
        if let local, newContents == nil, Self.sameAsServer(local, item, kind: kind, at: place) { return true }
        try edit.put(item, as: kind, at: place, contents: newContents)
        result.applied += 1
        return true
    }

    /// Whether the item here already shows what the server has (a change of this replica coming
    /// back, or one applied before): the attributes the store takes from the server (a symlink
    /// keeps its permissions, a folder its modification time, only a symlink takes a target).
    static func sameAsServer(_ local: ReplicaNode, _ item: ServerItem, kind: ItemKind, at place: ReplicaPlace) -> Bool {
        let here = local.attributes
        return local.parent == place.parentRow && local.name.utf8.elementsEqual(place.name.utf8)
            && here.ownerID == item.ownerID && here.groupID == item.groupID
            && (kind == .symlink || here.posixPermissions == item.posixPermissions & 0o7777)
            && here.creationTime == item.creationTime
            && (kind == .folder || here.modificationTime == item.modificationTime)
            && here.tagData == item.tagData && local.favoriteRank == item.favoriteRank
            && (kind != .symlink || here.symlinkTargetPath == item.symlinkTargetPath)
            && local.trashedFrom == place.trashedFrom
    }

    /// Another replica's further name (`item.linkOf`) of the item `itemRow`: a name row of the
    /// same item here. Needs the item and the folder here first (false: not yet).
    private mutating func applyName(_ item: ServerItem, of itemRow: Int64) throws(ProviderError) -> Bool {
        let parentRow = item.trashed ? ReplicaRows.trash : item.parentRow
        guard let parent = try edit.node(parentRow), parent.kind == .folder,
            let target = try edit.node(itemRow), target.linkOf == nil
        else {
            result.missingParents.insert(itemRow)
            return false
        }
        let local = try edit.node(item.row)
        let place = try place(of: item, local: local, isFolder: false)
        // Identifiers never change what they are: an item here stays one.
        if let local, local.linkOf != itemRow { return true }
        if let local, local.parent == parentRow, local.name.utf8.elementsEqual(place.name.utf8),
            !item.trashed || local.trashedFrom == item.parentRow
        {
            return true
        }
        guard target.kind != .folder else { return true }
        try clear(place, for: item.row)
        try edit.putName(item.row, of: itemRow, at: place)
        result.applied += 1
        return true
    }
}

extension ReplicaStore {
    /// Applies the server's state of items in one action of the store (`contents`: downloaded
    /// files by row); nothing for a store without a remote.
    package func applyIncoming(_ items: [ServerItem], contents: [Int64: String] = [:]) throws(ProviderError) -> IncomingResult {
        try editIncoming { (edit) throws(ProviderError) -> IncomingResult in
            var apply = IncomingApply(edit, contents: contents)
            return try apply.apply(items)
        } ?? IncomingResult()
    }
}
