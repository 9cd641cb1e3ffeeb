import CFuse
import Foundation
import Glibc
import DocFSProvider

// Folders and names: mkdir, symlink, unlink, rmdir, rename, link, mknod, and listings.
extension Bridge {
    /// A validated child name and its parent item, or a failure about them.
    private func parentAndName(_ parent: UInt64, _ cname: UnsafePointer<CChar>) throws(RequestError) -> (Item, String) {
        let name = try attempt(.ino(parent)) { () throws(ProviderError) in try Bridge.name(cname) }
        let parentItem = try item(parent)
        return (parentItem, name)
    }

    /// Replies with the entry for a newly made item (counts one lookup).
    private func replyEntry(_ d: DeferredReply, _ item: Item, in parent: Item) {
        let node = inodes.remember(item.identifier)
        var e = entry(for: item, node: node, cacheName: cachesNames(below: parent))
        d.entry(&e)
    }

    func mkdir(_ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>, _ mode: mode_t) {
        do throws(RequestError) {
            let (parentItem, name, subject, attributes) = try admitNewItem(
                parent, cname, kind: .folder, mode: UInt16(mode & 0o7777),
                caller: Caller(reply.req))
            let d = reply.deferred()
            perform("mkdir", d) { [self] () async throws(RequestError) in
                let item = try await attempt(subject) { () async throws(ProviderError) in
                    try await provider.createDirectory(withName: name, inParentItemIdentifier: parentItem.identifier, attributes: attributes)
                }
                replyEntry(d, item, in: parentItem)
            }
        } catch {
            reply.error(report("mkdir", error))
        }
    }

    func symlink(_ reply: consuming Reply, _ ctarget: UnsafePointer<CChar>, _ parent: UInt64, _ cname: UnsafePointer<CChar>) {
        do throws(RequestError) {
            let (parentItem, name, subject, attributes) = try admitNewItem(parent, cname, kind: .symlink, mode: 0o777, caller: Caller(reply.req))
            let target = try attempt(subject) { () throws(ProviderError) in
                guard let t = String(validatingCString: ctarget) else {
                    throw ProviderError(.illegalByteSequence, "link target is not valid UTF-8")
                }
                return t
            }
            let d = reply.deferred()
            perform("symlink", d) { [self] () async throws(RequestError) in
                let item = try await attempt(subject) { () async throws(ProviderError) in
                    try await provider.createSymbolicLink(
                        withName: name, target: target, inParentItemIdentifier: parentItem.identifier,
                        attributes: attributes)
                }
                replyEntry(d, item, in: parentItem)
            }
        } catch {
            reply.error(report("symlink", error))
        }
    }

    /// FIFOs, sockets and device nodes become items with no contents; a regular file is an
    /// empty import. A device node needs root (CAP_MKNOD, which libfuse does not pass on; the
    /// kernel checks it before asking), as on ext4, and stays inert: the mount is `nodev`, so
    /// the kernel refuses to open it as a device (EACCES) and never asks the bridge.
    func mknod(_ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>, _ mode: mode_t, rdev: UInt64) {
        do throws(RequestError) {
            let type = mode & S_IFMT
            let kind: ItemKind =
                switch type {
                case S_IFIFO: .fifo
                case S_IFSOCK: .socket
                case S_IFCHR: .characterDevice
                case S_IFBLK: .blockDevice
                default: .file
                }
            let caller = Caller(reply.req)
            let (parentItem, name, subject, admitted) = try admitNewItem(
                parent, cname, kind: kind, mode: UInt16(mode & 0o7777),
                caller: caller)
            var newAttributes = admitted
            guard type == S_IFREG || type == 0 || kind.isSpecial else {
                throw RequestError(ProviderError(.invalidArgument, "mknod of an unknown file type \(String(type, radix: 8))"), subject)
            }
            if kind.isDevice {
                guard caller.isRoot else {
                    throw RequestError(ProviderError(.notPermitted, "making a device node needs CAP_MKNOD (root)"), subject)
                }
                newAttributes.deviceNumber = rdev
            }
            let attributes = newAttributes
            let d = reply.deferred()
            perform("mknod", d) { [self] () async throws(RequestError) in
                if kind.isSpecial {
                    let item = try await attempt(subject) { () async throws(ProviderError) in
                        try await createSpecialItem(named: name, kind: kind, in: parentItem.identifier, attributes: attributes)
                    }
                    replyEntry(d, item, in: parentItem)
                    return
                }
                let session = try attempt(subject) { () throws(ProviderError) in
                    try WriteSession.stage(in: stagingFiles, copying: nil, dirty: true)
                }
                session.committed = true
                let item = try await attempt(subject) { () async throws(ProviderError) in
                    try await importStaged(sealed: session.path, name: name, into: parentItem.identifier, attributes: attributes)
                }
                replyEntry(d, item, in: parentItem)
            }
        } catch {
            reply.error(report("mknod", error))
        }
    }

