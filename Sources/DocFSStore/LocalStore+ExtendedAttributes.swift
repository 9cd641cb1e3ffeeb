#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// Stored `user.*` extended attributes (the `xattr` table, read from SQLite when asked: they are
// written straight to it, and programs ask for them far less often than for attributes).
extension LocalStore: ExtendedAttributeProvider {
    package func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] {
        let row = try itemRow(identifier)
        let names: [String]? = tree.reading { tree in
            tree.records[row] == nil ? nil : Array(tree.reader?.attributes(of: row).keys ?? [:].keys)
        }
        guard let names else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return names.sorted()
    }

    package func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        let row = try itemRow(identifier)
        let found: (exists: Bool, value: Data?) = tree.reading { tree in
            (tree.records[row] != nil, tree.reader?.attributes(of: row)[name])
        }
        guard found.exists else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        guard let value = found.value else { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
        return value
    }

    package func setExtendedAttribute(named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
                                     forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        try ExtendedAttributes.checkStorable(name, value)
        try write { (database) throws(ProviderError) in
            let row = try self.itemRow(identifier)
            let current = try read { (tree) throws(ProviderError) -> [String: Data] in
                guard tree.records[row] != nil else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return tree.reader?.attributes(of: row) ?? [:]
            }
            _ = try ExtendedAttributes.updating(current, name, to: value, mode: mode)
            do {
                // The row this attribute belongs to may still be only in the journal.
                try flushJournal(database)
                try database.inDatabase { db in
                    if let value {
                        try db.execute(sql: "INSERT INTO xattr (item, name, value) VALUES (?, ?, ?) ON CONFLICT(item, name) DO UPDATE SET value = excluded.value",
                                       arguments: [row, name, value])
                    } else {
                        try db.execute(sql: "DELETE FROM xattr WHERE item = ? AND name = ?", arguments: [row, name])
                    }
                }
            } catch let error as ProviderError {
                throw error
            } catch let error as DatabaseError {
                throw StoreWriter.providerError(error, "set attribute \(name)")
            } catch {
                throw ProviderError(.ioError, "set attribute \(name): \(error)")
            }
            // A change of metadata: the item's change time moves (through the journal, as usual).
            if var record = tree.record(row) {
                record.item.noteMetadataChange(at: FileTime.now())
                try commit(database, saving: [record], "set attribute \(name)")
                tree.replaceKeepingCounts([record])
            }
        }
    }

    /// How many stored attributes the store holds in all (for tests and `docfs check`).
    var storedAttributeCount: Int {
        try? write { (database) throws(ProviderError) in try flushJournal(database) }
        return tree.count("SELECT COUNT(*) FROM xattr") ?? 0
    }
}
