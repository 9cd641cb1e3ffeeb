import CFuse
import Foundation
import Glibc
import DocFSProvider

// lookup, forget, getattr, setattr, readlink, statfs: the paths every `ls` and `stat` takes.
extension Bridge {
    func lookup(_ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>) {
        var cacheable = true
        do throws(RequestError) {
            let name = try attempt(.ino(parent)) { () throws(ProviderError) in try Bridge.name(cname) }
            guard let parentID = inodes.identifier(parent) else { throw RequestError(ProviderError(.noSuchItem), .ino(parent)) }
            // Search permission on the folder, for every caller; names below a folder that not
            // everyone may search are never cached, so each walk through it is checked. A mount
            // only root can reach needs neither the folder nor the check (root searches all).
            if !cachesEveryName {
                let folder = try item(parent)
                cacheable = cachesNames(below: folder)
                if !cacheable { try requireSearch(folder, Caller(reply.req)) }
            }
            if let node = inodes.rememberPendingChild(parent: parent, name: name) {
                var e = fuse_entry_param()
                e.ino = node.ino
                e.generation = InodeTable.generation
                e.attr =
                    stagedStat(node)
                    ?? attributes.stat(ofStaged: nil, ino: node.ino, attributes: NewItemAttributes(ownerID: 0, groupID: 0, posixPermissions: 0o600))
                // A file being copied in changes under the kernel; don't let it cache the attributes.
                e.attr_timeout = 0
                e.entry_timeout = 0
                reply.entry(&e)
                return
            }
            let item = try attempt(.child(parentID, name)) { () throws(ProviderError) in
                if options.trash, let trash = servedTrash(parent: parent, name: name) { return trash }
                return try provider.childItem(named: name, in: parentID)
            }
            let node = rememberEntry(item.identifier, parent: parent, name: name)
            var e = entry(for: item, node: node, cacheName: cacheable)
            // Names in the trash change behind the kernel's back (trashing a folder gathers what
            // was trashed from it): let it ask again each time.
            if options.trash, parentID == .trashContainer { e.entry_timeout = 0 }
            reply.entry(&e)
        } catch {
            if error.error.code == .noSuchItem, options.entryTimeout > 0, cacheable,
                !options.trash || inodes.identifier(parent) != .trashContainer
            {
                // A negative entry: the kernel remembers "no such name" until we create it.
                var e = fuse_entry_param()
                e.ino = 0
                e.entry_timeout = options.entryTimeout
                reply.entry(&e)
                return
            }
            reply.error(report("lookup", error))
        }
    }

    func forget(_ ino: UInt64, _ count: UInt64) {
        inodes.forget(ino, count)
    }

    func getattr(_ reply: consuming Reply, _ ino: UInt64) {
        do throws(RequestError) {
            var writing = false
            var st = try currentStat(ino, writing: &writing)
            // A file open for writing changes under the kernel: don't let it cache that.
            reply.attr(&st, timeout: writing ? 0 : options.attrTimeout)
        } catch {
            reply.error(report("getattr", error))
        }
    }

    @inline(__always)
    func hasSession(_ ino: UInt64) -> Bool {
        guard let node = inodes.node(ino) else { return false }
        return node.sessionLock.withLock { _ in node.session != nil }
    }

    /// Attributes as they are now: a file open for writing reports its staged size and times.
    func currentStat(_ ino: UInt64) throws(RequestError) -> stat {
        var writing = false
        return try currentStat(ino, writing: &writing)
    }

    func currentStat(_ ino: UInt64, writing: inout Bool) throws(RequestError) -> stat {
        guard let (node, identifier) = inodes.nodeAndIdentifier(ino) else { throw RequestError(ProviderError(.noSuchItem), .ino(ino)) }
        guard let identifier else {
            if let st = stagedStat(node) { writing = true; return st }
            throw RequestError(ProviderError(.noSuchItem), .ino(ino))
        }
        let item: Item
        var unlinked = false
        do { item = try provider.item(for: identifier) } catch {
            // Deleted or replaced while open: the open file still has attributes, with no links.
            guard error.code == .noSuchItem, let orphan = inodes.orphanedItem(node) else {
                throw RequestError(error, .item(identifier))
            }
            item = orphan
            unlinked = true
        }
        var st = attributes.stat(of: item, ino: ino)
        if unlinked { st.st_nlink = 0 }
        if item.kind == .file, overlayStaged(&st, node) { writing = true }
        return st
    }