    func unlink(_ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>, folder: Bool) {
        let op = folder ? "rmdir" : "unlink"
        do throws(RequestError) {
            let (parentItem, name) = try parentAndName(parent, cname)
            let subject = Subject.child(parentItem.identifier, name)
            let caller = Caller(reply.req)
            try attempt(subject) { () throws(ProviderError) in
                try PermissionCheck.requireChange(in: parentItem, for: caller)
            }
            if !folder, let pending = inodes.pendingChild(parent: parent, name: name) {
                if let owned = inodes.copyIn(of: pending) {
                    try attempt(subject) { () throws(ProviderError) in
                        try PermissionCheck.requireStickyOwner(item: owned, folder: parentItem, for: caller)
                    }
                }
                // A file still being copied in: it leaves the tree now and is never imported.
                inodes.dropPending(pending)
                pending.sessionLock.withLock { _ in pending.session?.dirty = false }
                reply.ok()
                return
            }
            // With a trash, rm outside it trashes and rm inside it deletes for good.
            let trashing = options.trash && !isTrashOrInTrash(parentItem)
            let item = try attempt(subject) { () throws(ProviderError) in
                let item = try provider.childItem(named: name, in: parentItem.identifier)
                try PermissionCheck.requireStickyOwner(item: item, folder: parentItem, for: caller)
                if folder, item.kind != .folder { throw ProviderError(.notDirectory, "not a folder") }
                if !folder, item.kind == .folder { throw ProviderError(.isDirectory, "is a folder") }
                if trashing {
                    guard item.capabilities.contains(.allowsTrashing) else {
                        throw ProviderError(.notPermitted, "item does not allow trashing (allowsTrashing)")
                    }
                } else {
                    try CapabilityCheck.delete(item)
                }
                let copyingInto = inodes.knownNode(item.identifier).map { !inodes.pendingChildren(of: $0.ino).isEmpty } ?? false
                if folder, (item.childItemCount ?? 0) > 0 || copyingInto {
                    throw ProviderError(.directoryNotEmpty, "folder is not empty")
                }
                return item
            }
            // One of several names: only that name goes (with a trash too: the item stays under
            // its other names, and its last name goes to the trash as any item does).
            if !folder, item.linkCount > 1, let links = hardLinks {
                removeName(reply.deferred(), links, op: op, name: name, in: parentItem, item: item, subject: subject)
                return
            }
            if options.trash {
                trashOrDelete(reply.deferred(), op: op, item: item, inTrash: !trashing, subject: subject)
                return
            }
            let d = reply.deferred()
            perform(op, d) { [self] () async throws(RequestError) in
                try await attempt(subject) { () async throws(ProviderError) in
                    try await provider.deleteItem(withIdentifier: item.identifier)
                }
                inodes.orphan(item)
                d.ok()
            }
        } catch {
            reply.error(report(op, error))
        }
    }

