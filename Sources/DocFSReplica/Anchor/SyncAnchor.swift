import Foundation
import DocFSProvider

/// A replica's sync anchor: the server's change log position it has applied, and the operation
/// id of the change there, its witness: the server no longer having that operation there means
/// its database went back to an earlier point, whatever was written after (positions rewind).
/// Kept in the store's `meta` (`anchor`, `anchorOperation`: stores on disk have these names),
/// read together and written together after the store's journal, in one transaction.
package struct SyncAnchor: Equatable, Sendable {
    static let positionKey = "anchor"
    static let witnessKey = "anchorOperation"

    /// 0: none applied (a new replica's init sets it).
    package var position: Int64
    /// nil: not recorded (a store from before the witness, or an empty log): the position alone
    /// is trusted.
    package var witness: UUID?

    package init(position: Int64, witness: UUID?) {
        self.position = position
        self.witness = witness
    }

    /// The anchor the store holds ((0, nil) when none is recorded).
    package static func read(from store: any ReplicaStore) throws(ProviderError) -> SyncAnchor {
        let values = try store.replicaMeta([positionKey, witnessKey])
        return SyncAnchor(
            position: values[positionKey].flatMap { Int64($0) } ?? 0,
            witness: values[witnessKey].flatMap { UUID(uuidString: $0) })
    }

    /// Records the position and its witness together (no witness: any older one is removed, so
    /// it never vouches for another position).
    package func write(to store: any ReplicaStore) throws(ProviderError) {
        var values = [Self.positionKey: String(position)]
        if let witness { values[Self.witnessKey] = witness.uuidString }
        try store.setReplicaMeta(values, removing: witness == nil ? [Self.witnessKey] : [])
    }
}

extension ReplicaStore {
    /// The change log position applied up to, and the operation seen there (`SyncAnchor`).
    package func syncAnchor() throws(ProviderError) -> (position: Int64, witness: UUID?) {
        let anchor = try SyncAnchor.read(from: self)
        return (anchor.position, anchor.witness)
    }

    package func setSyncAnchor(_ position: Int64, witness: UUID?) throws(ProviderError) {
        try SyncAnchor(position: position, witness: witness).write(to: self)
    }
}
