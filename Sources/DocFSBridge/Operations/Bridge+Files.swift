import CFuse
import Foundation
import Glibc
import DocFSProvider

// Files: a copy in is create → write… → flush (import) → release; a change to an existing file
// is open(write) → write… → flush (new content version). Errors the copying tool must see come
// back from flush, because the kernel ignores release's.
extension Bridge {
    static func handle(_ fi: UnsafeMutablePointer<fuse_file_info>?) -> OpenFile? {
        guard let fi, fi.pointee.fh != 0 else { return nil }
        return Unmanaged<OpenFile>.fromOpaque(UnsafeRawPointer(bitPattern: UInt(fi.pointee.fh))!).takeUnretainedValue()
    }

    /// Counts the handle and puts it in `fi`. `passthroughFrom`: a descriptor on the stored
    /// contents the kernel may read itself, or for a writer on its staged copy
    /// (`Passthrough.admit` decides); returns the backing id for the open reply then. Throws
    /// EBUSY for a handle the daemon must serve while the file's passthrough readers stay open.
    @discardableResult
    /// `holding`: the caller holds an open of its own on the node meanwhile (not another handle).
    func install(
        _ file: OpenFile, in fi: UnsafeMutablePointer<fuse_file_info>,
        passthroughFrom fd: Int32? = nil, holding: Bool = false
    ) throws(RequestError) -> Int32? {
        let node = file.node
        let backing = try attempt(.ino(node.ino)) { () throws(ProviderError) in
            try passthrough.admit(
                ino: node.ino, backing: fd, reading: !file.writable, staged: file.writable,
                othersOpen: { [inodes] in
                    // Another handle (served by the daemon), or for a reader a staged copy (it must
                    // see the writes; a writer's own staged copy is what it writes).
                    inodes.openCount(node) > (holding ? 1 : 0) || (!file.writable && node.sessionLock.withLock { _ in node.session != nil })
                }, retain: { [inodes] in inodes.retainOpen(node) }, log: log)
        }
        file.passthrough = backing != nil
        fi.pointee.fh = UInt64(UInt(bitPattern: Unmanaged.passRetained(file).toOpaque()))
        // The kernel takes no page-cache flags with passthrough.
        fi.pointee.keep_cache = options.keepCache && backing == nil ? 1 : 0
        return backing
    }

