import Foundation
import DocFSProvider
import DocFSWire

/// Turns what an action commits (records saved, rows deleted) into the changes the server needs,
/// by comparing each record with what it was. One place for every action: an action needs no
/// code of its own to be replicated.
///
/// Not replicated (README, *Remote*): FIFOs and sockets (the server keeps files, folders and
/// links); a folder's own times, which every change inside it moves; the last-used time; stored
/// `user.*` attributes.
enum OutboxPlanner {
    /// A planned change; the store gives it its sequence number and operation id.
    struct Planned: Equatable {
        var kind: OutboxEntry.Kind
        var row: Int64
        var parent: Int64? = nil
        var name: String? = nil
        var bytes: Int64 = 0
        var details = OutboxDetails()
    }

    /// The changes from `old` (nil: a new item) to `new`.
    static func plan(old: Record?, new: Record) -> [Planned] {
        let kind = new.item.kind
        guard kind.isReplicated, let parent = new.parent else { return [] }
        if let named = new.linkOf { return planName(old: old, new: new, of: named, parent: parent) }
        let item = new.item
        guard let old else {
            let newItem = ReplicatedAttributes(
                ownerID: item.ownerID, groupID: item.groupID, posixPermissions: item.posixPermissions,
                creationTime: item.creationTime, modificationTime: item.modificationTime,
                tagData: item.tagData, symlinkTargetPath: item.symlinkTargetPath)
            var details = OutboxDetails(kind: kind, newItem: newItem, contentVersion: item.itemVersion.contentVersion)
            if let rank = item.favoriteRank { details.changes.favoriteRank = .some(rank) }
            return [
                Planned(
                    kind: .create, row: new.row, parent: parent, name: item.filename,
                    bytes: kind == .file ? item.documentSize : 0, details: details)
            ]
        }
        var planned: [Planned] = []
        let trash = LocalStore.trashRow
        if old.parent != new.parent || !old.item.filename.utf8.elementsEqual(item.filename.utf8) {
            let wasTrashed = old.parent == trash
            let isTrashed = parent == trash
            switch (wasTrashed, isTrashed) {
            case (false, true): planned.append(Planned(kind: .trash, row: new.row))
            case (true, false): planned.append(Planned(kind: .untrash, row: new.row, parent: parent, name: item.filename))
            case (true, true): break // a rename inside the trash: the server keeps where it came from
            case (false, false):
                var details = OutboxDetails()
                details.fromParent = old.parent
                details.fromName = old.item.filename
                planned.append(Planned(kind: .move, row: new.row, parent: parent, name: item.filename, details: details))
            }
        }
        if kind == .file, item.itemVersion.contentVersion != old.item.itemVersion.contentVersion {
            var details = OutboxDetails(
                changes: AttributeChanges(modificationTime: item.modificationTime),
                contentVersion: item.itemVersion.contentVersion)
            // The version this one was written over (`modifyContents`' base): the server takes it
            // only while that is still its current version.
            details.baseVersion = old.item.itemVersion.contentVersion
            planned.append(Planned(kind: .content, row: new.row, bytes: item.documentSize, details: details))
        }
        var changes = AttributeChanges()
        if item.ownerID != old.item.ownerID { changes.ownerID = item.ownerID }
        if item.groupID != old.item.groupID { changes.groupID = item.groupID }
        if item.posixPermissions != old.item.posixPermissions { changes.posixPermissions = item.posixPermissions }
        if item.creationTime != old.item.creationTime { changes.creationTime = item.creationTime }
        // A file's modification time alone (touch, utimensat); with new contents it went with them.
        if kind != .folder, item.modificationTime != old.item.modificationTime,
            item.itemVersion.contentVersion == old.item.itemVersion.contentVersion
        {
            changes.modificationTime = item.modificationTime
        }
        if item.tagData != old.item.tagData { changes.tagData = .some(item.tagData) }
        if item.favoriteRank != old.item.favoriteRank { changes.favoriteRank = .some(item.favoriteRank) }
        if !changes.isEmpty { planned.append(Planned(kind: .attributes, row: new.row, details: OutboxDetails(changes: changes))) }
        return planned
    }

    /// A further name (hard link, `LocalStore+Moves`): made, moved, renamed, trashed or restored
    /// (a server of schema 13 keeps a trashed name where it came from, as an item; the store
    /// trashes names only against such a server). Nothing else of a name row is its own (the
    /// item's changes are planned on the item).
    static func planName(old: Record?, new: Record, of named: Int64, parent: Int64) -> [Planned] {
        let trash = LocalStore.trashRow
        guard let old else {
            guard parent != trash else { return [] }
            var details = OutboxDetails()
            details.linkOf = named
            return [Planned(kind: .link, row: new.row, parent: parent, name: new.item.filename, details: details)]
        }
        switch (old.parent == trash, parent == trash) {
        case (false, true): return [Planned(kind: .trash, row: new.row)]
        case (true, false): return [Planned(kind: .untrash, row: new.row, parent: parent, name: new.item.filename)]
        case (true, true): return [] // a rename inside the trash: the server keeps where it came from
        case (false, false): break
        }
        guard old.parent != parent || !old.item.filename.utf8.elementsEqual(new.item.filename.utf8) else { return [] }
        var details = OutboxDetails()
        details.fromParent = old.parent
        details.fromName = old.item.filename
        return [Planned(kind: .moveName, row: new.row, parent: parent, name: new.item.filename, details: details)]
    }

    /// A deleted item.
    static func planDeletion(of old: Record) -> [Planned] {
        guard old.item.kind.isReplicated, old.parent != nil else { return [] }
        if old.linkOf != nil { return [Planned(kind: .unlink, row: old.row)] }
        // The version deleted: a delete of a file another replica has changed since is refused
        // (an edit against a delete keeps the edit).
        var details = OutboxDetails()
        if old.item.kind == .file { details.contentVersion = old.item.itemVersion.contentVersion }
        return [Planned(kind: .delete, row: old.row, details: details)]
    }
}
