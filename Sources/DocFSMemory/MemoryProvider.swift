import Foundation
import Synchronization
import DocFSProvider
#if canImport(Glibc)
    import Glibc
#endif

/// A complete `Provider` (with the trash, Apple's metadata, stored extended attributes, special
/// items and hard links opted into) that keeps its whole tree in memory: `docfs mount memory: MNT`.
///
/// Items, names per folder, owners, modes, nanosecond times, tags, favourite ranks, stored
/// `user.*` attributes, symbolic links, FIFOs and sockets live in one `MemoryTree` behind one
/// mutex. File contents live outside the Swift heap, one anonymous memory file (`memfd_create`)
/// per content version (`MemoryFile`); `openContents` hands out a fresh read-only descriptor on
/// it. Nothing persists: when the provider goes, so does the tree.
///
/// Staged files: `stagingDirectory` is a private folder the provider makes under the temporary
/// directory (`$TMPDIR`, else /tmp) and removes in `close()` (or deinit). An import or a new
/// content version copies the staged file into a new memory file with `sendfile` (the kernel
/// copies; the bytes never pass through this process) and the staged file is then removed — an
/// import's by its security scope, a new version's by the provider. Copying rather than keeping
/// the staged file's descriptor keeps every version in memory whatever filesystem the temporary
/// directory is on, lets each version be sealed against change, and is not bound by the size of
/// a tmpfs such as /dev/shm (64 MiB in a default container).
///
/// Capabilities: `capabilities` are those of every item made in a folder without a rule (the
/// default allows everything); `folders` makes folders at init with capabilities of their own
/// and for what is made inside them, as a layout file does for the store. There are no content
/// type rules: `admitItem` takes everything, types come from names (`ContentTypeRegistry`).
///
/// Errors, versions, change times and parent mtimes follow the embedded store (`LocalStore`):
/// the same `ProviderError` codes for the same failures.
///
/// Concurrency: all state is in `Mutex<MemoryTree>` (held for map updates only, never across
/// I/O; copies into memory files are made before it is taken), plus immutable `let`s, so the
/// class is `Sendable` as checked by the compiler, without `@unchecked`.
public final class MemoryProvider: Provider, TrashProvider, AppleMetadataProvider, ExtendedAttributeProvider, SpecialItemProvider {
    /// A folder made at init with capabilities of its own (like a folder of a layout file).
    public struct FolderRule: Sendable, Hashable {
        /// Relative to the root, `/`-separated (`Inbox`, `Projects/2024`); missing parents are made.
        public var path: String
        /// What the folder itself allows.
        public var capabilities: Capabilities
        /// What items made inside it (files and subfolders, which pass it on) allow; nil: the
        /// provider's default.
        public var contents: Capabilities?

        public init(path: String, capabilities: Capabilities, contents: Capabilities? = nil) {
            self.path = path
            self.capabilities = capabilities
            self.contents = contents
        }
    }

    public static let trashName = ".Trash"

    public let stagingDirectory: URL
    /// Capabilities of items made where no folder rule applies.
    public let defaultCapabilities: Capabilities
    let stagingPath: String
    let registry: ContentTypeRegistry
    let state: Mutex<MemoryTree>
    /// The mount's handlers for changes made on the provider's own (`renameOnItsOwn`).
    let observers = Mutex<[@Sendable ([ProviderChange]) -> Void]>([])
    private let closed = Atomic<Bool>(false)

