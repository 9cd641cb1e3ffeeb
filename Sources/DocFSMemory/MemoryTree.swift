import struct Foundation.Data
import DocFSProvider

/// One item of the tree and what only the provider needs to know about it.
struct Node: Sendable {
    var item: Item
    /// nil for the root and the trash container (they are nobody's child).
    var parent: ItemIdentifier?
    /// A folder's children by name.
    var children: [NameKey: ItemIdentifier] = [:]
    /// A folder's rule for items created inside it (nil: the provider's default capabilities).
    var contentsPolicy: Capabilities?
    /// A file's current contents.
    var contents: MemoryFile?
    /// Stored `user.*` extended attributes.
    var xattrs: [String: Data] = [:]
    /// Items in the trash: the folder and name they came from.
    var trashedFrom: ItemIdentifier?
    var trashedName: String?
    /// A hard-linked item's names other than `parent`/`item.filename` (MemoryProvider+Links).
    var names: [NamePlace] = []
}

/// One name of an item: the folder and the name in it.
struct NamePlace: Sendable, Hashable {
    var parent: ItemIdentifier
    var name: String
    /// A name at the top of the trash: the folder and name it came from.
    var trashedFrom: ItemIdentifier? = nil
    var trashedName: String? = nil
}

/// The whole tree: nodes by identifier, each folder's children by name. Guarded by the
/// provider's mutex; every method runs under it and never does I/O.
struct MemoryTree: Sendable {
    var nodes: [ItemIdentifier: Node] = [:]
    /// Children in name order, built on demand and dropped when a folder changes.
    var sortedCache: [ItemIdentifier: [(key: NameKey, value: ItemIdentifier)]] = [:]
    var nextNumber: UInt64 = 1

    mutating func newIdentifier() -> ItemIdentifier {
        defer { nextNumber += 1 }
        return ItemIdentifier(String(nextNumber))
    }

    func node(_ identifier: ItemIdentifier) throws(ProviderError) -> Node {
        guard let node = nodes[identifier] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return node
    }

    /// A folder's node, or the error a lookup in a non-folder gives.
    func folder(_ identifier: ItemIdentifier) throws(ProviderError) -> Node {
        guard let node = nodes[identifier] else { throw ProviderError(.noSuchItem, "no folder with identifier '\(identifier)'") }
        guard node.item.isFolder else { throw ProviderError(.notDirectory, "\(path(of: identifier)) is not a folder") }
        return node
    }

    /// The mount path of an item, for messages (`/Projects/a.txt`, `/.Trash/x`).
    func path(of identifier: ItemIdentifier) -> String {
        if identifier == .rootContainer { return "/" }
        var names: [String] = []
        var cursor: ItemIdentifier? = identifier
        var steps = 0
        while let current = cursor, current != .rootContainer, steps < 4096 {
            guard let node = nodes[current] else { names.append("?"); break }
            names.append(node.item.filename)
            cursor = node.parent
            steps += 1
        }
        return "/" + names.reversed().joined(separator: "/")
    }

    func isInTrash(_ identifier: ItemIdentifier) -> Bool {
        var cursor = nodes[identifier]?.parent
        var steps = 0
        while let current = cursor, steps < 4096 {
            if current == .trashContainer { return true }
            cursor = nodes[current]?.parent
            steps += 1
        }
        return false
    }

    /// An item as readers see it: a package reports the bytes of everything inside it; a
    /// hard-linked item counts its names.
    func presented(_ node: Node) -> Item {
        if !node.names.isEmpty {
            var item = node.item
            item.linkCount = 1 + node.names.count
            return item
        }
        guard node.item.kind == .folder, node.item.contentType != .folder,
            node.item.identifier != .rootContainer, node.item.identifier != .trashContainer
        else { return node.item }
        var item = node.item
        var total: Int64 = 0
        var stack = [node.item.identifier]
        var visited = 0
        while let next = stack.popLast(), visited < 1_000_000 {
            visited += 1
            for child in (nodes[next]?.children ?? [:]).values {
                guard let childNode = nodes[child] else { continue }
                if childNode.item.isFolder { stack.append(child) } else { total += childNode.item.documentSize }
            }
        }
        item.documentSize = total
        return item
    }

    /// Children in name order: Swift's String order, ties between canonically equivalent names
    /// broken by bytes (as the store orders them).
    mutating func sortedChildren(of folder: ItemIdentifier) -> [(key: NameKey, value: ItemIdentifier)] {
        if let cached = sortedCache[folder] { return cached }
        let order = (nodes[folder]?.children ?? [:]).sorted { lhs, rhs in
            if lhs.key.name < rhs.key.name { return true }
            if rhs.key.name < lhs.key.name { return false }
            return lhs.key.name.utf8.lexicographicallyPrecedes(rhs.key.name.utf8)
        }
        sortedCache[folder] = order
        return order
    }

    /// A name not yet used in `folder`: `name`, then `name 2`, `name 3`, … before the extension.
    func uniqueName(_ name: String, in folder: ItemIdentifier, isFolder: Bool) -> String {
        let kids = nodes[folder]?.children ?? [:]
        return ItemNames.unique(name, isFolder: isFolder) { kids[NameKey($0)] != nil }
    }

    // MARK: Structure changes (counts follow)

    /// Puts a new node into the tree under its parent.
    mutating func attach(_ node: Node) {
        let id = node.item.identifier
        nodes[id] = node
        guard let parent = node.parent else { return }
        nodes[parent]?.children[NameKey(node.item.filename)] = id
        sortedCache[parent] = nil
        recount(parent, folderDelta: node.item.isFolder ? 1 : 0)
    }

    /// Takes a node out of its parent's children (the node itself stays).
    mutating func detach(_ id: ItemIdentifier) {
        guard let node = nodes[id], let parent = node.parent else { return }
        nodes[parent]?.children[NameKey(node.item.filename)] = nil
        sortedCache[parent] = nil
        recount(parent, folderDelta: node.item.isFolder ? -1 : 0)
    }

    /// Removes a node for good (its contents go once no reader holds them), under all its names.
    mutating func remove(_ id: ItemIdentifier) {
        for place in nodes[id]?.names ?? [] {
            nodes[place.parent]?.children[NameKey(place.name)] = nil
            sortedCache[place.parent] = nil
            recount(place.parent, folderDelta: 0)
        }
        detach(id)
        nodes[id] = nil
        sortedCache[id] = nil
    }

    mutating func recount(_ folder: ItemIdentifier, folderDelta: Int) {
        guard var node = nodes[folder] else { return }
        node.item.childItemCount = node.children.count
        node.item.childFolderCount += folderDelta
        nodes[folder] = node
    }

    /// A parent after a child was added, removed or renamed: its mtime and ctime move.
    mutating func touch(_ folder: ItemIdentifier, at now: FileTime) {
        nodes[folder]?.item.modificationTime = now
        nodes[folder]?.item.noteMetadataChange(at: now)
    }
}
