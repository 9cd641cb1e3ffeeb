import CFuse
import Foundation
import Glibc
import DocFSProvider

// lookup, forget, getattr, setattr, readlink, statfs: the paths every `ls` and `stat` takes.
extension Bridge {
    func lookup(_ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>) {
        do throws(Failure) {
            let name = try attempt(.ino(parent)) { () throws(ProviderError) in try Bridge.name(cname) }
            if let node = inodes.rememberPendingChild(parent: parent, name: name) {
                var e = fuse_entry_param()
                e.ino = node.ino
                e.generation = InodeTable.generation
                e.attr = stagedStat(node) ?? attributes.stat(ofStaged: -1, ino: node.ino, permissions: 0o644)
                // A file being copied in changes under the kernel; don't let it cache the attributes.
                e.attr_timeout = 0
                e.entry_timeout = 0
                reply.entry(&e)
                return
            }
            guard let parentID = inodes.identifier(parent) else { throw Failure(ProviderError(.noSuchItem), .ino(parent)) }
            let item = try attempt(.child(parentID, name)) { () throws(ProviderError) in
                if options.trash, let trash = servedTrash(parent: parent, name: name) { return trash }
                return try provider.childItem(named: name, in: parentID)
            }
            let node = inodes.remember(item.identifier)
            var e = entry(for: item, node: node)
            // Names in the trash change behind the kernel's back (trashing a folder gathers what
            // was trashed from it): let it ask again each time.
            if options.trash, parentID == .trashContainer { e.entry_timeout = 0 }
            reply.entry(&e)
        } catch {
            if error.error.code == .noSuchItem, options.entryTimeout > 0,
               !options.trash || inodes.identifier(parent) != .trashContainer {
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
        do throws(Failure) {
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
        node.sessionLock.lock(); defer { node.sessionLock.unlock() }
        return node.session != nil
    }

    /// Attributes as they are now: a file open for writing reports its staged size and times.
    func currentStat(_ ino: UInt64) throws(Failure) -> stat {
        var writing = false
        return try currentStat(ino, writing: &writing)
    }

    func currentStat(_ ino: UInt64, writing: inout Bool) throws(Failure) -> stat {
        guard let (node, identifier) = inodes.nodeAndIdentifier(ino) else { throw Failure(ProviderError(.noSuchItem), .ino(ino)) }
        guard let identifier else {
            if let st = stagedStat(node) { writing = true; return st }
            throw Failure(ProviderError(.noSuchItem), .ino(ino))
        }
        let item: Item
        var unlinked = false
        do { item = try provider.item(for: identifier) } catch {
            // Deleted or replaced while open: the open file still has attributes, with no links.
            guard error.code == .noSuchItem, let orphan = inodes.orphanedItem(node) else {
                throw Failure(error, .item(identifier))
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
        do throws(Failure) {
            let item = try self.item(ino)
            guard item.kind == .symlink, let target = item.symlinkTargetPath else {
                throw Failure(ProviderError(.invalidArgument, "not a symbolic link"), .item(item.identifier))
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

    /// chmod, truncate, utimens. Size changes need allowsWriting (EACCES); so does setting the
    /// modification time. Access time is the item's last-used date (setLastUsedDate).
    func setattr(_ reply: consuming Reply, _ ino: UInt64, _ attr: stat, _ toSet: Int32, _ handle: OpenFile?) {
        let d = reply.deferred()
        executor.run { [self] in
            do throws(Failure) {
                var st = try await applyAttributes(ino, attr, toSet, handle)
                d.attr(&st, timeout: hasSession(ino) ? 0 : options.attrTimeout)
            } catch {
                d.error(report("setattr", error))
            }
        }
    }

    private func applyAttributes(_ ino: UInt64, _ attr: stat, _ toSet: Int32, _ handle: OpenFile?) async throws(Failure) -> stat {
        guard let node = inodes.node(ino) else { throw Failure(ProviderError(.noSuchItem), .ino(ino)) }
        if inodes.orphanedItem(node) != nil {
            // Deleted or replaced while open: only the open file's own staged copy can change.
            if toSet & FUSE_SET_ATTR_SIZE != 0, hasSession(ino) { try? truncate(staged: node, to: Int64(attr.st_size)) }
            return try currentStat(ino)
        }
        let identifier = inodes.identifier(ino)
        let item: Item? = identifier == nil ? nil : try self.item(ino)

        if toSet & FUSE_SET_ATTR_SIZE != 0 {
            if let item {
                if item.kind == .folder { throw Failure(ProviderError(.isDirectory, "cannot truncate a folder"), .item(item.identifier)) }
                try attempt(.item(item.identifier)) { () throws(ProviderError) in try CapabilityCheck.write(item) }
            }
            try await truncate(node, item: item, to: Int64(attr.st_size), throughWritableHandle: handle?.writable ?? false)
            if let item, let change = setIDToDrop(item) { await dropSetID(node, change) }
        }
        if toSet & FUSE_SET_ATTR_MODE != 0, let item {
            let mode = UInt16(attr.st_mode & 0o7777)
            _ = try await attempt(.item(item.identifier)) { () async throws(ProviderError) in
                try await provider.setAttributes(ofItemWithIdentifier: item.identifier, posixPermissions: mode, contentModificationDate: nil)
            }
        }
        if toSet & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW) != 0, let item, item.kind != .symlink {
            try attempt(.item(item.identifier)) { () throws(ProviderError) in
                if item.kind == .file { try CapabilityCheck.write(item) }
            }
            let date = toSet & FUSE_SET_ATTR_MTIME_NOW != 0 ? Date() : Attributes.date(attr.st_mtim)
            _ = try await attempt(.item(item.identifier)) { () async throws(ProviderError) in
                try await provider.setAttributes(ofItemWithIdentifier: item.identifier, posixPermissions: nil, contentModificationDate: date)
            }
        }
        if toSet & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW) != 0, let item {
            let date = toSet & FUSE_SET_ATTR_ATIME_NOW != 0 ? Date() : Attributes.date(attr.st_atim)
            _ = try await attempt(.item(item.identifier)) { () async throws(ProviderError) in
                try await provider.setLastUsedDate(date, forItemIdentifier: item.identifier)
            }
        }
        return try currentStat(ino)
    }
}