    func readlink(_ reply: consuming Reply, _ ino: UInt64) {
        do throws(RequestError) {
            let item = try self.item(ino)
            guard item.kind == .symlink, let target = item.symlinkTargetPath else {
                throw RequestError(ProviderError(.invalidArgument, "not a symbolic link"), .item(item.identifier))
            }
            reply.readlink(target)
        } catch {
            reply.error(report("readlink", error))
        }
    }

    func statfs(_ reply: consuming Reply) {
        let s = provider.storageStatistics()
        var st = statvfs()
        st.f_bsize = UInt(s.blockSize)
        st.f_frsize = UInt(s.blockSize)
        st.f_blocks = UInt(s.totalBlocks)
        st.f_bfree = UInt(s.freeBlocks)
        st.f_bavail = UInt(s.availableBlocks)
        st.f_files = UInt(s.totalFiles)
        st.f_ffree = UInt(s.freeFiles)
        st.f_favail = UInt(s.freeFiles)
        st.f_namemax = UInt(s.maxNameLength)
        reply.statfs(&st)
    }

    /// chmod, chown, truncate, utimens, with Linux's rules on who may (OwnershipRules). Size
    /// changes need allowsWriting (EACCES); so does setting a file's modification time. The
    /// access time is the item's last-used date.
    func setattr(_ reply: consuming Reply, _ ino: UInt64, _ attr: stat, _ toSet: Int32, _ handle: OpenFile?) {
        let caller = Caller(reply.req)
        let d = reply.deferred()
        perform("setattr", d) { [self] () async throws(RequestError) in
            var narrowed: Item?
            var st = try await applyAttributes(ino, attr, toSet, handle, caller, narrowed: &narrowed)
            d.attr(&st, timeout: hasSession(ino) ? 0 : options.attrTimeout)
            // A folder some caller may no longer search: the kernel forgets the names it cached
            // below it, right after the reply (the kernel held the folder locked until then), so
            // that the next walk through it is checked: from this thread over /dev/fuse, from the
            // notifier's queue over io_uring (see forgetNamesBelow).
            if let narrowed { forgetNamesBelow(narrowed, ino: ino) }
        }
    }