    /// A new, empty tree (a root and a trash container). `stagingParent`: where the private
    /// staging folder is made (default: the temporary directory).
    public init(
        capabilities: Capabilities = .all, folders: [FolderRule] = [], stagingParent: URL? = nil,
        registry: ContentTypeRegistry = .standard
    ) throws(ProviderError) {
        var tree = MemoryTree()
        let now = FileTime.now()
        let rootCapabilities = Capabilities.all.subtracting([.allowsRenaming, .allowsReparenting, .allowsDeleting, .allowsTrashing])
        for (id, name) in [(ItemIdentifier.rootContainer, "/"), (ItemIdentifier.trashContainer, Self.trashName)] {
            var item = Item(
                identifier: id, parentIdentifier: .rootContainer, filename: name, kind: .folder,
                contentType: .folder, childItemCount: 0, creationDate: now.date, contentModificationDate: now.date,
                capabilities: id == .rootContainer ? rootCapabilities.intersection(capabilities) : rootCapabilities)
            item.creationTime = now
            item.modificationTime = now
            item.changeTime = now
            tree.nodes[id] = Node(item: item, parent: nil)
        }
        // Shallow paths first, so a rule's parent exists before its children.
        let rules = folders.map { rule in (rule, rule.path.split(separator: "/").map(String.init)) }
            .sorted { $0.1.count < $1.1.count }
        for (rule, components) in rules {
            var parentID = ItemIdentifier.rootContainer
            for (index, component) in components.enumerated() {
                try ItemNames.validate(component)
                let isRuleFolder = index == components.count - 1
                if let existing = tree.nodes[parentID]?.children[NameKey(component)] {
                    guard tree.nodes[existing]?.item.isFolder == true else {
                        throw ProviderError(.notDirectory, "folder rule \(rule.path): \(tree.path(of: existing)) is not a folder")
                    }
                    if isRuleFolder {
                        tree.nodes[existing]?.item.capabilities = rule.capabilities
                        tree.nodes[existing]?.contentsPolicy = rule.contents
                    }
                    parentID = existing
                    continue
                }
                let parentNode = tree.nodes[parentID]!
                var node = Self.makeNode(
                    tree.newIdentifier(), in: parentNode, name: component, kind: .folder, now: now,
                    attributes: nil, defaultCapabilities: capabilities, registry: registry)
                if isRuleFolder {
                    node.item.capabilities = rule.capabilities
                    node.contentsPolicy = rule.contents
                }
                tree.attach(node)
                parentID = node.item.identifier
            }
        }
        // The staging folder last: nothing above may leave it behind.
        let parent = (stagingParent ?? FileManager.default.temporaryDirectory).path
        var template = Array((parent.hasSuffix("/") ? parent : parent + "/").utf8CString.dropLast()) + Array("docfs-memory-XXXXXX".utf8CString)
        let made: String? = template.withUnsafeMutableBufferPointer { buffer in
            mkdtemp(buffer.baseAddress!).map { String(cString: $0) }
        }
        guard let path = made else { throw ProviderError.posix(errno, "create the staging folder in \(parent)") }
        self.stagingPath = path
        self.stagingDirectory = URL(fileURLWithPath: path, isDirectory: true)
        self.defaultCapabilities = capabilities
        self.registry = registry
        self.state = Mutex(tree)
    }

    deinit { close() }