    func create(
        _ reply: consuming Reply, _ parent: UInt64, _ cname: UnsafePointer<CChar>, _ mode: mode_t,
        _ fi: UnsafeMutablePointer<fuse_file_info>
    ) {
        do throws(RequestError) {
            let caller = Caller(reply.req)
            let (parentItem, name, _, attributes) = try admitNewItem(parent, cname, kind: .file, mode: UInt16(mode & 0o7777), caller: caller)
            try attempt(.child(parentItem.identifier, name)) { () throws(ProviderError) in
                if (try? provider.childItem(named: name, in: parentItem.identifier)) != nil
                    || inodes.pendingChild(parent: parent, name: name) != nil
                {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists")
                }
            }
            // Owner, group and mode stay with the copy-in until the import takes them.
            let copyIn = CopyIn(parent: parent, name: name, attributes: attributes)
            // The file's times are the folder's change (as on ext4), whether or not it is written.
            let created = copyIn.attributes.entryTime ?? .now()
            // `-o passthrough_create`: the kernel writes the staged file itself. Not a file born
            // with set-ID bits: its first write must clear them, which only the daemon sees.
            let kernelWrites = options.passthroughCreate && passthrough.active && copyIn.attributes.posixPermissions & 0o6000 == 0
            let session = try attempt(.child(parentItem.identifier, name)) { () throws(ProviderError) in
                // A provider that takes small files as bytes: the file stays in memory while small.
                if let smallFiles, !kernelWrites {
                    return WriteSession.inMemory(limit: smallFiles.smallFileLimit, spillingTo: stagingFiles, created: created)
                }
                return try WriteSession.stage(in: stagingFiles, copying: nil, dirty: true, created: created)
            }
            let node = inodes.addCopyIn(copyIn)
            node.sessionLock.withLock { _ in node.session = session }
            let backing = try install(
                OpenFile(node: node, readFD: -1, writable: true), in: fi, passthroughFrom: kernelWrites ? session.backingFD : nil)
            if backing != nil { beganBacking(node) }
            // A write-only copy (cp, tar, a shell's `>`) writes around the page cache: the kernel's
            // cached write path asks for `security.capability` before the first write of every
            // new inode (a GETXATTR round trip per file), its direct path does not, and nothing
            // reads through a write-only handle. Not under `writeback`, which is there to gather
            // small writes in the page cache, nor for passthrough (the kernel's direct I/O flag
            // would override it). See PERFORMANCE.md.
            if fi.pointee.flags & O_ACCMODE == O_WRONLY, !options.writeback, backing == nil { fi.pointee.direct_io = 1 }
            var e = fuse_entry_param()
            e.ino = node.ino
            e.generation = InodeTable.generation
            e.attr = self.attributes.stat(ofStaged: session.reportedStatus(), ino: node.ino, attributes: copyIn.attributes)
            // The attributes may be cached: every change to the new file comes through the kernel,
            // which drops them after a write or setattr (this saves cp's fstat a round trip). So
            // may the name (an unlink or a stat by path after close needs no lookup): an import
            // that fails takes it out of the kernel's cache before close() returns (`flush`). Not
            // in a folder some caller may not search, as for any name (`cachesNames`).
            e.attr_timeout = options.attrTimeout
            e.entry_timeout = cachesNames(below: parentItem) ? options.entryTimeout : 0
            if let backing {
                passthrough.replyCreate(reply, &e, fi, backingID: backing)
            } else {
                reply.create(&e, fi)
            }
        } catch {
            reply.error(report("create", error))
        }
    }

