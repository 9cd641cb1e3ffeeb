import Foundation
import DocFSProvider
import DocFSWire
import GRDB

/// One row of the replica's tree as the incoming apply reads it (`ReplicaTreeEdit.node`): its
/// place and what it is, beside the attributes the server's state is compared with, in the shape
/// a replica sends them (`ReplicatedAttributes`), and the favorite rank (which the server takes
/// as an attribute change, never at a create).
package struct ReplicaNode: Sendable {
    package var row: Int64
    /// Nil for the root and the trash.
    package var parent: Int64?
    package var name: String
    package var kind: ItemKind
    /// A name row (a hard link's further name): the row of the item it names.
    package var linkOf: Int64?
    package var linkCount: Int
    /// A folder: nothing in it.
    package var isEmpty: Bool
    package var contentVersion: UInt64
    package var isDownloaded: Bool
    /// In the trash: the folder it came from.
    package var trashedFrom: Int64?
    package var attributes: ReplicatedAttributes
    package var favoriteRank: Int64?

    package init(
        row: Int64, parent: Int64?, name: String, kind: ItemKind, linkOf: Int64? = nil, linkCount: Int = 1,
        isEmpty: Bool = true, contentVersion: UInt64 = 0, isDownloaded: Bool = true, trashedFrom: Int64? = nil,
        attributes: ReplicatedAttributes = ReplicatedAttributes(creationTime: FileTime(seconds: 0), modificationTime: FileTime(seconds: 0)),
        favoriteRank: Int64? = nil
    ) {
        self.row = row
        self.parent = parent
        self.name = name
        self.kind = kind
        self.linkOf = linkOf
        self.linkCount = linkCount
        self.isEmpty = isEmpty
        self.contentVersion = contentVersion
        self.isDownloaded = isDownloaded
        self.trashedFrom = trashedFrom
        self.attributes = attributes
        self.favoriteRank = favoriteRank
    }
}

/// Where the replica decided an item of the server goes here.
package struct ReplicaPlace: Sendable, Equatable {
    package var parentRow: Int64
    package var name: String
    /// In the trash: the folder it was trashed from, and its name there.
    package var trashedFrom: Int64?
    package var trashedName: String?

    package init(parentRow: Int64, name: String, trashedFrom: Int64? = nil, trashedName: String? = nil) {
        self.parentRow = parentRow
        self.name = name
        self.trashedFrom = trashedFrom
        self.trashedName = trashedName
    }
}

/// A file's new contents from the server, as the replica decided to take them: here now
/// (`staged`, or empty) or on the server only (fetched when opened).
package struct ReplicaNewContents: Sendable, Equatable {
    package var downloaded: Bool
    /// A downloaded file, moved into the store (nil with `downloaded`: the file is empty).
    package var staged: String?

    package init(downloaded: Bool, staged: String?) {
        self.downloaded = downloaded
        self.staged = staged
    }
}

/// The replica's edits of the tree in one writer-locked action (`StoreReplica.editReplicaTree`):
/// reads of the tree and the outbox, and writes of what the replica decided (DocFSReplica's
/// `IncomingApply`), all in that one action. Valid only inside the
/// closure it is handed to. The kernel is told what changed once the action ends.
package final class ReplicaTreeEdit {
    let store: StoreReplica
    let database: DatabaseQueue
    var changes: [ProviderChange] = []

    init(store: StoreReplica, database: DatabaseQueue) {
        self.store = store
        self.database = database
    }

    // MARK: Reads

    /// Rows with outbox entries still waiting (the journal goes to SQLite first).
    package func waitingRows() throws(ProviderError) -> Set<Int64> { try store.pendingRows(database) }

    package func node(_ row: Int64) throws(ProviderError) -> ReplicaNode? {
        try store.read { (tree) throws(ProviderError) -> ReplicaNode? in
            guard let record = tree.records[row] else { return nil }
            let item = record.item
            return ReplicaNode(
                row: row, parent: record.parent, name: item.filename, kind: item.kind, linkOf: record.linkOf,
                linkCount: item.linkCount, isEmpty: tree.children[row]?.isEmpty ?? true,
                contentVersion: item.itemVersion.contentVersion, isDownloaded: item.isDownloaded, trashedFrom: record.trashedFrom,
                attributes: ReplicatedAttributes(
                    ownerID: item.ownerID, groupID: item.groupID, posixPermissions: item.posixPermissions,
                    creationTime: item.creationTime, modificationTime: item.modificationTime, tagData: item.tagData,
                    symlinkTargetPath: item.symlinkTargetPath),
                favoriteRank: item.favoriteRank)
        }
    }

    /// The row holding `name` in the folder, if any.
    package func child(named name: String, in folder: Int64) throws(ProviderError) -> Int64? {
        try store.read { (tree) throws(ProviderError) -> Int64? in tree.children[folder]?[NameKey(name)] }
    }

    package func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) throws(ProviderError) -> String {
        try store.read { (tree) throws(ProviderError) -> String in tree.uniqueName(name, in: folder, isFolder: isFolder) }
    }

    /// Whether a change of `row` waits for its writer (`StoreReplica.keepAsideForWriter`).
    package func holdForWriter(_ row: Int64) throws(ProviderError) -> Bool {
        try store.keepAsideForWriter(row, database)
    }

    // MARK: Writes

    /// The item takes another name in its folder; `waitingCreate`: its create (or link) waiting in
    /// the outbox takes the name too.
    package func rename(_ row: Int64, to name: String, waitingCreate: Bool) throws(ProviderError) {
        guard let record = try store.read({ (tree) throws(ProviderError) in tree.records[row] }), let parent = record.parent else { return }
        try store.renameAside(record, in: parent, to: name, waitingCreate: waitingCreate, database: database, changes: &changes)
    }

    /// The server's state of an item (new here, or changed), at `place`; `contents`: its new
    /// contents (nil: unchanged).
    package func put(
        _ item: ServerItem, as kind: ItemKind, at place: ReplicaPlace,
        contents: ReplicaNewContents?
    ) throws(ProviderError) {
        try store.putIncoming(item, as: kind, at: place, contents: contents, database: database, changes: &changes)
    }

    /// A further name `row` of the item `itemRow`, made or moved to `place`.
    package func putName(_ row: Int64, of itemRow: Int64, at place: ReplicaPlace) throws(ProviderError) {
        try store.putIncomingName(row, of: itemRow, at: place, database: database, changes: &changes)
    }

    /// A further name goes; its item counts one name less.
    package func removeName(_ row: Int64) throws(ProviderError) {
        try store.removeIncomingName(row, database: database, changes: &changes)
    }

    /// An item goes, with every name it has here, and its contents.
    package func delete(_ row: Int64) throws(ProviderError) {
        try store.deleteIncoming(row, database: database, changes: &changes)
    }

    /// This replica's version of `row` becomes the item `copyRow` (on the server already) at
    /// `place`, sharing its contents; the item waits for the server's version, its later content
    /// changes go to the copy (`StoreReplica.forkConflictedCopy`). `asked`: the server's name for it.
    package func forkConflictedCopy(
        of row: Int64, as copyRow: Int64, at place: ReplicaPlace, asked: String, sending seq: Int64,
        contentKey: String?
    ) throws(ProviderError) {
        try store.forkConflictedCopy(
            of: row, as: copyRow, at: place, asked: asked, sending: seq, contentKey: contentKey,
            database: database, changes: &changes)
    }
}
