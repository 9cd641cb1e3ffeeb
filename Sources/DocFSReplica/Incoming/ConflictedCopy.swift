import Foundation
import DocFSProvider
import DocFSStore
import Logging

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
    package func forkConflictedCopy(
        of row: Int64, as copyRow: Int64, name: String, parentRow: Int64, sending seq: Int64,
        contentKey: String? = nil
    ) throws(ProviderError) {
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
            try edit.forkConflictedCopy(
                of: row, as: copyRow, at: ReplicaPlace(parentRow: folder.row, name: place), asked: name,
                sending: seq, contentKey: contentKey)
        }
    }
}

/// A writer's conflicted copy (its close found another replica's version there first,
/// `WriterConflict`), decided here like the incoming ones: the copy's name (`ConflictNames`), and
/// what is noted on the item and on the copy (`user.docfs.conflict`, `docfs status`) and logged.
/// The store makes the copy (`WriterConflictHandler`).
final class WriterConflicts: WriterConflictHandler {
    private weak let store: (any ReplicaStore)?
    private let names: @Sendable (String) -> String
    private let logger: Logger

    init(store: any ReplicaStore, names: @escaping @Sendable (String) -> String, logger: Logger) {
        self.store = store
        self.names = names
        self.logger = logger
    }

    func copyName(for conflict: WriterConflict) -> String { names(conflict.name) }

    func kept(_ conflict: WriterConflict, asCopy copyRow: Int64, named place: String) {
        let (name, path) = (conflict.name, conflict.path)
        store?.noteConflict(
            "this replica's edit of \"\(name)\" (based on version \(conflict.base)) is \"\(place)\" beside it: another replica's version \(conflict.current) came first",
            row: conflict.row, summary: "\(path): written while another replica's version arrived; this one's is \"\(place)\"")
        store?.noteConflict(
            "conflicted copy of \"\(name)\": another replica's version arrived while it was being written",
            row: copyRow, summary: "\(path): conflicted copy \"\(place)\"")
        logger.warning(
            "\(path): written while another replica's version \(conflict.current) arrived (the writer began at \(conflict.base)): the new version keeps the name, this one is \"\(place)\""
        )
    }
}
