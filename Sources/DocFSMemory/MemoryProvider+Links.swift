import DocFSProvider

// Hard links in the in-memory tree: a node keeps its first name as `parent`/`item.filename` and
// the others in `names`; every folder's `children` maps each name to the node. An item is seen
// under the name it was reached by (`MemoryTree.viewed`). Each call is one step under the lock.
extension MemoryProvider: HardLinkProvider {
    public func linkItem(
        withIdentifier identifier: ItemIdentifier, toParentItemIdentifier parent: ItemIdentifier,
        name: String
    ) async throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try withTree { (tree) throws(ProviderError) -> Item in
            let node = try tree.node(identifier)
            if node.item.isFolder { throw ProviderError(.notPermitted, "\(tree.path(of: identifier)): folders cannot be hard-linked") }
            guard node.parent != nil else { throw ProviderError(.notPermitted, "\(tree.path(of: identifier)) cannot be linked") }
            _ = try Self.checkedParent(tree, parent, name: name)
            let now = FileTime.now()
            tree.nodes[identifier]!.names.append(NamePlace(parent: parent, name: name))
            tree.nodes[identifier]!.item.noteMetadataChange(at: now)
            tree.nodes[parent]!.children[NameKey(name)] = identifier
            tree.sortedCache[parent] = nil
            tree.recount(parent, folderDelta: 0)
            tree.touch(parent, at: now)
            return tree.viewed(tree.nodes[identifier]!, name: name, in: parent)
        }
    }

    public func removeName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier,
        ofItemWithIdentifier identifier: ItemIdentifier
    ) async throws(ProviderError) {
        try withTree { (tree) throws(ProviderError) in
            let now = FileTime.now()
            try tree.removeName(name, in: parent, of: identifier, at: now)
            tree.touch(parent, at: now)
        }
    }

    public func moveName(
        _ name: String, inParentItemIdentifier parent: ItemIdentifier, ofItemWithIdentifier identifier: ItemIdentifier,
        toParentItemIdentifier newParent: ItemIdentifier, newName: String
    ) async throws(ProviderError) -> Item {
        try ItemNames.validate(newName)
        return try withTree { (tree) throws(ProviderError) -> Item in
            let node = try tree.node(identifier)
            guard tree.nodes[parent]?.children[NameKey(name)] == identifier else {
                throw ProviderError(.noSuchItem, "no '\(name)' of that item in \(tree.path(of: parent))")
            }
            let destination = try tree.folder(newParent)
            // A name in the trash is still a name of the item (its link count keeps it); it
            // remembers where it came from, as a trashed item does. As the store does.
            let intoTrash = newParent == .trashContainer && parent != .trashContainer
            func origin(_ kept: (ItemIdentifier?, String?)) -> (ItemIdentifier?, String?) {
                intoTrash ? (parent, name) : newParent == .trashContainer ? kept : (nil, nil)
            }
            if let existing = destination.children[NameKey(newName)], let existingNode = tree.nodes[existing] {
                if existing == identifier { throw ProviderError(.filenameCollision, "'\(newName)' already names the item") }
                if node.item.isFolder && !existingNode.item.isFolder {
                    throw ProviderError(.notDirectory, "cannot replace \(tree.path(of: existing)), which is not a folder, with a folder")
                }
                if !node.item.isFolder && existingNode.item.isFolder {
                    throw ProviderError(.isDirectory, "cannot replace the folder \(tree.path(of: existing)) with a non-folder")
                }
                if existingNode.item.isFolder, !existingNode.children.isEmpty {
                    throw ProviderError(.directoryNotEmpty, "cannot replace \(tree.path(of: existing)): the folder is not empty")
                }
            }
            // Checked: from here on nothing fails.
            let now = FileTime.now()
            if let existing = destination.children[NameKey(newName)] {
                try tree.removeName(newName, in: newParent, of: existing, at: now)
            }
            var moved = tree.nodes[identifier]!
            if moved.parent == parent, moved.item.filename.utf8.elementsEqual(name.utf8) {
                tree.detach(identifier)
                moved.parent = newParent
                moved.item.parentIdentifier = newParent
                moved.item.filename = newName
                moved.item.noteMetadataChange(at: now)
                (moved.trashedFrom, moved.trashedName) = origin((moved.trashedFrom, moved.trashedName))
                tree.attach(moved)
            } else if let index = moved.names.firstIndex(where: { $0.parent == parent && NameKey($0.name) == NameKey(name) }) {
                var place = moved.names[index]
                (place.parent, place.name) = (newParent, newName)
                (place.trashedFrom, place.trashedName) = origin((place.trashedFrom, place.trashedName))
                moved.names[index] = place
                moved.item.noteMetadataChange(at: now)
                tree.nodes[identifier] = moved
                tree.nodes[parent]?.children[NameKey(name)] = nil
                tree.nodes[newParent]?.children[NameKey(newName)] = identifier
                for folder in [parent, newParent] {
                    tree.sortedCache[folder] = nil
                    tree.recount(folder, folderDelta: 0)
                }
            }
            tree.touch(parent, at: now)
            if newParent != parent { tree.touch(newParent, at: now) }
            return tree.viewed(tree.nodes[identifier]!, name: newName, in: newParent)
        }
    }
}

