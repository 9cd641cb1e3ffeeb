import Foundation
import Glibc
import DocFS

// The checks, in the order they run. Each names what the mount relies on; ProviderConformance
// says which run for which provider.
extension ConformanceRun {
    func all() {
        check("child counts, parents and identities agree", treeAgrees)
        check("the mount lists and stats the tree as the provider has it", mountShowsTree)
        check("statfs gives the provider's storage statistics", statisticsAgree)
        let writable = try? writableFolder()
        guard let folder = writable ?? nil else {
            check("contents read through the mount are the provider's", contentsAgree)
            for name in [
                "a new file is the provider's", "identifiers stay across renames and moves",
                "a refusal leaves nothing half-done", "a change the provider signals shows through the kernel's caches",
                "a refused modification keeps the old version", "the trash round trip keeps the item",
                "extended attributes round trip", "hard links share one item",
                "chmod, chown and utimens reach the provider", "truncate changes the provider's contents",
                "unlink and rmdir remove the provider's items", "special items are the provider's",
                "tags and favourite rank round trip",
            ] {
                check(name) { throw CheckStop.skipped("no folder allows adding: a read-only tree") }
            }
            return
        }
        check("a new file is the provider's") { try newFile(in: folder) }
        check("contents read through the mount are the provider's", contentsAgree)
        check("identifiers stay across renames and moves") { try identitiesStay(in: folder) }
        check("a refusal leaves nothing half-done") { try refusalsLeaveNothing(in: folder) }
        check("a change the provider signals shows through the kernel's caches") { try signalsShow(in: folder) }
        check("a refused modification keeps the old version", refusedModificationKeepsOld)
        check("the trash round trip keeps the item") { try trashRoundTrip(in: folder) }
        check("extended attributes round trip") { try extendedAttributes(in: folder) }
        check("hard links share one item") { try hardLinks(in: folder) }
        check("chmod, chown and utimens reach the provider") { try attributeChanges(in: folder) }
        check("truncate changes the provider's contents") { try truncation(in: folder) }
        check("unlink and rmdir remove the provider's items") { try removal(in: folder) }
        check("special items are the provider's") { try specialItems(in: folder) }
        check("tags and favourite rank round trip") { try appleMetadata(in: folder) }
        removeWhatThisRunMade(in: folder)
    }

    // MARK: Reading (every provider)

    func treeAgrees() throws {
        let items = try walk()
        for (path, folder) in items where folder.isFolder && folder.capabilities.contains(.allowsContentEnumerating) {
            let children = try provider.enumerateItems(in: folder.identifier)
            if let count = folder.childItemCount {
                try expect(count == children.count, "\(path.isEmpty ? "/" : path): childItemCount \(count), \(children.count) enumerated")
            }
            var seen = Set<String>()
            for child in children {
                let where_ = path + "/" + child.filename
                try expect(seen.insert(child.filename).inserted, "\(where_): enumerated twice")
                try expect(
                    !child.filename.isEmpty && child.filename != "." && child.filename != ".."
                        && !child.filename.contains("/") && child.filename.utf8.count <= 255, "\(where_): not a valid name")
                try expect(
                    child.parentIdentifier == folder.identifier, "\(where_): parent \(child.parentIdentifier), enumerated in \(folder.identifier)")
                let again = try provider.item(for: child.identifier)
                try expect(
                    again.filename == child.filename && again.kind == child.kind && again.parentIdentifier == child.parentIdentifier
                        && (child.isFolder || again.documentSize == child.documentSize),
                    "\(where_): item(for:) answers otherwise than the enumeration (\(again.filename), \(again.kind), \(again.documentSize) bytes)")
                let named = try provider.childItem(named: child.filename, in: folder.identifier)
                try expect(named.identifier == child.identifier, "\(where_): childItem(named:) gives \(named.identifier), not \(child.identifier)")
            }
        }
    }