    func rename(
        _ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>,
        _ newParent: UInt64, _ cnewname: UnsafePointer<CChar>, _ flags: UInt32
    ) {
        do throws(RequestError) {
            let (fromParent, name) = try parentAndName(parent, cname)
            let (toParent, newName) = try parentAndName(newParent, cnewname)
            let subject = Subject.child(fromParent.identifier, name)
            if flags & Bridge.renameExchange != 0 {
                throw RequestError(ProviderError(.invalidArgument, "RENAME_EXCHANGE is not supported"), subject)
            }
            let noReplace = flags & Bridge.renameNoReplace != 0
            let caller = Caller(reply.req)
            // Write and search on both folders (EACCES), the sticky rule for the item moved
            // (EPERM); the replaced item's and the moved folder's own are checked below.
            try attempt(subject) { () throws(ProviderError) in
                try PermissionCheck.requireChange(in: fromParent, for: caller)
                if toParent.identifier != fromParent.identifier { try PermissionCheck.requireChange(in: toParent, for: caller) }
            }
            if let pending = inodes.pendingChild(parent: parent, name: name) {
                // Renaming a file still being copied in only changes where it will be imported.
                try attempt(subject) { () throws(ProviderError) in
                    if let owned = inodes.copyIn(of: pending) {
                        try PermissionCheck.requireStickyOwner(item: owned, folder: fromParent, for: caller)
                    }
                    try CapabilityCheck.add(into: toParent)
                    if (try? provider.childItem(named: newName, in: toParent.identifier)) != nil
                        || inodes.pendingChild(parent: newParent, name: newName) != nil
                    {
                        throw ProviderError(
                            .filenameCollision, "'\(newName)' already exists (renaming a file still being written over another is not supported)")
                    }
                }
                inodes.movePending(pending, toParent: newParent, name: newName)
                reply.ok()
                return
            }
            if options.trash {
                if let move = try trashMove(from: fromParent, name: name, to: toParent, newName: newName, subject: subject) {
                    run(move, reply.deferred(), subject: subject)
                    return
                }
                try attempt(subject) { () throws(ProviderError) in try checkTrashRules(addingTo: toParent, name: newName) }
            }
            let (item, replaced) = try attempt(subject) { () throws(ProviderError) -> (Item, Item?) in
                let item = try provider.childItem(named: name, in: fromParent.identifier)
                let existing = try? provider.childItem(named: newName, in: toParent.identifier)
                try PermissionCheck.requireStickyOwner(item: item, folder: fromParent, for: caller)
                if let existing, existing.identifier != item.identifier {
                    try PermissionCheck.requireStickyOwner(item: existing, folder: toParent, for: caller)
                }
                // A folder moved to another folder changes its ".." entry: write permission on it.
                if item.kind == .folder, toParent.identifier != fromParent.identifier {
                    try PermissionCheck.require(PermissionCheck.write, on: item, for: caller, "moving the folder to another folder")
                }
                if let existing {
                    if existing.identifier == item.identifier { return (item, nil) }
                    if noReplace { throw ProviderError(.filenameCollision, "'\(newName)' already exists") }
                    try CapabilityCheck.replace(existing, with: item)
                }
                if inodes.pendingChild(parent: newParent, name: newName) != nil {
                    throw ProviderError(.busy, "'\(newName)' is still being written")
                }
                try CapabilityCheck.move(item, from: fromParent, to: toParent, renaming: name != newName, replacing: existing)
                if fromParent.identifier != toParent.identifier || name != newName {
                    try provider.admitItem(named: newName, kind: item.kind, into: toParent.identifier)
                }
                return (item, existing)
            }
            if item.identifier == replaced?.identifier || (fromParent.identifier == toParent.identifier && name == newName) {
                reply.ok()
                return
            }
            // A name of an item with several names (or one replacing such a name) moves alone.
            if item.linkCount > 1 || (replaced?.linkCount ?? 1) > 1, let links = hardLinks {
                moveName(
                    reply.deferred(), links, name: name, from: fromParent, item: item, to: toParent, newName: newName,
                    replaced: replaced, subject: subject)
                return
            }
            let d = reply.deferred()
            perform("rename", d) { [self] () async throws(RequestError) in
                _ = try await attempt(subject) { () async throws(ProviderError) in
                    if fromParent.identifier == toParent.identifier, replaced == nil {
                        return try await provider.renameItem(withIdentifier: item.identifier, toName: newName)
                    }
                    return try await provider.reparentItem(
                        withIdentifier: item.identifier, toParentItemWithIdentifier: toParent.identifier,
                        newName: newName, replacing: replaced?.identifier)
                }
                if let replaced { inodes.orphan(replaced) }
                d.ok()
            }
        } catch {
            reply.error(report("rename", error))
        }
    }

    /// renameat2 flags (linux/fs.h), which Glibc's module does not export.
    static let renameNoReplace: UInt32 = 1 << 0
    /// FMODE_EXEC, which the kernel sets in the flags of an open for execve (linux/fs.h).
    static let openForExec: Int32 = 0x20
    /// utimensat's "leave this time alone" (linux/stat.h), which Glibc's module does not export.
    static let utimeOmit = (1 << 30) - 2
    static let renameExchange: UInt32 = 1 << 1