    private func applyAttributes(
        _ ino: UInt64, _ attr: stat, _ toSet: Int32, _ handle: OpenFile?, _ caller: Caller,
        narrowed: inout Item?
    ) async throws(RequestError) -> stat {
        guard let node = inodes.node(ino) else { throw RequestError(ProviderError(.noSuchItem), .ino(ino)) }
        if inodes.orphanedItem(node) != nil {
            // Deleted or replaced while open: only the open file's own staged copy can change.
            if toSet & FUSE_SET_ATTR_SIZE != 0, hasSession(ino) { try? truncate(staged: node, to: Int64(attr.st_size)) }
            return try currentStat(ino)
        }
        let owned = try permissionSubject(of: ino)
        let item = owned.item
        let subject: Subject = item.map { .item($0.identifier) } ?? .ino(ino)
        let resizing = toSet & FUSE_SET_ATTR_SIZE != 0
        let atimeNow = toSet & FUSE_SET_ATTR_ATIME_NOW != 0
        let mtimeNow = toSet & FUSE_SET_ATTR_MTIME_NOW != 0
        let atime = toSet & FUSE_SET_ATTR_ATIME != 0 || atimeNow
        let mtime = toSet & FUSE_SET_ATTR_MTIME != 0 || mtimeNow
        let setsOwner = toSet & FUSE_SET_ATTR_UID != 0
        let setsGroup = toSet & FUSE_SET_ATTR_GID != 0
        // Nothing named: `chown(path, -1, -1)`, which the kernel sends as an empty setattr. It
        // still clears set-ID bits as a chown does and moves the change time.
        let handled =
            FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE
            | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW
        let touchOnly = toSet & handled == 0

        // Everything is checked before anything changes: nothing refused is half-done.
        var changes = try attempt(subject) { () throws(ProviderError) -> AttributeChanges in
            var changes = AttributeChanges()
            if setsOwner || setsGroup || touchOnly {
                // An empty setattr while the file is open for writing is the kernel clearing
                // set-ID bits before a write; otherwise it is chown(path, -1, -1).
                changes = try OwnershipRules.chown(
                    owned, owner: setsOwner ? attr.st_uid : nil,
                    group: setsGroup ? attr.st_gid : nil, by: caller,
                    beforeWrite: touchOnly && hasSession(ino))
            }
            if toSet & FUSE_SET_ATTR_MODE != 0 {
                if item?.kind == .symlink { throw ProviderError(.unsupported, "a symbolic link has no mode of its own") }
                changes.posixPermissions = try OwnershipRules.chmod(owned, to: UInt16(attr.st_mode & 0o7777), by: caller)
            }
            if atime || mtime {
                try OwnershipRules.setTimes(
                    owned, explicit: (atime && !atimeNow) || (mtime && !mtimeNow),
                    bothNow: atimeNow && mtimeNow, by: caller)
                let now = FileTime.now()
                if atime { changes.accessTime = atimeNow ? now : Attributes.fileTime(attr.st_atim) }
                if mtime { changes.modificationTime = mtimeNow ? now : Attributes.fileTime(attr.st_mtim) }
            }
            if resizing, let item, item.kind == .folder { throw ProviderError(.isDirectory, "cannot truncate a folder") }
            if resizing, !(handle?.writable ?? false) {
                // truncate by path: write permission; through a handle open for writing (ftruncate)
                // it was checked at open.
                try PermissionCheck.require(PermissionCheck.write, on: owned, for: caller, "truncating the file")
            }
            if let item, resizing || (mtime && item.kind == .file) { try CapabilityCheck.write(item) }
            return changes
        }

        guard let item else {
            // A file still being copied in: its CopyIn holds owner, group, mode and access time
            // until the import; the staged file holds size and modification time.
            if resizing { try truncate(staged: node, to: Int64(attr.st_size)) }
            _ = try? inodes.updateCopyIn(node) { $0.apply(changes) }
            node.sessionLock.withLock { _ in
                guard let session = node.session else { return }
                if let m = changes.modificationTime { session.setModificationTime(m) }
            }
            return try currentStat(ino)
        }

        if resizing {
            try await truncate(node, item: item, to: Int64(attr.st_size), throughWritableHandle: handle?.writable ?? false)
            if changes.posixPermissions == nil, let cleared = OwnershipRules.clearingSetID(owned, forWriter: caller) {
                changes.posixPermissions = cleared
            }
        }
        if let m = changes.modificationTime {
            // A new version still open for writing takes its time from its staged file at close:
            // give the staged file the time set now (a later write moves it again, as it should).
            node.sessionLock.withLock { _ in
                // (A committed copy still open shows its times through getattr until the last close.)
                guard let session = node.session else { return }
                session.setModificationTime(m)
            }
        }
        if !changes.isEmpty || touchOnly {
            let updated = try await attempt(subject) { () async throws(ProviderError) in
                try await provider.setAttributes(ofItemWithIdentifier: item.identifier, changes: changes)
            }
            if resizing { notifier.invalidateAttributesNow(ino: ino) }
            // A folder some caller may no longer search: forget the names cached below it.
            if item.kind == .folder, cachesNames(below: owned), !cachesNames(below: updated) {
                narrowed = updated
            }
        }
        return try currentStat(ino)
    }
}
