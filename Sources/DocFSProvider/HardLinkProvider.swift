/// A provider that keeps hard links: one item under several names (opt in by conforming; the
/// bridge finds it with a cast). Apple's model has no word for it (an item has one parent), so
/// this is docfs's own. Without it the bridge refuses `link(2)` with EPERM and one log line.
///
/// The contract:
/// - An item has one identifier whatever name it is reached by: `item(for:)` answers it under
///   one of its names, `childItem(named:in:)` and `enumerateItems(in:)` under the name asked
///   for (that name as `filename`, that folder as `parentIdentifier`), each with the same
///   `linkCount` (the number of names), contents, owner, mode and times. The mount shows one
///   inode for it.
/// - Folders are never linked (`.notPermitted`).
/// - A name goes with `removeName` or `moveName`; the item goes when its last name goes (its
///   contents once no descriptor holds them, as after `deleteItem`). While an item has several
///   names the bridge removes and moves names only with these two calls, never with
///   `deleteItem`, `renameItem` or `reparentItem` (which cannot tell which name is meant).
/// - With a trash (a `TrashProvider`), one name of several goes to the trash and back with
///   `moveName`: into the top of the trash it remembers where it came from (`trashOrigin` of
///   the item answers it, its own name first), out of the trash it forgets; a name in the trash
///   still counts in `linkCount` (as in a trash folder on ext4), and gathers back with a
///   trashed folder it came from, as a trashed item does.
/// - Each call is one step: complete or not at all, and a returned call survives the same
///   failures an import does.
/// The bridge checks permissions, capabilities (`add` on the folder that takes the name) and
/// ext4's rules for who may link before it calls.
public protocol HardLinkProvider: Provider {
    /// Adds `name` in `parent` as another name of the item (`link(2)`), and returns the item
    /// under its new name. Throws `.notPermitted` for a folder, `.filenameCollision` when the
    /// name is taken, `.noSuchItem`/`.notDirectory` for `parent`, and as `admitItem` does for a
    /// type the folder refuses.
    func linkItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        name: String
    ) async throws(ProviderError) -> Item
    /// Removes the name `name` in `parent`, which must name `identifier` (`unlink` of one name).
    /// The item's other names stay; its last name going deletes it as `deleteItem` does.
    func removeName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier,
        ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError)
    /// Moves the name `name` in `parent` (which must name `identifier`) to `newName` in
    /// `newParent` (`rename` of one name), replacing what that name held: one name of another
    /// item, or a whole item with one name, as `reparentItem(replacing:)` does. When the
    /// destination already names the same item, the source name goes (as rename(2) leaves both
    /// names; the bridge answers that case itself). Returns the item under its new name.
    func moveName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier, ofItemWithIdentifier identifier: ItemIdentifier,
        toParentItemIdentifier newParent: ItemIdentifier, newName: String
    ) async throws(ProviderError) -> Item
}
