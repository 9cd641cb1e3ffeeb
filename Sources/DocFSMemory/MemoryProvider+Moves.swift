import Foundation
import Synchronization
import DocFSProvider
#if canImport(Glibc)
    import Glibc
#endif

// Renaming, moving, trashing and deleting in the in-memory tree (MemoryProvider).
extension MemoryProvider {
    public func renameItem(withIdentifier identifier: ItemIdentifier, toName name: String) async throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try withTree { (tree) throws(ProviderError) -> Item in
            let node = try tree.node(identifier)
            guard let parent = node.parent, let parentNode = tree.nodes[parent] else {
                throw ProviderError(.notPermitted, "\(tree.path(of: identifier)) cannot be renamed")
            }
            if let existing = parentNode.children[NameKey(name)], existing != identifier {
                throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parent))")
            }
            if node.item.filename.utf8.elementsEqual(name.utf8) { return tree.presented(node) }
            let now = FileTime.now()
            tree.detach(identifier)
            var renamed = tree.nodes[identifier]!
            renamed.item.filename = name
            renamed.item.noteMetadataChange(at: now)
            renamed.item = retyped(renamed.item, name: name, policy: parentNode.contentsPolicy)
            tree.attach(renamed)
            tree.touch(parent, at: now)
            return tree.presented(tree.nodes[identifier]!)
        }
    }

    public func reparentItem(
        withIdentifier identifier: ItemIdentifier, toParentItemWithIdentifier parent: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?
    ) async throws(ProviderError) -> Item {
        if let newName { try ItemNames.validate(newName) }
        return try withTree { (tree) throws(ProviderError) -> Item in
            try move(&tree, identifier, to: parent, newName: newName, replacing: replacing, trashing: nil)
        }
    }

    private enum TrashMove { case into(originalName: String), outOf }

    /// Moves an item to another folder (or the same one under a new name), replacing the item at
    /// the destination if `replacing` names it, in one step under the lock. `gathering`: items to
    /// move into the item first (what a trashed folder takes along), with their names.
    private func move(
        _ tree: inout MemoryTree, _ identifier: ItemIdentifier, to destination: ItemIdentifier,
        newName: String?, replacing: ItemIdentifier?, trashing: TrashMove?,
        gathering: [(ItemIdentifier, String)] = []
    ) throws(ProviderError) -> Item {
        let node = try tree.node(identifier)
        guard let oldParent = node.parent, let oldParentNode = tree.nodes[oldParent] else {
            throw ProviderError(.notPermitted, "\(tree.path(of: identifier)) cannot be moved")
        }
        guard let newParentNode = tree.nodes[destination] else { throw ProviderError(.noSuchItem, "no folder with identifier '\(destination)'") }
        guard newParentNode.item.isFolder else { throw ProviderError(.notDirectory, "\(tree.path(of: destination)) is not a folder") }
        let name = newName ?? node.item.filename
        if node.item.isFolder {
            // A folder may not move into itself or below itself.
            var cursor: ItemIdentifier? = destination
            var steps = 0
            while let current = cursor, steps < 4096 {
                if current == identifier {
                    throw ProviderError(.invalidArgument, "cannot move \(tree.path(of: identifier)) into itself (\(tree.path(of: destination)))")
                }
                cursor = tree.nodes[current]?.parent
                steps += 1
            }
        }
        var replaced: ItemIdentifier?
        if let existingID = newParentNode.children[NameKey(name)] {
            if existingID == identifier { return tree.presented(node) } // already there under that name
            guard let replacing, replacing == existingID, let existing = tree.nodes[existingID] else {
                throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: destination))")
            }
            if node.item.isFolder && !existing.item.isFolder {
                throw ProviderError(.notDirectory, "cannot replace \(tree.path(of: existingID)), which is not a folder, with a folder")
            }
            if !node.item.isFolder && existing.item.isFolder {
                throw ProviderError(.isDirectory, "cannot replace the folder \(tree.path(of: existingID)) with a non-folder")
            }
            if existing.item.isFolder, !existing.children.isEmpty {
                throw ProviderError(.directoryNotEmpty, "cannot replace \(tree.path(of: existingID)): the folder is not empty")
            }
            replaced = existingID
        }
        // Checked: from here on nothing fails.
        let now = FileTime.now()
        if let replaced { tree.remove(replaced) }
        for (gathered, gatheredName) in gathering {
            tree.detach(gathered)
            guard var g = tree.nodes[gathered] else { continue }
            g.parent = identifier
            g.item.parentIdentifier = identifier
            g.item.filename = gatheredName
            g.item.noteMetadataChange(at: now)
            g.trashedFrom = nil
            g.trashedName = nil
            tree.attach(g)
        }
        tree.detach(identifier)
        var moved = tree.nodes[identifier]!
        moved.parent = destination
        moved.item.parentIdentifier = destination
        moved.item.filename = name
        moved.item.noteMetadataChange(at: now)
        if newName != nil { moved.item = retyped(moved.item, name: name, policy: oldParentNode.contentsPolicy) }
        switch trashing {
        case .into(let originalName):
            moved.trashedFrom = oldParent
            moved.trashedName = originalName
        case .outOf, .none:
            if destination != .trashContainer {
                moved.trashedFrom = nil
                moved.trashedName = nil
            } else if oldParent != .trashContainer {
                // Moved into the trash by hand: remember the origin as trashItem does.
                moved.trashedFrom = oldParent
                moved.trashedName = node.item.filename
            }
        }
        tree.attach(moved)
        tree.touch(oldParent, at: now)
        if destination != oldParent { tree.touch(destination, at: now) }
        return tree.presented(tree.nodes[identifier]!)
    }

    public func deleteItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        try withTree { (tree) throws(ProviderError) in
            let node = try tree.node(identifier)
            guard let parent = node.parent, tree.nodes[parent] != nil else {
                throw ProviderError(.notPermitted, "\(tree.path(of: identifier)) cannot be deleted")
            }
            if node.item.isFolder, !node.children.isEmpty {
                throw ProviderError(.directoryNotEmpty, "cannot delete \(tree.path(of: identifier)): the folder is not empty")
            }
            tree.remove(identifier)
            tree.touch(parent, at: FileTime.now())
        }
    }

    /// Moves the item to the top of the trash under a unique name, remembering its folder and
    /// name (`trashOrigin`); a folder takes along what was trashed out of it. As the store does.
    public func trashItem(withIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try withTree { (tree) throws(ProviderError) -> Item in
            let node = try tree.node(identifier)
            guard node.parent != nil else { throw ProviderError(.notPermitted, "\(tree.path(of: identifier)) cannot be trashed") }
            if node.parent == .trashContainer { return tree.presented(node) }
            let name = tree.uniqueName(node.item.filename, in: .trashContainer, isFolder: node.item.isFolder)
            let (gathering, names) = Self.gatherTrashed(into: identifier, tree)
            let trashed = try move(
                &tree, identifier, to: .trashContainer, newName: name, replacing: nil,
                trashing: .into(originalName: node.item.filename), gathering: gathering)
            for (id, trashedName, newName) in names { tree.gatherName(trashedName, of: id, into: identifier, as: newName) }
            return trashed
        }
    }

    /// Trashing a folder takes along what was trashed out of it and is still at the top of the
    /// trash (`rm -r` trashes the files first, then the emptied folders), each under its original
    /// name unless that is taken in the folder. As the store does.
    /// Returns the items, and the names of items with several (hard links), each with the
    /// name it takes in the folder.
    private static func gatherTrashed(
        into folder: ItemIdentifier, _ tree: MemoryTree
    )
        -> (items: [(ItemIdentifier, String)], names: [(ItemIdentifier, String, String)])
    {
        guard let folderNode = tree.nodes[folder], folderNode.item.isFolder else { return ([], []) }
        var gathered: [(ItemIdentifier, String)] = []
        var names: [(ItemIdentifier, String, String)] = []
        var used = Set(folderNode.children.keys)
        let trashed = (tree.nodes[.trashContainer]?.children ?? [:]).sorted { $0.key.name.utf8.lexicographicallyPrecedes($1.key.name.utf8) }
        for (key, id) in trashed {
            guard let node = tree.nodes[id] else { continue }
            let own = node.parent == .trashContainer && NameKey(node.item.filename) == key
            let place = own ? nil : node.names.first { $0.parent == .trashContainer && NameKey($0.name) == key }
            let (from, trashedName, current) =
                place.map { ($0.trashedFrom, $0.trashedName, $0.name) }
                ?? (node.trashedFrom, node.trashedName, node.item.filename)
            guard from == folder else { continue }
            var name = trashedName ?? current
            if used.contains(NameKey(name)) { name = current }
            if used.contains(NameKey(name)) { continue } // leave it loose rather than rename it twice
            used.insert(NameKey(name))
            if place != nil { names.append((id, current, name)) } else { gathered.append((id, name)) }
        }
        return (gathered, names)
    }

    /// `mv .Trash/x FOLDER/NAME`: restores under the name the move gives, in one step.
    public func untrashItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        newName: String
    ) async throws(ProviderError) -> Item {
        try ItemNames.validate(newName)
        return try withTree { (tree) throws(ProviderError) -> Item in
            _ = try tree.node(identifier)
            guard tree.isInTrash(identifier) else { throw ProviderError(.invalidArgument, "\(tree.path(of: identifier)) is not in the trash") }
            if parent == .trashContainer || tree.isInTrash(parent) {
                throw ProviderError(.invalidArgument, "cannot restore into the trash")
            }
            return try move(&tree, identifier, to: parent, newName: newName, replacing: nil, trashing: .outOf)
        }
    }

    /// The folder and name an item at the top of the trash had before it was trashed; for an item
    /// with several names, that of its name at the top of the trash (its own first). As the store does.
    public func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? {
        state.withLock { tree -> TrashOrigin? in
            guard let node = tree.nodes[identifier] else { return nil }
            if node.parent == .trashContainer, let from = node.trashedFrom {
                return TrashOrigin(parentIdentifier: from, filename: node.trashedName ?? node.item.filename)
            }
            guard let place = node.names.first(where: { $0.parent == .trashContainer && $0.trashedFrom != nil }) else { return nil }
            return TrashOrigin(parentIdentifier: place.trashedFrom!, filename: place.trashedName ?? place.name)
        }
    }
}
