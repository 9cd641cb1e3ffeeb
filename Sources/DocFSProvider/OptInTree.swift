import struct Foundation.Data

// Opt-in sides of a tree that only some providers keep: a trash, Apple's metadata, stored
// extended attributes, special items. The bridge finds each with a cast when it starts; none has
// a default, so a provider that declares one and misspells a requirement does not compile.
// Without one the bridge refuses as a filesystem without the feature does (Bridge+OptIns.swift).

/// A provider with a trash: `.trashContainer` is a folder, `rm` on a mount with `-o trash` moves
/// an item into it, `mv` out of it restores it. Without it the bridge refuses both (EROFS).
public protocol TrashProvider: Provider {
    /// Moves an item into the trash container under a unique name, remembering where it came
    /// from (`rm` on a mount with `-o trash`).
    func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
    /// Restores a trashed item into `parent` under `newName` (`mv .Trash/x FOLDER/NAME`). Throws
    /// `.invalidArgument` when the item is not in the trash or `parent` is, otherwise as
    /// `reparentItem`. The plain `untrashItem(withIdentifier:toParentItemIdentifier:)` (back where
    /// it came from) is built on this.
    func untrashItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        newName: String
    ) async throws(ProviderError) -> Item
    /// Where a trashed item (at the top of the trash) came from, when the provider remembers it:
    /// the bridge shows it as `user.docfs.trashed-from`, and the plain `untrashItem` restores
    /// there; nil when it does not remember.
    func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin?
}

extension TrashProvider {
    /// Restores a trashed item under the name it had before it was trashed, into `parent` or,
    /// when nil, into the folder it came from (`trashOrigin`) if that is still a folder outside
    /// the trash, else into the root: `untrashItem(withIdentifier:toParentItemIdentifier:newName:)`
    /// with those. Throws what that throws (`.invalidArgument` for an item not in the trash).
    /// The origin is read before the restore, not in the same step.
    public func untrashItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier?
    ) async throws(ProviderError) -> Item {
        let trashed = try item(for: identifier)
        let origin = trashOrigin(of: identifier)
        var destination = ItemIdentifier.rootContainer
        if let parent {
            destination = parent
        } else if let from = origin?.parentIdentifier, (try? item(for: from))?.isFolder == true, !isInTrash(from) {
            destination = from
        }
        return try await untrashItem(
            withIdentifier: identifier, toParentItemIdentifier: destination,
            newName: origin?.filename ?? trashed.filename)
    }

    /// Whether the item is the trash container or inside it, found by walking its parents.
    private func isInTrash(_ identifier: ItemIdentifier) -> Bool {
        var cursor = identifier
        for _ in 0..<4096 {
            if cursor == .trashContainer { return true }
            if cursor == .rootContainer { return false }
            guard let parent = try? item(for: cursor).parentIdentifier, parent != cursor else { return false }
            cursor = parent
        }
        return false
    }
}

/// A provider that keeps Apple's metadata beside an item: its tags and favourite rank
/// (NSFileProvider vocabulary), set through `user.docfs.tags` and `user.docfs.favorite-rank`.
/// Without it the bridge refuses setting them (EOPNOTSUPP). (Apple's last-used date is the
/// access time, changed through `setAttributes`.)
public protocol AppleMetadataProvider: Provider {
    /// Sets or clears the item's tag data (`setfattr -n user.docfs.tags` and its removal).
    func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
    /// Sets or clears the item's favourite rank (`user.docfs.favorite-rank`).
    func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item
}

/// A provider that stores extended attributes (`user.*` other than docfs's own) with its items.
/// Without it an item has none: `listxattr` names docfs's own only, `getxattr` answers ENODATA
/// and `setxattr` EOPNOTSUPP.
public protocol ExtendedAttributeProvider: Provider {
    /// Names of the item's stored extended attributes (`listxattr`), in a stable order.
    func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String]
    /// One stored extended attribute (`getxattr`); `.noSuchAttribute` (ENODATA) when it is not set.
    func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data
    /// Stores (or, with a nil value, removes) an extended attribute (`setxattr`, `removexattr`).
    /// Limits and the create/replace modes: `ExtendedAttributes`.
    func setExtendedAttribute(
        named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
        forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError)
}

/// A provider that keeps the names of FIFOs, sockets and device nodes. Without it the bridge
/// refuses `mknod`, `mkfifo` and a socket's `bind` with EPERM, as a filesystem without them does.
public protocol SpecialItemProvider: Provider {
    /// Makes the name of a FIFO, a socket or a device node: an item with no contents
    /// (`kind.isSpecial`, else `.invalidArgument`; a device node keeps `attributes.deviceNumber`
    /// and is never opened as a device, the mount being `nodev`). Throws as `createDirectory`
    /// does for the parent and the name.
    func createSpecialItem(
        withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item
}