    func mountShowsTree() throws {
        for (path, folder) in try walk() where folder.isFolder && folder.capabilities.contains(.allowsContentEnumerating) {
            let expected = try names(in: folder.identifier)
            // The bridge adds the trash as /.Trash when the mount serves it.
            let listed = try listing(path).filter { !(path.isEmpty && $0 == ".Trash" && !expected.contains($0)) }
            try expect(listed == expected, "\(path.isEmpty ? "/" : path): readdir gives \(listed), the provider \(expected)")
            for child in try provider.enumerateItems(in: folder.identifier) {
                let where_ = path + "/" + child.filename
                guard let st = lstatus(where_) else { throw CheckStop.failed("lstat \(where_): \(String(cString: strerror(errno)))") }
                let type = st.st_mode & S_IFMT
                switch child.kind {
                case .folder: try expect(type == S_IFDIR, "\(where_): a folder, stat mode \(String(st.st_mode, radix: 8))")
                case .file:
                    try expect(type == S_IFREG, "\(where_): a file, stat mode \(String(st.st_mode, radix: 8))")
                    try expect(Int64(st.st_size) == child.documentSize, "\(where_): stat size \(st.st_size), documentSize \(child.documentSize)")
                case .symlink: try expect(type == S_IFLNK, "\(where_): a symbolic link, stat mode \(String(st.st_mode, radix: 8))")
                default: break
                }
            }
        }
    }

    func contentsAgree() throws {
        let files = try walk().filter { $0.item.kind == .file && $0.item.capabilities.contains(.allowsReading) }.prefix(options.filesToRead)
        guard !files.isEmpty else { throw CheckStop.skipped("no readable file in the tree") }
        for (path, item) in files {
            let fd = try provider.openContents(of: item.identifier)
            defer { close(fd) }
            let stored = try Self.readAll(fd: fd, what: "the provider's contents of \(path)")
            let read = try readAll(path)
            try expect(read == stored, "\(path): \(read.count) bytes through the mount differ from the provider's \(stored.count)")
        }
    }

    // MARK: Writing (a folder that allows adding)

    func newFile(in folder: (path: String, item: Item)) throws {
        let bytes = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let name = tag + "-new.txt"
        let result = writeFile(folder.path + "/" + name, bytes, flags: O_CREAT | O_EXCL)
        try expect(result == 0, "create and write \(name): \(Self.errnoName(result))")
        let item = try provider.childItem(named: name, in: folder.item.identifier)
        try expect(
            item.kind == .file && item.documentSize == Int64(bytes.count), "\(name): the provider has \(item.kind), \(item.documentSize) bytes")
        let fd = try provider.openContents(of: item.identifier)
        defer { close(fd) }
        try expect(try Self.readAll(fd: fd, what: name) == bytes, "\(name): the provider's contents are not what was written")
        try expect(try readAll(folder.path + "/" + name) == bytes, "\(name): read back through the mount, not what was written")
        let count = try provider.item(for: folder.item.identifier).childItemCount
        let enumerated = try provider.enumerateItems(in: folder.item.identifier).count
        try expect(count == nil || count == enumerated, "the folder counts \(count ?? -1) children after the create, enumerates \(enumerated)")
    }