    // MARK: Listings

    static func snapshot(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> DirectorySnapshot? {
        guard let fi, fi.pointee.fh != 0 else { return nil }
        return Unmanaged<DirectorySnapshot>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).takeUnretainedValue()
    }

    func opendir(_ reply: consuming Reply, _ ino: UInt64, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        do throws(RequestError) {
            let folder = try item(ino)
            let caller = Caller(reply.req)
            let children = try attempt(.item(folder.identifier)) { () throws(ProviderError) in
                guard folder.kind == .folder else { throw ProviderError(.notDirectory) }
                try PermissionCheck.require(PermissionCheck.read, on: folder, for: caller, "listing the folder")
                try CapabilityCheck.enumerate(folder)
                return try provider.enumerateItems(in: folder.identifier)
            }
            var entries: [DirectorySnapshot.Entry] = []
            entries.reserveCapacity(children.count + 2)
            entries.append(.init(name: ".", item: nil, node: nil, isFolder: true))
            entries.append(.init(name: "..", item: nil, node: nil, isFolder: true))
            if options.trash, ino == InodeTable.rootIno, let trash = servedTrash(parent: ino, name: Bridge.trashName) {
                entries.append(.init(name: Bridge.trashName, item: trash, node: nil, isFolder: true))
            }
            for child in children {
                entries.append(.init(name: child.filename, item: child, node: nil, isFolder: child.kind == .folder))
            }
            for (name, node) in inodes.pendingChildren(of: ino) {
                entries.append(.init(name: name, item: nil, node: node, isFolder: false))
            }
            let snapshot = DirectorySnapshot(entries: entries, cacheNames: cachesNames(below: folder))
            snapshot.directoryIno = ino
            fi.pointee.fh = UInt64(UInt(bitPattern: Unmanaged.passRetained(snapshot).toOpaque()))
            fi.pointee.cache_readdir = 0
            reply.open(fi)
        } catch {
            reply.error(report("opendir", error))
        }
    }

    func releasedir(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        if let s = Bridge.snapshot(fi) { Unmanaged.passUnretained(s).release() }
        reply.ok()
    }

    func readdir(_ reply: consuming Reply, _ req: fuse_req_t, _ size: Int, _ offset: Int, _ snapshot: DirectorySnapshot, plus: Bool) {
        let buf = UnsafeMutablePointer<CChar>.allocate(capacity: max(size, 1))
        defer { buf.deallocate() }
        var used = 0
        var index = offset
        let entries = snapshot.entries
        while index < entries.count {
            let entry = entries[index]
            let next = off_t(index + 1)
            let remaining = size - used
            if plus {
                var e = fuse_entry_param()
                var counted: InodeNode?
                if let item = entry.item {
                    let node = rememberEntry(item.identifier, parent: snapshot.directoryIno, name: entry.name)
                    counted = node
                    e = self.entry(for: item, node: node, cacheName: snapshot.cacheNames)
                } else if let node = entry.node, let st = stagedStat(node) {
                    inodes.retainLookup(node)
                    counted = node
                    e.ino = node.ino
                    e.generation = InodeTable.generation
                    e.attr = st
                } else {
                    // "." and "..": no lookup is counted for them (ino 0 tells the kernel so).
                    e.attr.st_mode = S_IFDIR
                    e.attr.st_ino = 1
                }
                let n = fuse_add_direntry_plus(req, buf + used, remaining, entry.name, &e, next)
                if n > remaining {
                    if let counted { inodes.forget(counted.ino, 1) }
                    break
                }
                used += n
            } else {
                var st = stat()
                st.st_mode = entry.isFolder ? S_IFDIR : Attributes.fileType(entry.item?.kind ?? .file)
                st.st_ino = UInt(entry.item.map { inodes.knownIno($0.identifier) } ?? (entry.node?.ino ?? 1))
                let n = fuse_add_direntry(req, buf + used, remaining, entry.name, &st, next)
                if n > remaining { break }
                used += n
            }
            index += 1
        }
        reply.buffer(buf, used)
    }
}