    func open(_ reply: consuming Reply, _ ino: UInt64, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        do throws(RequestError) {
            guard let node = inodes.node(ino) else { throw RequestError(ProviderError(.noSuchItem), .ino(ino)) }
            let accmode = fi.pointee.flags & O_ACCMODE
            let writing = accmode == O_WRONLY || accmode == O_RDWR
            let truncating = writing && fi.pointee.flags & O_TRUNC != 0
            let caller = Caller(reply.req)
            // What open(2) asks of the mode bits: read and/or write (O_TRUNC needs write too),
            // execute for exec (the kernel marks its opens with FMODE_EXEC).
            var want: UInt16 = 0
            if accmode != O_WRONLY { want |= PermissionCheck.read }
            if writing || fi.pointee.flags & O_TRUNC != 0 { want |= PermissionCheck.write }
            if fi.pointee.flags & Bridge.openForExec != 0 { want |= PermissionCheck.execute }
            let owned = try permissionSubject(of: ino)
            let stored = owned.item
            try attempt(.ino(ino)) { () throws(ProviderError) in
                try PermissionCheck.require(want, on: owned, for: caller, "opening the file")
            }
            guard let item = stored else {
                // A file still being copied in: every handle shares its staging file.
                guard stagedStat(node) != nil else { throw RequestError(ProviderError(.noSuchItem), .ino(ino)) }
                if truncating { try truncate(staged: node, to: 0) }
                let backing = try install(OpenFile(node: node, readFD: -1, writable: writing), in: fi)
                answerOpen(reply, fi, backing: backing)
                return
            }
            if item.kind == .folder { throw RequestError(ProviderError(.isDirectory), .item(item.identifier)) }
            // Set when the handle joins passthrough readers, or goes passthrough itself.
            var backing: Int32?
            try attempt(.item(item.identifier)) { () throws(ProviderError) in
                if accmode != O_WRONLY { try CapabilityCheck.read(item) }
                if writing { try CapabilityCheck.write(item) }
            }
            if writing, let ring, ring.servesThisThread {
                // A writer's open may copy the whole file (its staged copy, or the version kept
                // beside passthrough readers) or wait for readers: never on a ring queue's
                // thread, which serves every other request from its CPU.
                let d = reply.deferred()
                let opened = fi.pointee
                runMayBlock { [self] in openWriterLater(d, opened, node, item, truncating: truncating, caller: caller) }
                return
            }
            if writing {
                if let (joined, drop) = try openJoiningReaders(node, item, truncating: truncating, caller: caller, fi) {
                    // Passthrough readers hold the stored file: it became the live file, which
                    // this writer changes in place beside them.
                    if drop != nil {
                        answerLater(reply.deferred(), fi.pointee, node, backing: joined, drop: drop)
                        return
                    }
                    backing = joined
                } else if passthrough.readersHold(ino: node.ino) {
                    // The provider could not make the readers' file live (see
                    // `LiveContentsProvider`): the writer waits for them, as without it.
                    // Wait for the passthrough readers' releases on a thread of its own: under
                    // io_uring they may be queued behind this request on its ring.
                    let d = reply.deferred()
                    let opened = fi.pointee
                    Thread.detachNewThread { [self] in openWriterLater(d, opened, node, item, truncating: truncating, caller: caller) }
                    return
                } else {
                    let (opened, drop) = try openForWriting(node, item, truncating: truncating, caller: caller, fi)
                    backing = opened
                    if drop != nil {
                        answerLater(reply.deferred(), fi.pointee, node, backing: opened, drop: drop)
                        return
                    }
                }
            } else if let storedSlices,
                let slice = try attempt(.item(item.identifier), { () throws(ProviderError) in try storedSlices.openStoredSlice(of: item.identifier) })
            {
                // A small file kept inside a larger one (the store's segments): read in place.
                backing = try install(
                    OpenFile(node: node, readFD: slice.fd, writable: false, window: slice.offset..<(slice.offset + Int64(slice.length))), in: fi)
                fi.pointee.noflush = 1
                prefetch?.opened(item)
            } else {
                let opened = try attempt(.item(item.identifier)) { () throws(ProviderError) in
                    if let onDemand { return try onDemand.openContentsForReading(of: item.identifier) }
                    return OpenedContents(fd: try provider.openContents(of: item.identifier))
                }
                let file = OpenFile(node: node, readFD: opened.fd, writable: false, arrival: opened.arrival, reading: item.identifier)
                // Contents all here: the kernel may read them itself, where a writer can later
                // join them (the provider can make them live, `openJoiningReaders`).
                backing = try install(file, in: fi, passthroughFrom: opened.arrival == nil && liveContents != nil ? opened.fd : nil)
                // Closing a reader of a stored file has nothing to do (flush answers at once), so
                // spare close() that round trip. The kernel still flushes under writeback cache.
                fi.pointee.noflush = 1
                prefetch?.opened(item)
            }
            answerOpen(reply, fi, backing: backing)
        } catch {
            reply.error(report("open", error))
        }
    }

