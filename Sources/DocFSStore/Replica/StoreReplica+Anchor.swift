import Foundation
import DocFSProvider
import GRDB

// A replica's own keys in `meta` (DocFSReplica's `SyncAnchor` gives them their meaning): read
// together, and written together in one transaction after the journal went to SQLite.
extension StoreReplica {
    /// The values of these keys that are set.
    package func replicaMeta(_ keys: [String]) throws(ProviderError) -> [String: String] {
        guard !keys.isEmpty else { return [:] }
        return try write { (database) throws(ProviderError) -> [String: String] in
            do {
                return try database.inDatabase { db in try Schema.meta(db, keys) }
            } catch {
                throw ProviderError(.ioError, "read \(keys.joined(separator: ", ")) in meta: \(error)")
            }
        }
    }

    /// Sets `values` and removes `removing`, in one transaction (the store's journal goes to
    /// SQLite first, so what these keys say never covers changes that are only in the journal).
    package func setReplicaMeta(_ values: [String: String], removing: [String] = []) throws(ProviderError) {
        try write { (database) throws(ProviderError) in
            try flushJournal(database)
            do {
                try database.inDatabase { db in
                    try db.inTransaction {
                        for (key, value) in values.sorted(by: { $0.key < $1.key }) { try Schema.setMeta(db, key, value) }
                        for key in removing { try Schema.removeMeta(db, key) }
                        return .commit
                    }
                }
            } catch {
                throw ProviderError(.ioError, "record \((values.keys.sorted() + removing).joined(separator: ", ")) in meta: \(error)")
            }
        }
    }
}
