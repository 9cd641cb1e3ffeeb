import Foundation
import DocFSProvider
import GRDB

// A replica's sync anchor: the server's change log position it has applied. Kept in `meta`
// (`anchor`), written in the same transaction as the changes it covers.
extension LocalStore {
    static let anchorKey = "anchor"
    /// The operation id of the change at the anchor: the server no longer having it there means
    /// its database went back to an earlier point, whatever was written after (positions rewind).
    static let witnessKey = "anchorOperation"

    /// The change log position this replica has applied (0: none; a new replica's init sets it),
    /// and the operation of the change there, its witness (nil: not recorded, a store from before
    /// it), read together.
    package func syncAnchor() throws(ProviderError) -> (position: Int64, witness: UUID?) {
        guard replica != nil else { return (0, nil) }
        return try write { (database) throws(ProviderError) -> (position: Int64, witness: UUID?) in
            do {
                return try database.inDatabase { db in
                    let rows = try Row.fetchAll(db, sql: "SELECT key, value FROM meta WHERE key IN (?, ?)",
                                                arguments: [Self.anchorKey, Self.witnessKey])
                    var anchor: (position: Int64, witness: UUID?) = (0, nil)
                    for row in rows {
                        let key: String = row[0], value: String = row[1]
                        if key == Self.anchorKey { anchor.position = Int64(value) ?? 0 } else { anchor.witness = UUID(uuidString: value) }
                    }
                    return anchor
                }
            } catch {
                throw ProviderError(.ioError, "read the sync anchor: \(error)")
            }
        }
    }

    /// Records the anchor and the operation of the change there, together (the store's journal
    /// goes to SQLite first, so the anchor never covers changes that are only in the journal).
    package func setSyncAnchor(_ position: Int64, witness: UUID?) throws(ProviderError) {
        guard replica != nil else { return }
        try write { (database) throws(ProviderError) in
            try flushJournal(database)
            do {
                try database.inDatabase { db in
                    try db.inTransaction {
                        try Schema.setMeta(db, Self.anchorKey, String(position))
                        if let witness {
                            try Schema.setMeta(db, Self.witnessKey, witness.uuidString)
                        } else {
                            try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [Self.witnessKey])
                        }
                        return .commit
                    }
                }
            } catch {
                throw ProviderError(.ioError, "record the sync anchor: \(error)")
            }
        }
    }
}
