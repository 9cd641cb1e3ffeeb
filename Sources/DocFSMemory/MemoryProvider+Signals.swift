import DocFSProvider

// Changes the in-memory tree makes on its own, as a provider that syncs from elsewhere would:
// signalled to the mount (`observeChanges`), which drops what the kernel cached of them. The
// conformance suite's signal check and demos use it; the mount's own actions need no signal.
extension MemoryProvider {
    public func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {
        observers.withLock { $0.append(handler) }
    }

    /// Renames an item as if another party had (not through the mount), and signals the old
    /// and the new name.
    public func renameOnItsOwn(_ identifier: ItemIdentifier, to name: String) async throws(ProviderError) {
        let before = try item(for: identifier)
        let after = try await renameItem(withIdentifier: identifier, toName: name)
        signal([
            .nameChanged(parent: before.parentIdentifier, name: before.filename),
            .nameChanged(parent: after.parentIdentifier, name: after.filename),
        ])
    }

    /// Deletes an item as if another party had, and signals its name.
    public func deleteOnItsOwn(_ identifier: ItemIdentifier) async throws(ProviderError) {
        let before = try item(for: identifier)
        try await deleteItem(withIdentifier: identifier)
        signal([.nameChanged(parent: before.parentIdentifier, name: before.filename)])
    }

    private func signal(_ changes: [ProviderChange]) {
        for handler in observers.withLock({ $0 }) { handler(changes) }
    }
}
