import Foundation
import DocFSProvider
import GRDB

// Metadata of one item: tags, favourite rank, last-used date, mode, owner and times.
extension LocalStore: AppleMetadataProvider {
    /// Changes metadata of one item (one transaction, one new metadata version).
    private func updateSync(_ identifier: ItemIdentifier, _ what: String, _ change: (inout Record) throws(ProviderError) -> Void) throws(ProviderError) -> Item {
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return record
            }
            try change(&record)
            record.item.noteMetadataChange(at: FileTime.now())
            try commit(database, saving: [record], what)
            return tree.update { tree -> Item in
                tree.replaceKeepingCounts(record)
                return tree.records[row]!.item
            }
        }
    }

    /// Stores (or clears) the item's tag data: a new metadata version.
    package func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set tags") { $0.item.tagData = tagData }
    }

    /// Stores (or clears) the item's favourite rank: a new metadata version.
    package func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set favorite rank") { $0.item.favoriteRank = rank }
    }

    /// Stores (or clears) the item's last-used date (its access time).
    package func setLastUsedDate(_ date: Date?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set last-used date") { $0.item.lastUsedDate = date }
    }

    /// chmod, chown, chgrp, utimensat as the bridge passes them (its rules applied): one commit,
    /// the change time moves. The mode of a symbolic link cannot change (`.unsupported`).
    package func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set attributes") { (record) throws(ProviderError) in
            if changes.posixPermissions != nil, record.item.kind == .symlink {
                throw ProviderError(.unsupported, "the mode of a symbolic link cannot change")
            }
            changes.apply(to: &record.item)
        }
    }
}