    /// An open for writing of a stored file: waits for passthrough readers to close (EBUSY when
    /// they stay: the kernel would refuse this handle), makes the staged copy, which may be the
    /// kernel's to write (`Passthrough`). Returns the backing id, and set-ID bits to clear before
    /// the reply: O_TRUNC changes the contents even if nothing is written after it, and a
    /// passthrough writer's writes never reach the daemon.
    private func openForWriting(
        _ node: InodeNode, _ item: Item, truncating: Bool, caller: Caller,
        _ fi: UnsafeMutablePointer<fuse_file_info>
    ) throws(RequestError) -> (Int32?, (ItemIdentifier, UInt16)?) {
        try attempt(.item(item.identifier)) { () throws(ProviderError) in
            try passthrough.waitForReaders(ino: node.ino)
        }
        // Held from the staged copy's choice to the handle's own: the release of the last handle
        // before this one, racing it, would drop the staged copy this handle writes (a kernel
        // writer's bytes in it never committed: a cat-then-append loop lost appends).
        inodes.retainOpen(node)
        defer { if inodes.releaseOpen(node) { dropIdleSession(node) } }
        try beginWriting(node, item: item, truncating: truncating)
        // A writer whose first write must clear set-ID bits stays the daemon's: through the
        // kernel the bits would go at open, where ext4 keeps them until a write (an open for
        // writing alone, then close, leaves a set-user-ID file as it was).
        let clearsSetID = setIDToDrop(item, writer: caller) != nil
        let backing = try install(
            OpenFile(node: node, readFD: -1, writable: true), in: fi,
            passthroughFrom: passthrough.active && !clearsSetID ? stagedBacking(node) : nil, holding: true)
        if backing != nil { beganBacking(node) }
        return (backing, truncating || backing != nil ? setIDToDrop(item, writer: caller) : nil)
    }

    /// Answers an open from the executor, after clearing set-ID bits when asked.
    /// A writer's open off the request's thread, answered through `d`: joining passthrough
    /// readers where the provider can make their file live, else a staged copy (which waits for
    /// readers that hold the stored file).
    private func openWriterLater(
        _ d: DeferredReply, _ opened: fuse_file_info, _ node: InodeNode, _ item: Item, truncating: Bool, caller: Caller
    ) {
        var info = opened
        do throws(RequestError) {
            let handle: (Int32?, (ItemIdentifier, UInt16)?)
            if let joined = try openJoiningReaders(node, item, truncating: truncating, caller: caller, &info) {
                handle = joined
            } else {
                handle = try openForWriting(node, item, truncating: truncating, caller: caller, &info)
            }
            let (backing, drop) = handle
            answerLater(d, info, node, backing: backing, drop: drop)
        } catch {
            d.error(report("open", error))
        }
    }

    private func answerLater(
        _ d: DeferredReply, _ opened: fuse_file_info, _ node: InodeNode, backing: Int32?,
        drop: (ItemIdentifier, UInt16)?
    ) {
        executor.run { [self] in
            if let drop { await dropSetID(node, drop) }
            var info = opened
            if let backing { passthrough.replyOpen(d, &info, backingID: backing) } else { d.open(&info) }
        }
    }

    /// The open reply: with FOPEN_PASSTHROUGH and the backing id for a passthrough handle.
    private func answerOpen(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>, backing: Int32?) {
        if let backing {
            passthrough.replyOpen(reply, fi, backingID: backing)
        } else {
            reply.open(fi)
        }
    }

    /// Makes sure the node has a live staging file, copying the stored contents unless truncating.
    private func beginWriting(_ node: InodeNode, item: Item, truncating: Bool) throws(RequestError) {
        try node.sessionLock.withLock { _ throws(RequestError) in
            if let s = node.session, !s.committed {
                // O_TRUNC moves the times even of an empty file, as on ext4.
                if truncating { _ = s.truncate(to: 0); s.dirty = true }
                return
            }
            node.session = try restage(node, item: item, from: node.session, truncating: truncating)
        }
    }

