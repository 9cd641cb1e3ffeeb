import CFuse
import Foundation
import Glibc
import DocFSProvider

// The trash, when the mount has one (BridgeOptions.trash): the provider's trash container is
// served as `/.Trash`. rm (unlink/rmdir) outside it calls trashItem, rm inside it deletes for
// good, mv into it trashes, mv out of it restores (untrashItem). Nothing here runs when the mount
// has no trash.
extension Bridge {
    static let trashName = ".Trash"

    /// The trash folder as served at the root, for lookup and readdir of `/`.
    @inline(__always)
    func servedTrash(parent: UInt64, name: String) -> Item? {
        guard options.trash, parent == InodeTable.rootIno, name == Bridge.trashName else { return nil }
        return try? provider.item(for: .trashContainer)
    }

    /// True for the trash folder and everything below it.
    func isTrashOrInTrash(_ item: Item) -> Bool {
        var current = item
        var depth = 0
        while depth < 4096 {
            if current.identifier == .trashContainer { return true }
            if current.identifier == .rootContainer { return false }
            if current.parentIdentifier == .trashContainer { return true }
            if current.parentIdentifier == .rootContainer { return false }
            guard let parent = try? provider.item(for: current.parentIdentifier) else { return false }
            current = parent
            depth += 1
        }
        return false
    }

    /// With a trash: `.Trash` is taken at the root, and nothing is created inside the trash
    /// (items get there by rm or mv). Call before any new item is made under `parent`.
    func checkTrashRules(addingTo parent: Item, name: String) throws(ProviderError) {
        guard options.trash else { return }
        if parent.identifier == .rootContainer, name == Bridge.trashName {
            throw ProviderError(.filenameCollision, "'\(Bridge.trashName)' is the trash")
        }
        if isTrashOrInTrash(parent) {
            throw ProviderError(.accessDenied, "nothing can be created in the trash (rm or mv items there instead)")
        }
    }

    /// rm with a trash: an item outside the trash is trashed (allowsTrashing, EPERM); an item in
    /// the trash is deleted for good (allowsDeleting). A folder must be empty either way (rm -r
    /// empties it first; trashing it then gathers what was trashed out of it — see LocalStore).
    func trashOrDelete(_ d: DeferredReply, op: String, item: Item, inTrash: Bool, subject: Subject) {
        perform(op, d) { [self] () async throws(RequestError) in
            if inTrash {
                try await attempt(subject) { () async throws(ProviderError) in
                    try await provider.deleteItem(withIdentifier: item.identifier)
                }
            } else {
                // A trashed folder gathers what was trashed out of it from the top of the
                // trash; the kernel may still cache those names there.
                let before = item.kind == .folder ? trashTopNames() : []
                _ = try await attempt(subject) { () async throws(ProviderError) in
                    try await trashItem(item.identifier)
                }
                if !before.isEmpty, let trash = inodes.knownNode(.trashContainer) {
                    for name in before.subtracting(trashTopNames()) {
                        notifier.invalidateEntry(parent: trash.ino, name: name)
                    }
                }
                if log.logLevel <= .info { log.info("trashed \(path(of: subject)) (now \(path(of: item.identifier)))") }
            }
            // The kernel has let go of this name; in the trash the item gets a fresh inode
            // (a removed directory's inode is dead to the kernel). Open handles keep working.
            inodes.detach(item.identifier)
            d.ok()
        }
    }

    private func trashTopNames() -> Set<String> {
        Set(((try? provider.enumerateItems(in: .trashContainer)) ?? []).map(\.filename))
    }

    /// A move across the trash's edge, checked and ready to run.
    struct TrashMove {
        var item: Item
        var toTrash: Bool
        var toParent: ItemIdentifier
        var newName: String
        /// One name of an item with several (hard links): that name moves (`moveName`), from
        /// this folder under `name`; the item keeps its other names and its inode.
        var names: (any HardLinkProvider)?
        var fromParent: ItemIdentifier
        var name: String
    }

    /// mv into the trash (trash the item under the name given, remembering where it came from)
    /// or out of it (restore: untrashItem into the new folder under the new name), checked now.
    /// Nil when the move does not cross the trash's edge and the ordinary rename rules apply.
    func trashMove(
        from fromParent: Item, name: String, to toParent: Item, newName: String,
        subject: Subject
    ) throws(RequestError) -> TrashMove? {
        let fromTrash = isTrashOrInTrash(fromParent)
        let toTrash = isTrashOrInTrash(toParent)
        guard fromTrash != toTrash else { return nil }
        return try attempt(subject) { () throws(ProviderError) -> TrashMove in
            let item = try provider.childItem(named: name, in: fromParent.identifier)
            // One name of several goes to the trash and back alone; a name in the trash still
            // counts (as in a trash folder on ext4).
            let names = item.linkCount > 1 ? hardLinks : nil
            if item.linkCount > 1, names == nil {
                throw ProviderError(.notPermitted, "one name of a file with several (hard links) does not go to the trash: rm removes just that name")
            }
            if toTrash {
                guard toParent.identifier == .trashContainer else {
                    throw ProviderError(.accessDenied, "items go to the top of the trash; move it to \(Bridge.trashName) itself")
                }
                guard item.capabilities.contains(.allowsTrashing) else {
                    throw ProviderError(.notPermitted, "item does not allow trashing (allowsTrashing)")
                }
            } else {
                try CapabilityCheck.add(into: toParent)
                try checkTrashRules(addingTo: toParent, name: newName)
            }
            if (try? provider.childItem(named: newName, in: toParent.identifier)) != nil {
                // Never overwrite on the way into or out of the trash.
                throw ProviderError(.filenameCollision, "'\(newName)' already exists in \(path(of: toParent.identifier))")
            }
            if !toTrash { try provider.admitItem(named: newName, kind: item.kind, into: toParent.identifier) }
            return TrashMove(
                item: item, toTrash: toTrash, toParent: toParent.identifier, newName: newName,
                names: names, fromParent: fromParent.identifier, name: name)
        }
    }

    func run(_ move: TrashMove, _ d: DeferredReply, subject: Subject) {
        perform("rename", d) { [self] () async throws(RequestError) in
            _ = try await attempt(subject) { () async throws(ProviderError) -> Item in
                if let names = move.names {
                    return try await names.moveName(
                        move.name, inParentItemIdentifier: move.fromParent, ofItemWithIdentifier: move.item.identifier,
                        toParentItemIdentifier: move.toParent, newName: move.newName)
                }
                if move.toTrash {
                    return try await provider.reparentItem(
                        withIdentifier: move.item.identifier, toParentItemWithIdentifier: .trashContainer,
                        newName: move.newName, replacing: nil)
                }
                return try await untrashItem(move.item.identifier, to: move.toParent, newName: move.newName)
            }
            if move.names != nil, let node = inodes.knownNode(move.item.identifier) { notifier.invalidateAttributesNow(ino: node.ino) }
            d.ok()
        }
    }
}