    func identitiesStay(in folder: (path: String, item: Item)) throws {
        let base = folder.path + "/" + tag
        try expect(mkdir(m(base), 0o755) == 0, "mkdir \(base): \(Self.errnoName(errno))")
        try expect(mkdir(m(base + "/sub"), 0o755) == 0, "mkdir \(base)/sub: \(Self.errnoName(errno))")
        try expect(writeFile(base + "/a.txt", Array("identity".utf8)) == 0, "write \(base)/a.txt")
        guard let dirID = childIdentifier(tag, in: folder.item.identifier), let subID = childIdentifier("sub", in: dirID),
            let fileID = childIdentifier("a.txt", in: dirID)
        else { throw CheckStop.failed("the provider lacks what mkdir and write made") }
        try expect(rename(m(base + "/a.txt"), m(base + "/b.txt")) == 0, "rename a.txt b.txt: \(Self.errnoName(errno))")
        try expect(childIdentifier("b.txt", in: dirID) == fileID, "a rename in one folder changed the file's identifier")
        try expect(childIdentifier("a.txt", in: dirID) == nil && lstatus(base + "/a.txt") == nil, "the old name stays after the rename")
        try expect(rename(m(base + "/b.txt"), m(base + "/sub/c.txt")) == 0, "move b.txt sub/c.txt: \(Self.errnoName(errno))")
        try expect(childIdentifier("c.txt", in: subID) == fileID, "a move to another folder changed the file's identifier")
        try expect(try provider.item(for: fileID).parentIdentifier == subID, "the moved file's parent is not its new folder")
        try expect(rename(m(base + "/sub"), m(base + "/moved")) == 0, "rename sub moved: \(Self.errnoName(errno))")
        try expect(childIdentifier("moved", in: dirID) == subID, "a folder's rename changed its identifier")
        try expect(try readAll(base + "/moved/c.txt") == Array("identity".utf8), "the file below a renamed folder reads otherwise")
        for (id, path) in [(dirID, base), (subID, base + "/moved")] {
            let count = try provider.item(for: id).childItemCount
            let enumerated = try provider.enumerateItems(in: id).count
            try expect(count == nil || count == enumerated, "\(path): childItemCount \(count ?? -1), \(enumerated) enumerated")
        }
    }

    func refusalsLeaveNothing(in folder: (path: String, item: Item)) throws {
        let base = folder.path + "/" + tag
        if lstatus(base) == nil { try expect(mkdir(m(base), 0o755) == 0, "mkdir \(base): \(Self.errnoName(errno))") }
        guard let dirID = childIdentifier(tag, in: folder.item.identifier) else { throw CheckStop.failed("no \(base) at the provider") }
        try expect(mkdir(m(base + "/full"), 0o755) == 0 && writeFile(base + "/full/kept.txt", Array("kept".utf8)) == 0, "make \(base)/full/kept.txt")
        let before = try names(in: dirID)

        let long = String(repeating: "n", count: 256)
        try expect(writeFile(base + "/" + long, [1]) == ENAMETOOLONG, "a 256-byte name: not ENAMETOOLONG")
        try expect(rmdir(m(base + "/full")) == -1 && errno == ENOTEMPTY, "rmdir of a folder with a child: not ENOTEMPTY")
        try expect(rename(m(base + "/full"), m(base + "/full/below")) == -1 && errno == EINVAL, "a folder moved below itself: not EINVAL")
        try expect(mkdir(m(base + "/full"), 0o755) == -1 && errno == EEXIST, "mkdir of a name taken: not EEXIST")
        let after = try names(in: dirID)
        try expect(after == before, "the refusals changed the folder: \(after), before \(before)")
        try expect(try readAll(base + "/full/kept.txt") == Array("kept".utf8), "the refusals changed a file")

        // A folder that does not allow adding, if the tree has one: nothing appears in it.
        guard
            let closed = try walk().first(where: {
                $0.item.isFolder && $0.item.capabilities.contains(.allowsContentEnumerating)
                    && !$0.item.capabilities.contains(.allowsAddingSubItems) && $0.item.identifier != .trashContainer
            })
        else { return }
        let inside = try names(in: closed.item.identifier)
        let refused = writeFile(closed.path + "/" + tag + ".txt", [1], flags: O_CREAT | O_EXCL)
        try expect([EACCES, EPERM, EROFS].contains(refused), "\(closed.path): a create where adding is not allowed gave \(Self.errnoName(refused))")
        try expect(try names(in: closed.item.identifier) == inside, "\(closed.path): the refused create left something")
    }

