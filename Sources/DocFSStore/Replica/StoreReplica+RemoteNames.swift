import Foundation
import DocFSProvider
import DocFSWire
import GRDB

// A replica's hard links (`LocalStore+Moves`): made here while the server keeps names (its
// schema 12, `RemoteSchema+Links`), sent as `link`/`unlink`/`moveName` entries, and, from schema
// 13, `trash`/`untrash` of one name (OutboxPlanner); another replica's names applied as this
// store's name rows of the same item; a name the server refused dropped here, whole.
extension StoreReplica {
    static let serverSchemaKey = "serverSchema"

    /// The server's schema as the sync engine found it at its connection; kept for the next mount.
    package func noteServerSchema(_ version: Int) {
        guard state.serverSchema.exchange(version, ordering: .relaxed) != version else { return }
        try? write { (database) throws(ProviderError) in
            do {
                try database.inDatabase { db in try Schema.setMeta(db, Self.serverSchemaKey, String(version)) }
            } catch {
                logger.warning("store \(url.path): cannot keep the server's schema version: \(error)")
            }
        }
    }

    /// The server's schema as the sync engine last found it (0: not yet).
    package var serverSchemaVersion: Int { state.serverSchema.load(ordering: .relaxed) }

    /// The server's schema as last found, from the store's meta table before the first sync.
    func knownServerSchema() -> Int {
        var version = state.serverSchema.load(ordering: .relaxed)
        if version == 0 {
            version = self.tree.meta(Self.serverSchemaKey).flatMap { Int($0) } ?? 0
            if version > 0 { state.serverSchema.store(version, ordering: .relaxed) }
        }
        return version
    }

    /// Why this replica refuses `link(2)` (nil: it does not): a server that keeps one name per
    /// file would refuse the name, and a name made here only would be half-done.
    func linkRefusal() -> String? {
        let version = knownServerSchema()
        if version >= ServerSchemaVersions.names { return nil }
        if version == 0 {
            return
                "this replica has not reached its server since it was made, so it cannot tell whether the server keeps hard links (schema \(ServerSchemaVersions.names)); try again once it has synced"
        }
        return
            "the server's docfs schema is version \(version), which keeps one name per file: its owner runs `docfs remote setup` to upgrade it (hard links need version \(ServerSchemaVersions.names))"
    }

