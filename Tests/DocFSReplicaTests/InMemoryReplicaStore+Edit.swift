import Foundation
import DocFSProvider
import DocFSWire
@testable import DocFSStore
@testable import DocFSReplica

/// The incoming apply's edits (`IncomingTreeEdit`) over the fake store's rows: the root and the
/// trash are folders of their own; an item's `parentRow` here is its place (the trash for a
/// trashed one, which keeps where it came from beside).
extension InMemoryReplicaStore {
    final class Edit: IncomingTreeEdit {
        let store: InMemoryReplicaStore
        init(store: InMemoryReplicaStore) { self.store = store }

        func waitingRows() throws(ProviderError) -> Set<Int64> { store.state.withLock { Set($0.outbox.map(\.row)) } }

        func node(_ row: Int64) throws(ProviderError) -> ReplicaNode? {
            store.state.withLock { s -> ReplicaNode? in
                let isEmpty = !s.items.values.contains { $0.parentRow == row }
                if row == ReplicaRows.root || row == ReplicaRows.trash {
                    return ReplicaNode(row: row, parent: nil, name: row == ReplicaRows.root ? "" : ".Trash", kind: .folder, isEmpty: isEmpty)
                }
                guard let item = s.items[row] else { return nil }
                return ReplicaNode(
                    row: row, parent: item.parentRow, name: item.name, kind: item.kind, linkOf: item.linkOf,
                    linkCount: 1 + s.items.values.filter { $0.linkOf == row }.count, isEmpty: isEmpty,
                    contentVersion: UInt64(item.contentVersion), isDownloaded: true, trashedFrom: s.trashedFrom[row],
                    attributes: ReplicatedAttributes(
                        ownerID: item.ownerID, groupID: item.groupID, posixPermissions: item.posixPermissions, creationTime: item.creationTime,
                        modificationTime: item.modificationTime, tagData: item.tagData, symlinkTargetPath: item.symlinkTargetPath),
                    favoriteRank: item.favoriteRank)
            }
        }

        func child(named name: String, in folder: Int64) throws(ProviderError) -> Int64? {
            store.state.withLock { s in s.items.first { $0.value.parentRow == folder && $0.value.name == name }?.key }
        }

        func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) throws(ProviderError) -> String {
            ItemNames.unique(name, isFolder: isFolder) { candidate in
                (try? self.child(named: candidate, in: folder)) != nil
            }
        }

        func holdForWriter(_ row: Int64) throws(ProviderError) -> Bool { store.state.withLock { $0.held.contains(row) } }

        func rename(_ row: Int64, to name: String, waitingCreate: Bool) throws(ProviderError) {
            store.state.withLock { s in
                s.items[row]?.name = name
                guard waitingCreate else { return }
                for index in s.outbox.indices where s.outbox[index].row == row && [.create, .link].contains(s.outbox[index].kind) {
                    s.outbox[index].name = name
                }
            }
        }

        /// The server's attributes at the place decided; the contents' version and object only
        /// when they are new (a downloaded file's bytes are copied from its staging path).
        func put(_ item: ServerItem, as kind: ItemKind, at place: ReplicaPlace, contents: ReplicaNewContents?) throws(ProviderError) {
            store.state.withLock { s in
                var here = item
                here.parentRow = place.parentRow
                here.name = place.name
                here.kind = kind
                if contents == nil, let local = s.items[item.row] {
                    here.contentVersion = local.contentVersion
                    here.contentKey = local.contentKey
                    here.size = local.size
                }
                s.items[item.row] = here
                s.trashedFrom[item.row] = place.trashedFrom
            }
            guard let contents else { return }
            let file = store.contentFile(item.row)
            try? FileManager.default.removeItem(at: file)
            if let staged = contents.staged {
                try? FileManager.default.copyItem(atPath: staged, toPath: file.path)
            } else if contents.downloaded {
                _ = FileManager.default.createFile(atPath: file.path, contents: Data())
            }
        }

        func putName(_ row: Int64, of itemRow: Int64, at place: ReplicaPlace) throws(ProviderError) {
            store.state.withLock { s in
                guard let target = s.items[itemRow] else { return }
                var name = s.items[row] ?? target
                name.row = row
                name.parentRow = place.parentRow
                name.name = place.name
                name.linkOf = itemRow
                s.items[row] = name
                s.trashedFrom[row] = place.trashedFrom
            }
        }

        func removeName(_ row: Int64) throws(ProviderError) {
            store.state.withLock { s in
                if s.items[row]?.linkOf != nil { s.items[row] = nil }
            }
        }

        func delete(_ row: Int64) throws(ProviderError) {
            store.state.withLock { s in
                s.items[row] = nil
                s.trashedFrom[row] = nil
                for (other, item) in s.items where item.linkOf == row { s.items[other] = nil }
            }
            try? FileManager.default.removeItem(at: store.contentFile(row))
        }

        /// The copy takes this replica's contents; the item keeps its row for the server's version.
        func forkConflictedCopy(
            of row: Int64, as copyRow: Int64, at place: ReplicaPlace, asked: String, sending seq: Int64,
            contentKey: String?
        ) throws(ProviderError) {
            store.state.withLock { s in
                s.forks.append(Fork(row: row, copyRow: copyRow, name: place.name, parentRow: place.parentRow))
                if var copy = s.items[row] {
                    copy.row = copyRow
                    copy.name = place.name
                    copy.parentRow = place.parentRow
                    copy.contentKey = contentKey
                    s.items[copyRow] = copy
                }
                // The item's own version is the server's from now on: fetched again.
                s.items[row]?.contentKey = nil
            }
            try? FileManager.default.moveItem(at: store.contentFile(row), to: store.contentFile(copyRow))
        }
    }
}
