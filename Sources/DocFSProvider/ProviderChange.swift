/// A change a provider made on its own, which the mount turns into kernel cache invalidation
/// (see `Provider.observeChanges`). What the mount asked for through an action needs no signal.
public enum ProviderChange: Hashable, Sendable {
    /// The item's contents or attributes changed: the kernel drops its cached pages and attributes.
    case modified(ItemIdentifier)
    /// A name appeared, vanished or moved in a folder (an item added, deleted, renamed or moved
    /// there; for a move, signal the old and the new place): the kernel forgets what it knew of
    /// that name, and of the folder's attributes.
    case nameChanged(parent: ItemIdentifier, name: String)
    /// The item now has another identifier, such as the permanent one a server gave a temporary
    /// item ("delete the temporary item and add the permanent one"): open files and the inode
    /// number stay as they were.
    case identifierReplaced(old: ItemIdentifier, new: ItemIdentifier)
}
