import Foundation
import DocFSProvider
import DocFSStore

// Concurrent edits (the server kept another replica's version): this replica's version becomes a
// conflicted copy beside the item, which waits for the server's version. Where the copy goes is
// decided here; the store forks it (`IncomingTreeEdit.forkConflictedCopy`), in one action.
extension ReplicaStore {
    /// This replica's version of `row` becomes the item `copyRow` (on the server already, as
    /// `name` in the folder `parentRow`), sharing its contents. The copy takes the name the server
    /// gave it. A local item holding that name that is not on the server yet (its create waits)
    /// steps aside, as for any item of the server; one that is there already keeps it and the copy
    /// is suffixed here (logged). The copy itself may be here already: its create on the server was
    /// announced, and applied as another replica's item, before this ran; it is the same item and
    /// keeps its name.
    package func forkConflictedCopy(of row: Int64, as copyRow: Int64, name: String, parentRow: Int64, sending seq: Int64,
                                    contentKey: String? = nil) throws(ProviderError) {
        _ = try editIncoming { (edit) throws(ProviderError) in
            guard let original = try edit.node(row) else { throw ProviderError(.noSuchItem, "no item \(row) to copy") }
            var folder = try edit.node(parentRow)
            if folder == nil, let up = original.parent { folder = try edit.node(up) }
            guard let folder, folder.kind == .folder else {
                throw ProviderError(.noSuchItem, "no folder for the conflicted copy of \(original.name)")
            }
            let occupant = try edit.child(named: name, in: folder.row)
            if let occupant, occupant >= ReplicaRows.temporaryBase, let other = try edit.node(occupant) {
                let aside = try edit.uniqueName(other.name, in: folder.row, isFolder: other.kind == .folder)
                try edit.rename(occupant, to: aside, waitingCreate: true)
            }
            let place = occupant == copyRow ? name : try edit.uniqueName(name, in: folder.row, isFolder: false)
            try edit.forkConflictedCopy(of: row, as: copyRow, at: ReplicaPlace(parentRow: folder.row, name: place), asked: name,
                                        sending: seq, contentKey: contentKey)
        }
    }
}
