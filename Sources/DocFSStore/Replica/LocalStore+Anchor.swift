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

    /// The change log position this replica has applied (0: none; a new replica's init sets it).
    package func syncAnchor() throws(ProviderError) -> Int64 {
        guard replica != nil else { return 0 }
        return try write { (database) throws(ProviderError) -> Int64 in
            do {
                return try database.inDatabase { db in
                    Int64(try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [Self.anchorKey]) ?? "0") ?? 0
                }
            } catch {
                throw ProviderError(.ioError, "read the sync anchor: \(error)")
            }
        }
    }

    /// The operation of the change at the anchor (nil: not recorded, a store from before it).
    package func syncWitness() throws(ProviderError) -> UUID? {
        guard replica != nil else { return nil }
        return try write { (database) throws(ProviderError) -> UUID? in
            do {
                return try database.inDatabase { db in
                    try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [Self.witnessKey]).flatMap(UUID.init(uuidString:))
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

extension LocalStore {
    /// Items about to be removed because the server no longer has them although this replica
    /// sent them (its database was restored to an earlier point): their contents here are kept
    /// under `STORE/recovered/<folder>/PATH` (hard links, no copy), so that no file a close()
    /// accepted is lost. Returns the paths kept.
    package func keepRecovered(rows: [Int64], folder: String) -> [String] {
        var kept: [String] = []
        let base = url.path + "/recovered/" + folder
        for row in rows {
            let source = contentPath(row)
            guard FileManager.default.fileExists(atPath: source) else { continue }
            var path = self.path(of: Self.identifier(forRow: row))
            if path.hasSuffix("?") || path.isEmpty { path = "/item-\(row)" }
            let target = base + path
            try? FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                                     withIntermediateDirectories: true)
            if sysLink(source, target) || (try? FileManager.default.copyItem(atPath: source, toPath: target)) != nil {
                kept.append(target)
            }
        }
        return kept
    }
}
