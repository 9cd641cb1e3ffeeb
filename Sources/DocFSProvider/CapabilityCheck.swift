/// Which capability gates which action, and the errno a refusal gets (README, "Refusals"): the
/// one copy of these rules, called by the bridge before every action, by `docfs import` and by
/// anyone writing a provider who wants the same answers. Pure functions over items.
public enum CapabilityCheck {
    /// create, mkdir, symlink, mknod, and the destination of a move: EACCES.
    public static func add(into parent: Item) throws(ProviderError) {
        guard parent.kind == .folder else { throw ProviderError(.notDirectory, "'\(parent.filename)' is not a folder") }
        guard parent.capabilities.contains(.allowsAddingSubItems) else {
            throw ProviderError(.accessDenied, "folder does not allow adding items (allowsAddingSubItems)")
        }
    }

    public static func read(_ item: Item) throws(ProviderError) {
        guard item.capabilities.contains(.allowsReading) else {
            throw ProviderError(.accessDenied, "item does not allow reading (allowsReading)")
        }
    }

    public static func enumerate(_ folder: Item) throws(ProviderError) {
        guard folder.capabilities.contains(.allowsContentEnumerating) else {
            throw ProviderError(.accessDenied, "folder does not allow listing (allowsContentEnumerating)")
        }
    }

    /// open for write, O_TRUNC, truncate, changing the modification time: EACCES.
    public static func write(_ item: Item) throws(ProviderError) {
        guard item.capabilities.contains(.allowsWriting) else {
            throw ProviderError(.accessDenied, "item does not allow writing (allowsWriting)")
        }
    }

    /// unlink, rmdir, and the item replaced by a rename over it: EPERM.
    public static func delete(_ item: Item) throws(ProviderError) {
        guard item.capabilities.contains(.allowsDeleting) else {
            throw ProviderError(.deletionRejected, "item does not allow deleting (allowsDeleting)")
        }
    }

    /// A rename: in place needs allowsRenaming (EPERM); to another folder needs allowsReparenting
    /// (EPERM) and the new folder's allowsAddingSubItems (EACCES); a replaced item needs
    /// allowsDeleting (EPERM).
    public static func move(_ item: Item, from oldParent: Item, to newParent: Item, renaming: Bool, replacing: Item?) throws(ProviderError) {
        if oldParent.identifier == newParent.identifier {
            guard item.capabilities.contains(.allowsRenaming) else {
                throw ProviderError(.notPermitted, "item does not allow renaming (allowsRenaming)")
            }
        } else {
            guard item.capabilities.contains(.allowsReparenting) else {
                throw ProviderError(.notPermitted, "item does not allow moving to another folder (allowsReparenting)")
            }
            if renaming, !item.capabilities.contains(.allowsRenaming) {
                throw ProviderError(.notPermitted, "item does not allow renaming (allowsRenaming)")
            }
            try add(into: newParent)
        }
        if let replacing {
            do { try delete(replacing) } catch {
                throw ProviderError(.notPermitted, "the item it would replace does not allow deleting (allowsDeleting)")
            }
        }
    }

    /// A rename over an existing name: a folder only over an empty folder (ENOTEMPTY otherwise),
    /// a non-folder only over a non-folder (EISDIR / ENOTDIR), as rename(2) on a local filesystem.
    /// `existing.childItemCount` must be exact (the Provider contract).
    public static func replace(_ existing: Item, with item: Item) throws(ProviderError) {
        if existing.kind == .folder, item.kind != .folder { throw ProviderError(.isDirectory, "cannot replace a folder with a file") }
        if existing.kind != .folder, item.kind == .folder { throw ProviderError(.notDirectory, "cannot replace a file with a folder") }
        if existing.kind == .folder, (existing.childItemCount ?? 0) > 0 {
            throw ProviderError(.directoryNotEmpty, "the folder it would replace is not empty")
        }
    }
}