    /// The server refused a further name made here (its file or folder gone there, a name it
    /// does not take): the name goes here too, with the changes of it still waiting, so that
    /// nothing refused stays half-done. Returns the name's path as it was (nil: gone already).
    @discardableResult
    package func dropRefusedName(row: Int64) throws(ProviderError) -> String? {
        var dropped: (count: Int, bytes: Int64) = (0, 0)
        var changes: [ProviderChange] = []
        let path = try write { (database) throws(ProviderError) -> String? in
            try flushJournal(database)
            let found = try read { (tree) throws(ProviderError) -> (Record, Record?, Record?, String)? in
                guard let named = tree.records[tree.resolve(row)], let of = named.linkOf else { return nil }
                return (named, tree.records[of], named.parent.flatMap { tree.records[$0] }, tree.path(of: named.row))
            }
            guard let (named, target, folder, path) = found else { return nil }
            let now = FileTime.now()
            var saving: [Record] = []
            var changedTarget = target
            if var changed = target {
                changed.item.linkCount = max(changed.item.linkCount - 1, 1)
                changed.item.noteMetadataChange(at: now)
                saving.append(changed)
                changedTarget = changed
            }
            if let folder { saving.append(LocalStore.touched(folder, now: now)) }
            try commit(database, saving: saving, deleting: [named.row], replicated: false, "drop the name \(path), refused by the server")
            do {
                try database.inDatabase { db in
                    let waiting = "row = \(named.row) AND kind IN ('unlink', 'moveName')"
                    if let counts = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(bytes), 0) FROM outbox WHERE \(waiting)") {
                        dropped = (counts[0], counts[1])
                    }
                    try db.execute(sql: "DELETE FROM outbox WHERE \(waiting)")
                }
            } catch {
                throw ProviderError(.ioError, "drop the waiting changes of \(path): \(error)")
            }
            self.tree.update { tree in
                tree.remove(named.row)
                if let changedTarget { tree.move(changedTarget.row, to: changedTarget) }
                if let folder { tree.replaceKeepingCounts(LocalStore.touched(folder, now: now)) }
            }
            if let parent = named.parent {
                changes.append(.nameChanged(parent: Self.identifier(forRow: parent), name: named.item.filename))
            }
            if let changedTarget { changes.append(.modified(changedTarget.item.identifier)) }
            return path
        }
        if dropped.count > 0 { outbox.didComplete(count: dropped.count, bytes: dropped.bytes) }
        if !changes.isEmpty { state.notify(changes) }
        return path
    }

    /// Another replica's further name `row` of the item `itemRow`, made, moved, trashed or restored
    /// here as a name row of the same local item, at the place the replica decided
    /// (DocFSReplica's `IncomingApply`). A trashed name (schema 13) sits at the top of the trash,
    /// remembering where it came from, as locally.
    func putIncomingName(
        _ row: Int64, of itemRow: Int64, at place: ReplicaPlace, database: DatabaseQueue,
        changes: inout [ProviderChange]
    ) throws(ProviderError) {
        let (local, parent, found) = try read { (tree) throws(ProviderError) -> (Record?, Record, Record) in
            guard let parent = tree.records[place.parentRow], parent.item.isFolder, let target = tree.records[itemRow] else {
                throw ProviderError(.noSuchItem, "no folder \(place.parentRow) or item \(itemRow) for the name \(place.name)")
            }
            return (tree.records[row], parent, target)
        }
        let now = FileTime.now()
        var target = found
        target.item.noteMetadataChange(at: now)
        var name: Record
        if let local {
            name = local
        } else {
            name = Record(row: row, parent: parent.row, item: found.item)
            name.item.identifier = Self.identifier(forRow: row)
            name.item.documentSize = 0
            name.item.linkCount = 1
            name.item.tagData = nil
            name.item.favoriteRank = nil
            name.linkOf = itemRow
            target.item.linkCount += 1
        }
        name.parent = parent.row
        name.item.parentIdentifier = parent.item.identifier
        name.item.filename = place.name
        name.trashedFrom = place.trashedFrom
        name.trashedName = place.trashedName
        try commit(database, saving: [name, target], replicated: false, "apply the name \(place.name) of item \(itemRow) from another replica")
        self.tree.update { tree in
            if local == nil { tree.insert(name) } else { tree.move(name.row, to: name) }
            tree.move(target.row, to: target)
        }
        if let local, let oldParent = local.parent {
            changes.append(.nameChanged(parent: Self.identifier(forRow: oldParent), name: local.item.filename))
        }
        changes.append(.nameChanged(parent: Self.identifier(forRow: place.parentRow), name: place.name))
        changes.append(.modified(target.item.identifier))
    }

    /// A further name another replica removed (or the name the server passed to the item): it
    /// goes, and its item counts one name less. Nothing when `row` is not a name row here.
    func removeIncomingName(_ row: Int64, database: DatabaseQueue, changes: inout [ProviderChange]) throws(ProviderError) {
        let found = try read { (tree) throws(ProviderError) -> (Record, Record?)? in
            guard let named = tree.records[row], let of = named.linkOf else { return nil }
            return (named, tree.records[of])
        }
        guard let (named, target) = found else { return }
        var saving: [Record] = []
        if var changed = target {
            changed.item.linkCount = max(changed.item.linkCount - 1, 1)
            changed.item.noteMetadataChange(at: FileTime.now())
            saving.append(changed)
        }
        try commit(
            database, saving: saving, deleting: [row], replicated: false, "remove the name \(named.item.filename) (removed on another replica)")
        self.tree.update { tree in
            tree.remove(row)
            for record in saving { tree.move(record.row, to: record) }
        }
        if let parent = named.parent { changes.append(.nameChanged(parent: Self.identifier(forRow: parent), name: named.item.filename)) }
        if let target { changes.append(.modified(target.item.identifier)) }
    }
}