    /// Removes the staging folder (and whatever the bridge left in it). The tree stays readable;
    /// imports fail afterwards. Called by deinit too.
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        try? FileManager.default.removeItem(atPath: stagingPath)
    }

    // MARK: - Helpers

    /// Runs `body` on the tree under the lock.
    func withTree<T: Sendable>(_ body: (inout MemoryTree) throws(ProviderError) -> T) throws(ProviderError) -> T {
        let result: Result<T, ProviderError> = state.withLock { tree in
            do throws(ProviderError) { return .success(try body(&tree)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    static func contentType(named name: String, kind: ItemKind, registry: ContentTypeRegistry) -> ContentType {
        switch kind {
        case .file: return registry.type(forFilename: name) ?? .data
        case .folder:
            if let type = registry.type(forFilename: name), registry.isPackage(type) { return type }
            return .folder
        case .symlink: return .symbolicLink
        case .fifo, .socket, .characterDevice, .blockDevice: return .item
        }
    }

    /// A new node for an item made inside `parent`, with the parent's rule for its contents.
    /// Owner, group and mode come from `attributes` (the caller's, set by the bridge); without
    /// them the item belongs to whoever runs the provider. Times: `modified` (and `accessed`) as
    /// given, birth and change time now.
    static func makeNode(
        _ id: ItemIdentifier, in parent: Node, name: String, kind: ItemKind, size: Int64 = 0,
        now: FileTime, modified: FileTime? = nil, accessed: FileTime? = nil,
        attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil,
        defaultCapabilities: Capabilities, registry: ContentTypeRegistry
    ) -> Node {
        let policy = parent.contentsPolicy ?? defaultCapabilities
        let type = contentType(named: name, kind: kind, registry: registry)
        var item = Item(
            identifier: id, parentIdentifier: parent.item.identifier, filename: name, kind: kind, contentType: type,
            documentSize: size, childItemCount: kind == .folder ? 0 : nil, creationDate: now.date, contentModificationDate: now.date,
            capabilities: registry.isViewOnly(type) ? policy.subtracting(.allowsWriting) : policy, symlinkTargetPath: target,
            posixPermissions: mode ?? attributes?.posixPermissions, ownerID: attributes?.ownerID, groupID: attributes?.groupID)
        item.creationTime = now
        item.changeTime = now
        item.modificationTime = modified ?? attributes?.modificationTime ?? now
        // An item made through the mount was last used when it was made, as on ext4.
        item.accessTime = accessed ?? attributes?.accessTime ?? (attributes == nil ? nil : now)
        if kind == .symlink { item.posixPermissions = 0o777 }
        var node = Node(item: item, parent: parent.item.identifier)
        if kind == .folder { node.contentsPolicy = parent.contentsPolicy }
        return node
    }

    func makeNode(
        _ id: ItemIdentifier, in parent: Node, name: String, kind: ItemKind, size: Int64 = 0,
        now: FileTime, modified: FileTime? = nil, accessed: FileTime? = nil,
        attributes: NewItemAttributes?, mode: UInt16? = nil, target: String? = nil
    ) -> Node {
        Self.makeNode(
            id, in: parent, name: name, kind: kind, size: size, now: now, modified: modified, accessed: accessed,
            attributes: attributes, mode: mode, target: target, defaultCapabilities: defaultCapabilities,
            registry: registry)
    }

    /// A folder that can take a new child named `name`, or the rule that refuses.
    static func checkedParent(_ tree: MemoryTree, _ parent: ItemIdentifier, name: String) throws(ProviderError) -> Node {
        let folder = try tree.folder(parent)
        if folder.children[NameKey(name)] != nil {
            throw ProviderError(.filenameCollision, "'\(name)' already exists in \(tree.path(of: parent))")
        }
        return folder
    }

    /// An item renamed to `name`: its type follows the new name when the name tells one, and a
    /// view-only type takes writing away (leaving one gives it back when `policy` allows it).
    func retyped(_ item: Item, name: String, policy: Capabilities?) -> Item {
        var item = item
        let old = item.contentType
        switch item.kind {
        case .file:
            if let type = registry.type(forFilename: name) { item.contentType = type }
        case .folder:
            item.contentType = Self.contentType(named: name, kind: .folder, registry: registry)
        case .symlink, .fifo, .socket, .characterDevice, .blockDevice:
            return item
        }
        if registry.isViewOnly(item.contentType) {
            item.capabilities.remove(.allowsWriting)
        } else if registry.isViewOnly(old), (policy ?? defaultCapabilities).contains(.allowsWriting) {
            item.capabilities.insert(.allowsWriting)
        }
        return item
    }

    // MARK: - Reading the tree

    public func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        try withTree { (tree) throws(ProviderError) -> Item in tree.presented(try tree.node(identifier)) }
    }

    public func childItem(named name: String, in parent: ItemIdentifier) throws(ProviderError) -> Item {
        try withTree { (tree) throws(ProviderError) -> Item in
            let folder = try tree.folder(parent)
            // A miss is the common answer (every create looks first): no message to build.
            guard let id = folder.children[NameKey(name)], let child = tree.nodes[id] else { throw ProviderError(.noSuchItem) }
            return tree.viewed(child, name: name, in: parent)
        }
    }

    public func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        try withTree { (tree) throws(ProviderError) -> [Item] in
            _ = try tree.folder(container)
            return tree.sortedChildren(of: container).compactMap { entry in
                tree.nodes[entry.value].map { tree.viewed($0, name: entry.key.name, in: container) }
            }
        }
    }

    public func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        // Taken under the lock, opened outside it: the reference keeps the memory file alive.
        let contents = try withTree { (tree) throws(ProviderError) -> MemoryFile in
            let node = try tree.node(identifier)
            switch node.item.kind {
            case .folder: throw ProviderError(.isDirectory, "\(tree.path(of: identifier)) is a folder")
            case .symlink: throw ProviderError(.invalidArgument, "\(tree.path(of: identifier)) is a symbolic link")
            case .fifo, .socket, .characterDevice, .blockDevice:
                throw ProviderError(.invalidArgument, "\(tree.path(of: identifier)) has no stored contents (a FIFO or socket)")
            case .file: break
            }
            guard let contents = node.contents else { throw ProviderError(.ioError, "\(tree.path(of: identifier)) has no contents") }
            return contents
        }
        return try contents.openReadOnly()
    }

    /// Memory figures for `df`: the machine's memory, as tmpfs reports it.
    public func storageStatistics() -> StorageStatistics {
        let page = UInt64(max(sysconf(Int32(_SC_PAGESIZE)), 4096))
        let total = UInt64(max(sysconf(Int32(_SC_PHYS_PAGES)), 0)) * page / 4096
        let free = UInt64(max(sysconf(Int32(_SC_AVPHYS_PAGES)), 0)) * page / 4096
        let count = UInt64(state.withLock { $0.nodes.count })
        let files: UInt64 = 1 << 31
        return StorageStatistics(
            blockSize: 4096, totalBlocks: total, freeBlocks: free, availableBlocks: free,
            totalFiles: files, freeFiles: files > count ? files - count : 0)
    }

    /// Number of items, root and trash included.
    public var itemCount: Int { state.withLock { $0.nodes.count } }

    // MARK: - Importing

    /// A staged item read into memory, ready to be put into the tree.
    private indirect enum Staged: Sendable {
        case file(MemoryFile, mode: UInt16, modified: FileTime, accessed: FileTime)
        case symlink(String, modified: FileTime)
        case folder([(name: String, staged: Staged)], mode: UInt16, modified: FileTime)
    }

    /// Reads the staged file, symbolic link or folder (with everything in it) at `path` into
    /// memory. No lock is held.
    private func stage(_ path: String, name: String) throws(ProviderError) -> Staged {
        try ItemNames.validate(name)
        var st = stat()
        guard lstat(path, &st) == 0 else { throw .posix(errno, "lstat \(path)") }
        let mode = UInt16(st.st_mode & 0o7777)
        let modified = FileTime(seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int32(st.st_mtim.tv_nsec))
        let accessed = FileTime(seconds: Int64(st.st_atim.tv_sec), nanoseconds: Int32(st.st_atim.tv_nsec))
        switch st.st_mode & S_IFMT {
        case S_IFREG:
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0 { throw .posix(errno, "open the staged file \(path)") }
            defer { Glibc.close(fd) }
            return .file(try MemoryFile.copying(from: fd, name: name), mode: mode, modified: modified, accessed: accessed)
        case S_IFLNK:
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(path, &buffer, buffer.count - 1)
            if n < 0 { throw .posix(errno, "readlink \(path)") }
            let target = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return .symlink(target, modified: modified)
        case S_IFDIR:
            let names: [String]
            do { names = try FileManager.default.contentsOfDirectory(atPath: path).sorted() } catch {
                throw ProviderError(.ioError, "list the staged folder \(path): \(error)")
            }
            var children: [(name: String, staged: Staged)] = []
            for child in names { children.append((child, try stage(path + "/" + child, name: child))) }
            return .folder(children, mode: mode, modified: modified)
        default:
            throw ProviderError(
                .unsupported,
                "cannot import '\(name)': only files, folders, symbolic links, FIFOs and sockets can be stored, and only FIFOs and sockets made in the mount"
            )
        }
    }

    /// Puts a staged item into the tree under `parent` (under the lock). Without `attributes`
    /// (the plain API) items keep the staged files' modes and times; with them (a copy through
    /// the mount) the top item takes the caller's owner, group and mode and the times the program
    /// set, and what is inside a folder belongs to the same owner. As the store does.
    private func insert(
        _ staged: Staged, name: String, into parent: Node, tree: inout MemoryTree, now: FileTime,
        attributes: NewItemAttributes?, top: Bool
    ) -> ItemIdentifier {
        let given = top ? attributes : nil
        let id = tree.newIdentifier()
        switch staged {
        case .file(let contents, let mode, let modified, let accessed):
            var owned = attributes
            owned?.posixPermissions = mode
            var node = makeNode(
                id, in: parent, name: name, kind: .file, size: contents.size, now: now,
                modified: given?.modificationTime ?? modified,
                accessed: given?.accessTime ?? (attributes == nil ? nil : accessed),
                attributes: given ?? owned, mode: given == nil ? mode : nil)
            node.contents = contents
            tree.attach(node)
        case .symlink(let target, let modified):
            let node = makeNode(
                id, in: parent, name: name, kind: .symlink, size: Int64(target.utf8.count), now: now,
                modified: given?.modificationTime ?? modified, attributes: given ?? attributes, target: target)
            tree.attach(node)
        case .folder(let children, let mode, let modified):
            var owned = attributes
            owned?.posixPermissions = mode
            let node = makeNode(
                id, in: parent, name: name, kind: .folder, now: now, modified: given?.modificationTime ?? modified,
                attributes: given ?? owned, mode: given == nil ? mode : nil)
            tree.attach(node)
            for child in children {
                _ = insert(
                    child.staged, name: child.name, into: tree.nodes[id]!, tree: &tree, now: now,
                    attributes: attributes, top: false)
            }
        }
        return id
    }

    private func importStaged(
        path: String, name: String, parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        // Fail early (before copying any bytes) when the folder cannot take it.
        try withTree { (tree) throws(ProviderError) in _ = try Self.checkedParent(tree, parent, name: name) }
        let staged = try stage(path, name: name)
        return try withTree { (tree) throws(ProviderError) -> Item in
            let parentNode = try Self.checkedParent(tree, parent, name: name)
            let now = FileTime.now()
            let id = insert(staged, name: name, into: parentNode, tree: &tree, now: now, attributes: attributes, top: true)
            tree.touch(parent, at: now)
            return tree.presented(tree.nodes[id]!)
        }
    }

    /// Imports a staged file, link or folder tree (see `Provider`): read inside its access window
    /// and copied into memory files; the scope removes the staged file afterwards. Without
    /// `attributes` the items keep the staged files' mode and times.
    public func importDocument(
        from file: SecurityScopedURL, toParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try file.withSealedPath { (path) throws(ProviderError) -> Item in
            try importStaged(path: path, name: file.name, parent: parent, attributes: attributes)
        }
    }

    // MARK: - Creating

    private func create(
        name: String, parent: ItemIdentifier, kind: ItemKind, target: String?,
        attributes: NewItemAttributes?
    ) throws(ProviderError) -> Item {
        try ItemNames.validate(name)
        return try withTree { (tree) throws(ProviderError) -> Item in
            let parentNode = try Self.checkedParent(tree, parent, name: name)
            let now = FileTime.now()
            var node = makeNode(
                tree.newIdentifier(), in: parentNode, name: name, kind: kind,
                size: Int64(target?.utf8.count ?? 0), now: now, attributes: attributes, target: target)
            if kind.isDevice { node.item.deviceNumber = attributes?.deviceNumber ?? 0 }
            tree.attach(node)
            tree.touch(parent, at: now)
            return tree.presented(tree.nodes[node.item.identifier]!)
        }
    }

    /// A new folder (see `Provider`); it takes its parent's capabilities for contents.
    public func createDirectory(
        withName name: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try create(name: name, parent: parent, kind: .folder, target: nil, attributes: attributes)
    }

    /// A new symbolic link, its target stored as given (see `Provider`).
    public func createSymbolicLink(
        withName name: String, target: String, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        try ItemNames.validateSymbolicLinkTarget(target)
        return try create(name: name, parent: parent, kind: .symlink, target: target, attributes: attributes)
    }

    /// FIFOs and sockets: items with no contents, never typed as documents.
    public func createSpecialItem(
        withName name: String, kind: ItemKind, inParentItemIdentifier parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        guard kind.isSpecial else { throw ProviderError(.invalidArgument, "only FIFOs, sockets and device nodes are special items") }
        return try create(name: name, parent: parent, kind: kind, target: nil, attributes: attributes)
    }

    // MARK: - Metadata

    /// Changes metadata of one item: a new metadata version, and the change time moves.
    func update(_ identifier: ItemIdentifier, _ change: (inout Item) throws(ProviderError) -> Void) throws(ProviderError) -> Item {
        try withTree { (tree) throws(ProviderError) -> Item in
            var node = try tree.node(identifier)
            try change(&node.item)
            node.item.noteMetadataChange(at: FileTime.now())
            tree.nodes[identifier] = node
            return tree.presented(node)
        }
    }

    /// Stores (or clears) the item's tag data: a new metadata version.
    public func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try update(identifier) { $0.tagData = tagData }
    }

    /// Stores (or clears) the item's favourite rank: a new metadata version.
    public func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try update(identifier) { $0.favoriteRank = rank }
    }

    /// chmod, chown, chgrp, utimensat as the bridge passes them (its rules applied); the change
    /// time moves. The mode of a symbolic link cannot change (`.unsupported`).
    public func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        try update(identifier) { (item) throws(ProviderError) in
            if changes.posixPermissions != nil, item.kind == .symlink {
                throw ProviderError(.unsupported, "the mode of a symbolic link cannot change")
            }
            changes.apply(to: &item)
        }
    }

    // MARK: - Contents

    /// A new content version from the staged regular file at `fileURL`: its bytes are copied into
    /// a new memory file and the staged file is removed (moved, as the protocol says). Readers of
    /// the previous version keep it until they close. No other writer changes the tree behind the
    /// mount's back, so the base version is not checked.
    public func modifyContents(
        ofItemWithIdentifier identifier: ItemIdentifier, baseVersion: ItemVersion?,
        from fileURL: URL
    ) async throws(ProviderError) -> Item {
        try withTree { (tree) throws(ProviderError) in
            let node = try tree.node(identifier)
            switch node.item.kind {
            case .folder: throw ProviderError(.isDirectory, "\(tree.path(of: identifier)) is a folder")
            case .symlink, .fifo, .socket, .characterDevice, .blockDevice:
                throw ProviderError(.invalidArgument, "\(tree.path(of: identifier)) is not a regular file")
            case .file: break
            }
        }
        let path = fileURL.path
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 { throw .posix(errno, "open the staged file \(path)") }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .posix(errno, "fstat the staged file \(path)") }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw ProviderError(.invalidArgument, "new contents for \(fileURL.lastPathComponent) must be a regular file")
        }
        let contents = try MemoryFile.copying(from: fd, name: fileURL.lastPathComponent)
        // The staged file's time: the last write, or what the program set (futimens) after it.
        let modified = FileTime(seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int32(st.st_mtim.tv_nsec))
        let item = try withTree { (tree) throws(ProviderError) -> Item in
            var node = try tree.node(identifier)
            guard node.item.kind == .file else { throw ProviderError(.invalidArgument, "\(tree.path(of: identifier)) is not a regular file") }
            node.contents = contents
            node.item.documentSize = contents.size
            node.item.modificationTime = modified
            node.item.itemVersion.contentVersion += 1
            node.item.noteMetadataChange(at: FileTime.now())
            tree.nodes[identifier] = node
            return tree.presented(node)
        }
        _ = unlink(path)
        return item
    }

    /// Nothing to make durable: nothing persists.
    public func synchronize() async throws(ProviderError) {}

    // MARK: - Extended attributes

    public func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] {
        try withTree { (tree) throws(ProviderError) -> [String] in try tree.node(identifier).xattrs.keys.sorted() }
    }

    public func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        try withTree { (tree) throws(ProviderError) -> Data in
            guard let value = try tree.node(identifier).xattrs[name] else { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
            return value
        }
    }

    public func setExtendedAttribute(
        named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
        forItemIdentifier identifier: ItemIdentifier
    ) async throws(ProviderError) {
        try ExtendedAttributes.checkStorable(name, value)
        try withTree { (tree) throws(ProviderError) in
            var node = try tree.node(identifier)
            node.xattrs = try ExtendedAttributes.updating(node.xattrs, name, to: value, mode: mode)
            node.item.noteMetadataChange(at: FileTime.now())
            tree.nodes[identifier] = node
        }
    }
}