    func signalsShow(in folder: (path: String, item: Item)) throws {
        guard let onItsOwn = options.onItsOwn else {
            throw CheckStop.skipped("the provider changes only through the mount (Options.onItsOwn)")
        }
        let base = folder.path + "/" + tag
        if lstatus(base) == nil { try expect(mkdir(m(base), 0o755) == 0, "mkdir \(base): \(Self.errnoName(errno))") }
        guard let dirID = childIdentifier(tag, in: folder.item.identifier) else { throw CheckStop.failed("no \(base) at the provider") }
        try expect(writeFile(base + "/signal.txt", Array("signal".utf8)) == 0, "write \(base)/signal.txt")
        guard let id = childIdentifier("signal.txt", in: dirID) else { throw CheckStop.failed("no signal.txt at the provider") }
        // Looked up and stat'ed: the kernel now caches the name and its attributes.
        try expect(lstatus(base + "/signal.txt") != nil && lstatus(base + "/signalled.txt") == nil, "stat before the provider's change")
        try wait { try await onItsOwn.rename(id, "signalled.txt") }
        try expect(
            eventually { lstatus(base + "/signal.txt") == nil && lstatus(base + "/signalled.txt") != nil },
            "a rename the provider made itself did not show through the mount within \(options.signalDeadline) s")
        try wait { try await onItsOwn.delete(id) }
        try expect(
            eventually { lstatus(base + "/signalled.txt") == nil },
            "a delete the provider made itself did not show within \(options.signalDeadline) s")
    }

    func refusedModificationKeepsOld() throws {
        guard let declared = options.refusedModification else {
            throw CheckStop.skipped("no refused modification declared (Options.refusedModification)")
        }
        let path = (declared.folder.isEmpty ? "" : "/" + declared.folder) + "/" + declared.name
        try expect(writeFile(path, declared.accepted) == 0, "the accepted document \(path) was refused")
        let stored = writeFile(path, declared.refused)
        try expect(stored != 0, "the refused contents of \(path) were kept (every call returned 0)")
        try expect(try readAll(path) == declared.accepted, "\(path): after the refusal it does not read as the old version")
        let folderID =
            declared.folder.isEmpty
            ? ItemIdentifier.rootContainer
            : try walk().first { $0.path == "/" + declared.folder }.map(\.item.identifier) ?? .rootContainer
        let item = try provider.childItem(named: declared.name, in: folderID)
        let fd = try provider.openContents(of: item.identifier)
        defer { close(fd) }
        try expect(try Self.readAll(fd: fd, what: path) == declared.accepted, "\(path): the provider's contents are not the old version")
        _ = unlink(m(path))
    }

    func trashRoundTrip(in folder: (path: String, item: Item)) throws {
        guard provider is any TrashProvider else {
            if options.trash == true { throw CheckStop.failed("Options.trash is set, but the provider is not a TrashProvider") }
            throw CheckStop.skipped("not a TrashProvider: rm deletes")
        }
        guard options.servesTrash(of: provider) else { throw CheckStop.skipped("the trash is not served (Options.trash is false)") }
        let name = tag + "-trashed.txt"
        let path = folder.path + "/" + name
        try expect(writeFile(path, Array("trash".utf8)) == 0, "write \(path)")
        guard let id = childIdentifier(name, in: folder.item.identifier) else { throw CheckStop.failed("no \(name) at the provider") }
        try expect(unlink(m(path)) == 0, "rm \(path) (into the trash): \(Self.errnoName(errno))")
        let trashed = try provider.item(for: id)
        try expect(trashed.parentIdentifier == .trashContainer, "a trashed file's parent is \(trashed.parentIdentifier), not the trash")
        try expect(try listing("/.Trash").contains(trashed.filename), "/.Trash does not list \(trashed.filename)")
        try expect(rename(m("/.Trash/" + trashed.filename), m(path)) == 0, "mv out of the trash: \(Self.errnoName(errno))")
        try expect(childIdentifier(name, in: folder.item.identifier) == id, "the restored file has another identifier")
        try expect(try readAll(path) == Array("trash".utf8), "the restored file reads otherwise")
    }