    /// A fresh staging copy of the current contents (of a committed session, or of the store).
    /// Call with the node's sessionLock held.
    private func restage(_ node: InodeNode, item: Item?, from previous: WriteSession?, truncating: Bool) throws(RequestError) -> WriteSession {
        let subject: Subject = item.map { .item($0.identifier) } ?? .ino(node.ino)
        return try attempt(subject) { () throws(ProviderError) in
            if let previous {
                // O_TRUNC moves the times even of an empty file (ext4 does): a new version.
                let next =
                    truncating
                    ? try WriteSession.stage(in: stagingFiles, copying: nil as Int32?, dirty: true)
                    : try WriteSession.stage(in: stagingFiles, copying: previous, dirty: false)
                previous.handOver(to: next)
                // A copy-in's session (its release not in yet) told the replica of no writer: tell
                // it now, so other replicas' changes wait for this one's close too.
                if next.writer == nil, let openWriters, let identifier = item?.identifier ?? inodes.identifier(node.ino) {
                    next.writer = WriterRegistration(identifier, provider: openWriters)
                }
                return next
            }
            // A copy of the stored file (or none, truncating). The provider hears of the writer
            // before the version is read, so that another replica's version cannot land between
            // the two unnoticed: it waits for this writer's close, which decides.
            guard let identifier = item?.identifier ?? inodes.identifier(node.ino) else { throw ProviderError(.noSuchItem) }
            let writer = openWriters.map { WriterRegistration(identifier, provider: $0) }
            do throws(ProviderError) {
                let current = try provider.item(for: identifier)
                let session: WriteSession
                if truncating {
                    session = try WriteSession.stage(in: stagingFiles, copying: nil, dirty: true)
                } else {
                    let fd = try provider.openContents(of: current.identifier)
                    defer { close(fd) }
                    session = try WriteSession.stage(in: stagingFiles, copying: fd, dirty: false)
                }
                session.base = current.itemVersion
                session.writer = writer
                return session
            } catch {
                writer?.end()
                throw error
            }
        }
    }

    func read(_ reply: consuming Reply, _ size: Int, _ offset: Int, _ file: OpenFile) {
        var fd = file.readFD
        // A file open for writing anywhere reads from its staging file, so readers see writes.
        let session = file.node.sessionLock.withLock { _ in file.node.session }
        guard session != nil || fd >= 0 else { reply.error(EBADF); return }
        if session == nil, let arrival = file.arrival {
            // Downloading: wait for this read's range only (bounded; EIO if the server is gone).
            do throws(ProviderError) { try arrival.waitFor(Int64(offset)..<Int64(offset + size)) } catch {
                reply.error(report("read", RequestError(error, .ino(file.node.ino))))
                return
            }
        }
        let buf = ThreadBuffer.get(size)
        let n: Int
        if let session {
            n = session.read(into: buf, size, at: offset)
        } else if let window = file.window {
            n = pread(fd, buf, max(0, min(size, Int(window.upperBound - window.lowerBound) - offset)), off_t(window.lowerBound) + off_t(offset))
        } else {
            n = pread(fd, buf, size, off_t(offset))
        }
        if n < 0 { reply.error(errno); return }
        stats?.bytesRead(n)
        reply.buffer(buf, n)
    }

    /// A write request: its bytes are libfuse's buffer (memory, or a pipe spliced from /dev/fuse)
    /// and go to the staged copy at `offset` (`WriteSession.put`).
    func write(_ reply: consuming Reply, _ source: UnsafeMutablePointer<fuse_bufvec>, _ offset: Int, _ file: OpenFile) {
        guard file.writable else { reply.error(EBADF); return }
        let node = file.node
        // The bytes go in under the node's lock; the reply, the log line and the set-ID check
        // (a provider lookup) come after it, from what the lock's scope answered.
        let put: Result<(done: Int, firstWrite: Bool), RequestError> = node.sessionLock.withLock { _ in
            if node.session == nil || node.session!.committed {
                // Written again after a commit (another handle, or after flush): stage a fresh copy so
                // the stored version is never changed in place.
                do throws(RequestError) {
                    node.session = try restage(node, item: nil, from: node.session, truncating: false)
                } catch {
                    return .failure(error)
                }
            }
            let session = node.session!
            // Bytes that did land are acknowledged (a short write, as a local filesystem gives); the
            // next write then gets the error.
            let (done, e) = session.put(source, at: offset)
            if done == 0 && e != 0 {
                return .failure(RequestError(.posix(e, "write to staging file"), .ino(node.ino)))
            }
            session.dirty = true
            // The session's first write checks the set-ID bits: claimed here, checked below.
            let firstWrite = !session.setIDChecked
            session.setIDChecked = true
            return .success((done, firstWrite))
        }
        let done: Int
        let firstWrite: Bool
        switch put {
        case .failure(let error):
            reply.error(report("write", error))
            return
        case .success(let written):
            (done, firstWrite) = written
        }
        stats?.bytesWritten(done)
        if firstWrite, let id = inodes.identifier(node.ino), let item = try? provider.item(for: id),
            let change = setIDToDrop(item, writer: Caller(reply.req))
        {
            let d = reply.deferred()
            executor.run { [self, done] in
                await dropSetID(node, change)
                d.written(done)
            }
            return
        }
        reply.written(done)
    }

