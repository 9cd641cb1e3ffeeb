import DocFS
import DocFSMemory
import Foundation

/// The memory provider behind a front that says yes and keeps nothing where the suite's later
/// checks look: attribute changes, new contents, deletions, tags and rank are answered as done
/// and dropped; a FIFO or socket becomes a folder; its storage has more blocks available than
/// free. Each of those checks must fail against it, by name.
final class LyingProvider: Provider, SpecialItemProvider, AppleMetadataProvider, @unchecked Sendable {
    let inner: MemoryProvider
    init(_ inner: MemoryProvider) { self.inner = inner }

    // The lies.
    func storageStatistics() -> StorageStatistics {
        var stats = inner.storageStatistics()
        stats.availableBlocks = stats.freeBlocks + 1
        return stats
    }
    func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        try inner.item(for: identifier)
    }
    func modifyContents(
        ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
        from fileURL: URL
    ) async throws(ProviderError) -> Item {
        try inner.item(for: identifier)
    }
    func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {}
    func createSpecialItem(
        withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try await inner.createDirectory(withName: name, inParentItemIdentifier: parent, attributes: attributes)
    }
    func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try inner.item(for: identifier)
    }
    func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try inner.item(for: identifier)
    }

    // The rest is the memory provider's.
    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item { try inner.item(for: identifier) }
    func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item { try inner.childItem(named: name, in: parent) }
    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] { try inner.enumerateItems(in: container) }
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 { try inner.openContents(of: identifier) }
    var stagingDirectory: URL { inner.stagingDirectory }
    func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try await inner.importDocument(from: file, toParentItemIdentifier: parent, attributes: attributes)
    }
    func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try await inner.createDirectory(withName: name, inParentItemIdentifier: parent, attributes: attributes)
    }
    func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try await inner.createSymbolicLink(withName: name, target: target, inParentItemIdentifier: parent, attributes: attributes)
    }
    func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        try await inner.renameItem(withIdentifier: identifier, toName: name)
    }
    func reparentItem(
        withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?
    ) async throws(ProviderError) -> Item {
        try await inner.reparentItem(withIdentifier: identifier, toParentItemWithIdentifier: parent, newName: newName, replacing: replacing)
    }
    func synchronize() async throws(ProviderError) { try await inner.synchronize() }
    func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError) {
        try inner.admitItem(named: name, kind: kind, into: parent)
    }
    func supertypes(of type: ContentType) -> [ContentType] { inner.supertypes(of: type) }
    func contentType(of item: Item) -> ContentType { inner.contentType(of: item) }
    func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) { inner.observeChanges(handler) }
}
