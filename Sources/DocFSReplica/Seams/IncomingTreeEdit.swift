import Foundation
import DocFSProvider
import DocFSWire
import DocFSStore

/// What the incoming apply (`IncomingApply`) asks of the replica's store inside one action under
/// its writer lock (`ReplicaStore.editIncoming`): reads of the tree and the outbox, and writes of
/// what it decided, each committed by the store as one journal entry. `StoreReplica`'s
/// `ReplicaTreeEdit` in a mount; the store in memory in Tests/DocFSReplicaTests.
package protocol IncomingTreeEdit: AnyObject {
    // MARK: Reads

    /// Rows with changes of this replica still waiting in the outbox.
    func waitingRows() throws(ProviderError) -> Set<Int64>
    /// The item here (nil: not here).
    func node(_ row: Int64) throws(ProviderError) -> ReplicaNode?
    /// The row holding `name` in the folder, if any.
    func child(named name: String, in folder: Int64) throws(ProviderError) -> Int64?
    /// `name`, or a suffixed one free in the folder.
    func uniqueName(_ name: String, in folder: Int64, isFolder: Bool) throws(ProviderError) -> String
    /// Whether a change of `row` must wait for the writer that has it open (noted, to apply at
    /// its close, and kept across a restart).
    func holdForWriter(_ row: Int64) throws(ProviderError) -> Bool

    // MARK: Writes

    /// The item takes another name in its folder; `waitingCreate`: its waiting create takes it too.
    func rename(_ row: Int64, to name: String, waitingCreate: Bool) throws(ProviderError)
    /// The server's state of an item, new or changed here, at `place`; `contents`: its new
    /// contents (nil: unchanged).
    func put(_ item: ServerItem, as kind: ItemKind, at place: ReplicaPlace, contents: ReplicaNewContents?) throws(ProviderError)
    /// A further name `row` of the item `itemRow`, made or moved to `place`.
    func putName(_ row: Int64, of itemRow: Int64, at place: ReplicaPlace) throws(ProviderError)
    /// A further name goes; its item counts one name less.
    func removeName(_ row: Int64) throws(ProviderError)
    /// An item goes, with every name it has here and its contents.
    func delete(_ row: Int64) throws(ProviderError)
    /// This replica's version of `row` becomes the item `copyRow` (on the server already) at
    /// `place`, sharing its contents; the item waits for the server's version, its later content
    /// changes go to the copy. `asked`: the server's name for the copy.
    func forkConflictedCopy(
        of row: Int64, as copyRow: Int64, at place: ReplicaPlace, asked: String, sending seq: Int64,
        contentKey: String?) throws(ProviderError)
}