    func extendedAttributes(in folder: (path: String, item: Item)) throws {
        guard provider is any ExtendedAttributeProvider else { throw CheckStop.skipped("not an ExtendedAttributeProvider: no user.* attributes") }
        let path = folder.path + "/" + tag + "-xattr.txt"
        try expect(writeFile(path, Array("xattr".utf8)) == 0, "write \(path)")
        let name = "user.conformance", value = Array("value \(tag)".utf8)
        typealias X = ExtendedAttributeCalls
        if X.set(m(path), name, value) != 0 {
            if errno == ENOTSUP || errno == EOPNOTSUPP { throw CheckStop.skipped("the mount answers ENOTSUP: no extended attributes") }
            throw CheckStop.failed("setxattr: \(Self.errnoName(errno))")
        }
        try expect(X.get(m(path), name) == value, "getxattr gives other bytes: \(X.get(m(path), name) ?? [])")
        try expect(X.names(m(path))?.contains(name) == true, "listxattr does not name \(name): \(X.names(m(path)) ?? [])")
        try expect(X.set(m(path), name, value, flags: X.createOnly) == -1 && errno == EEXIST, "XATTR_CREATE over an attribute: not EEXIST")
        try expect(X.remove(m(path), name) == 0, "removexattr: \(Self.errnoName(errno))")
        try expect(X.get(m(path), name) == nil && errno == ENODATA, "a removed attribute: not ENODATA")
    }

    /// A `HardLinkProvider`: a second name is the same inode and item, counted in both names'
    /// `st_nlink`; a write through one reads through the other; each name goes alone.
    func hardLinks(in folder: (path: String, item: Item)) throws {
        guard provider is any HardLinkProvider else { throw CheckStop.skipped("not a HardLinkProvider: link(2) is refused") }
        let first = folder.path + "/" + tag + "-link-a.txt", second = folder.path + "/" + tag + "-link-b.txt"
        try expect(writeFile(first, Array("one".utf8)) == 0, "write \(first)")
        try expect(link(m(first), m(second)) == 0, "link: \(Self.errnoName(errno))")
        guard let a = lstatus(first), let b = lstatus(second) else { throw CheckStop.failed("a name is missing after link") }
        try expect(
            a.st_ino == b.st_ino && a.st_nlink == 2 && b.st_nlink == 2, "inodes \(a.st_ino)/\(b.st_ino), link counts \(a.st_nlink)/\(b.st_nlink)")
        try expect(
            childIdentifier(tag + "-link-a.txt", in: folder.item.identifier) == childIdentifier(tag + "-link-b.txt", in: folder.item.identifier),
            "the two names are two items at the provider")
        try expect(writeFile(second, Array("two, through the second name".utf8)) == 0, "write through \(second)")
        try expect(try readAll(first) == Array("two, through the second name".utf8), "the first name does not read what the second wrote")
        try expect(unlink(m(first)) == 0, "unlink \(first): \(Self.errnoName(errno))")
        try expect(
            lstatus(second)?.st_nlink == 1 && (try? readAll(second)) == Array("two, through the second name".utf8),
            "the other name did not stay whole with one link")
        try expect(link(m(folder.path), m(folder.path + "/" + tag + "-folder-link")) == -1 && errno == EPERM, "a folder's link: not EPERM")
    }

    /// Removes the names this run made (deepest first), through the mount.
    func removeWhatThisRunMade(in folder: (path: String, item: Item)) {
        guard let entries = try? listing(folder.path) else { return }
        for entry in entries where entry.hasPrefix(tag) {
            removeTree(folder.path + "/" + entry)
        }
    }

    private func removeTree(_ path: String) {
        if let st = lstatus(path), st.st_mode & S_IFMT == S_IFDIR {
            for entry in (try? listing(path)) ?? [] { removeTree(path + "/" + entry) }
            rmdir(m(path))
        } else {
            unlink(m(path))
        }
    }
}