    /// close(): a new file is imported, a changed one becomes a new content version. The result is
    /// what close() returns to the program.
    func flush(_ reply: consuming Reply, _ file: OpenFile) {
        let copyingIn = inodes.copyIn(of: file.node) != nil
        guard file.writable || copyingIn else { reply.ok(); return }
        let d = reply.deferred()
        guard copyingIn else {
            perform("flush", d, mayBlock: true) { [self] () async throws(RequestError) in
                try await commit(file.node, durable: false)
                d.ok()
            }
            return
        }
        runMayBlock { [self] in
            do throws(RequestError) {
                try await commit(file.node, durable: false)
                d.ok()
            } catch {
                // The failed import queued the invalidation of the name the kernel cached at
                // create: close() returns once it has been sent, so the file is gone by then.
                let e = report("import", error)
                notifier.afterQueued { d.error(e) }
            }
        }
    }

    func fsync(_ reply: consuming Reply, _ file: OpenFile) {
        let d = reply.deferred()
        perform("fsync", d, mayBlock: true) { [self] () async throws(RequestError) in
            try await commit(file.node, durable: true)
            try await attempt(.ino(file.node.ino)) { () async throws(ProviderError) in try await provider.synchronize() }
            d.ok()
        }
    }

    func release(_ reply: consuming Reply, _ fi: UnsafeMutablePointer<fuse_file_info>) {
        guard let file = Bridge.handle(fi) else { reply.ok(); return }
        Unmanaged.passUnretained(file).release()
        let node = file.node
        // The handle stops counting before its backing file is let go: an open meanwhile then
        // joins that backing file or registers its own. The other way round, it found neither
        // a backing file nor the node free of other handles, and the daemon served it (a writer
        // opening right after close(2), about one test run in thirty under load).
        let last = inodes.releaseOpen(node)
        if file.passthrough { passthrough.released(ino: node.ino) }
        if let reading = file.reading { onDemand?.contentsClosed(of: reading) }
        reply.ok()
        guard last else { return }
        // Normally flush has committed already (the common case: drop the staged copy here,
        // without starting an action); a handle closed without one (e.g. the process was
        // killed) still gets its data kept.
        let settled: Bool? = node.sessionLock.withLock { _ in
            // Decided under the lock an opener stages under, after it counted its handle: a
            // writer that opened since `releaseOpen` may have taken this staged copy (as its
            // backing file, too); ending it then lost that writer's bytes (a cat-then-append
            // loop, one append in a few hundred).
            guard inodes.openCount(node) == 0 else { return nil }
            guard let s = node.session else { return true }
            if s.backing { return endBacking(node, s) }
            guard s.committed, !s.isCommitting else { return false }
            node.session = nil
            return true
        }
        guard let settled else { return }
        if settled, inodes.copyIn(of: node)?.placement == nil { return }
        runMayBlock { [self] in
            do throws(RequestError) { try await commit(node, durable: false) } catch { _ = report("release", error) }
            dropIdleSession(node)
        }
    }

    /// Lets go of the node's staged copy once no handle has the file open and nothing in the copy
    /// waits to be committed (a failed commit keeps it, for the next close to try again).
    func dropIdleSession(_ node: InodeNode) {
        node.sessionLock.withLock { _ in
            // Counted under the lock an opener stages under (see `release`).
            guard inodes.openCount(node) == 0 else { return }
            if let s = node.session, s.committed || !s.dirty && !s.changedSinceCommit() { node.session = nil }
        }
    }