extension MemoryTree {
    /// The item under one of its names (that name and folder as `filename` and parent).
    func viewed(_ node: Node, name: String, in folder: ItemIdentifier) -> Item {
        var item = presented(node)
        guard !node.names.isEmpty else { return item }
        item.filename = name
        item.parentIdentifier = folder
        return item
    }

    /// A further name of `id` at the top of the trash goes back into `folder` as `newName` (the
    /// trashed folder it came from takes it along; `MemoryProvider.trashItem`).
    mutating func gatherName(_ name: String, of id: ItemIdentifier, into folder: ItemIdentifier, as newName: String) {
        guard var node = nodes[id],
            let index = node.names.firstIndex(where: { $0.parent == .trashContainer && NameKey($0.name) == NameKey(name) })
        else { return }
        node.names[index] = NamePlace(parent: folder, name: newName)
        nodes[id] = node
        nodes[.trashContainer]?.children[NameKey(name)] = nil
        nodes[folder]?.children[NameKey(newName)] = id
        for changed in [ItemIdentifier.trashContainer, folder] {
            sortedCache[changed] = nil
            recount(changed, folderDelta: 0)
        }
    }

    /// Takes one name of `id` away: one of several goes alone (the first other name takes the
    /// place of the item's own), the last takes the item.
    mutating func removeName(_ name: String, in parent: ItemIdentifier, of id: ItemIdentifier, at now: FileTime) throws(ProviderError) {
        guard var node = nodes[id], nodes[parent]?.children[NameKey(name)] == id else {
            throw ProviderError(.noSuchItem, "no '\(name)' of that item in \(path(of: parent))")
        }
        if node.names.isEmpty {
            if node.item.isFolder, !node.children.isEmpty {
                throw ProviderError(.directoryNotEmpty, "cannot remove \(path(of: id)): the folder is not empty")
            }
            remove(id)
            return
        }
        if let index = node.names.firstIndex(where: { $0.parent == parent && NameKey($0.name) == NameKey(name) }) {
            node.names.remove(at: index)
            nodes[parent]?.children[NameKey(name)] = nil
        } else {
            detach(id)
            let next = node.names.removeFirst()
            node.parent = next.parent
            node.item.parentIdentifier = next.parent
            node.item.filename = next.name
            node.trashedFrom = next.trashedFrom
            node.trashedName = next.trashedName
        }
        node.item.noteMetadataChange(at: now)
        nodes[id] = node
        sortedCache[parent] = nil
        recount(parent, folderDelta: 0)
    }
}