    /// The staged file's modification time: its last write, or what the program set since.
    func stagedModificationTime(_ session: WriteSession) -> FileTime {
        stagedTimes(session).modified
    }

    /// The staged file's modification and change times (a write sets both to one instant).
    func stagedTimes(_ session: WriteSession) -> (modified: FileTime, changed: FileTime) {
        guard let st = session.reportedStatus() else { let now = FileTime.now(); return (now, now) }
        return (Attributes.fileTime(st.st_mtim), Attributes.fileTime(st.st_ctim))
    }

    /// Contents start to change (a session's first write, a truncate): set-user-ID goes, and
    /// set-group-ID where group execute is set, as the kernel does on a local filesystem. It
    /// leaves this to us (InitNegotiation). A root writer keeps them (CAP_FSETID on ext4). The
    /// kernel's cached mode is dropped before the caller replies. Nil when there is nothing to clear.
    func setIDToDrop(_ item: Item, writer: Caller) -> (ItemIdentifier, UInt16)? {
        OwnershipRules.clearingSetID(item, forWriter: writer).map { (item.identifier, $0) }
    }

    func dropSetID(_ node: InodeNode, _ change: (ItemIdentifier, UInt16)) async {
        do throws(ProviderError) {
            _ = try await provider.setAttributes(ofItemWithIdentifier: change.0, changes: AttributeChanges(posixPermissions: change.1))
        } catch {
            _ = report("write", RequestError(error, .item(change.0)))
        }
        notifier.invalidateAttributesNow(ino: node.ino)
    }

    // MARK: Truncation

    func truncate(staged node: InodeNode, to size: Int64) throws(RequestError) {
        try node.sessionLock.withLock { _ throws(RequestError) in
            guard let s = node.session else { throw RequestError(ProviderError(.noSuchItem), .ino(node.ino)) }
            let e = s.truncate(to: size)
            guard e == 0 else { throw RequestError(.posix(e, "truncate"), .ino(node.ino)) }
            s.dirty = true
        }
    }

    /// truncate/ftruncate. Through a writable handle (ftruncate) the staged copy changes and that
    /// handle's close commits it. By path (truncate) nobody closes anything afterwards, so the new
    /// version is committed at once: on the staged copy a closed handle may have left (the kernel
    /// sends its release after close() returned, possibly after this request), or on a fresh one.
    /// A file still being copied in changes its staged copy and is imported at its own close.
    func truncate(_ node: InodeNode, item: Item?, to size: Int64, throughWritableHandle: Bool) async throws(RequestError) {
        // Passthrough readers hold the stored file: it becomes the live one, which they see
        // truncated, as on ext4 (asked before the node's lock, which `Passthrough.admit` takes
        // under its own).
        let stored = item != nil && liveContents != nil ? passthrough.storedBacking(ino: node.ino) : nil
        let madeLive = try node.sessionLock.withLock { _ throws(RequestError) -> Bool in
            var madeLive = false
            if let item, let stored { madeLive = try adoptReadersFile(node, item, stored) }
            if node.session == nil || node.session!.committed {
                guard let item else { throw RequestError(ProviderError(.noSuchItem), .ino(node.ino)) }
                node.session = try restage(node, item: item, from: node.session, truncating: size == 0)
            }
            let session = node.session!
            let e = session.truncate(to: size)
            guard e == 0 else { throw RequestError(.posix(e, "truncate"), .ino(node.ino)) }
            session.dirty = true
            return madeLive
        }
        if madeLive { passthrough.madeLive(ino: node.ino) }
        // The commit (an await on the provider) runs after the lock is let go.
        guard item != nil, !throughWritableHandle else { return }
        try await commit(node, durable: false)
        dropIdleSession(node)
    }
}
