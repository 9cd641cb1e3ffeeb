import CFuse
import Foundation
import Glibc
import DocFSProvider

// A writer the kernel serves itself (`Passthrough`): its staged copy (or the live file the
// readers held, `openJoiningReaders`) is the backing file. Each close(2) commits a copy of it, and the last release another copy if it
// changed since (writes through a dup'd descriptor). The staged file itself never becomes a
// stored version: a shared mapping of it outlives close(2) and its release, and would change
// that version in place; such writes after the last close are lost with the staged file
// (through the daemon they would come as write requests).
extension Bridge {
    /// The node's staged copy as a backing file for a writer: a staged file (not bytes in memory)
    /// the daemon did not hand to the provider.
    func stagedBacking(_ node: InodeNode) -> Int32? {
        node.sessionLock.withLock { _ in
            guard let s = node.session, !s.committed, !s.isCommitting else { return nil }
            return s.backingFD
        }
    }

    /// A writer opening a stored file that passthrough readers hold (their backing file is the
    /// stored version): the kernel takes every open of the file onto that backing file, so it
    /// becomes the file's live one (`LiveContentsProvider.detachLiveContents` keeps the version it
    /// held, byte-exact) and this node's write session, which the kernel writes in place beside
    /// the readers: no wait, and the readers see the writes as on ext4 (`tail -f`). Returns the
    /// backing id (nil when the readers all went meanwhile and the daemon serves this writer) and
    /// set-ID bits to clear before the reply; nil when no such readers are there or the provider
    /// cannot make the file live (the caller waits for the readers then, as before).
    func openJoiningReaders(
        _ node: InodeNode, _ item: Item, truncating: Bool, caller: Caller,
        _ fi: UnsafeMutablePointer<fuse_file_info>
    ) throws(RequestError) -> (Int32?, (ItemIdentifier, UInt16)?)? {
        // Asked before the node's lock: `Passthrough.admit` takes that lock under its own.
        guard liveContents != nil, let stored = passthrough.storedBacking(ino: node.ino) else { return nil }
        // Held from the live file's choice to the handle's own, as in `openForWriting`.
        inodes.retainOpen(node)
        defer { if inodes.releaseOpen(node) { dropIdleSession(node) } }
        let made: Bool = try node.sessionLock.withLock { _ throws(RequestError) -> Bool in try adoptReadersFile(node, item, stored) }
        guard made else { return nil }
        // Another item's passthrough readers took the same file before its other names went to
        // the kept version (a conflicted copy opened meanwhile): a write in place would show
        // there. The live file is dropped unwritten (its versions are kept) and the writer waits
        // as for a refusal; later opens of that item get the kept file. Asked outside the node's
        // lock (`Passthrough` takes it under its own).
        if passthrough.sharedElsewhere(ino: node.ino) {
            node.sessionLock.withLock { _ in node.session = nil }
            return nil
        }
        // O_TRUNC empties the live file: the readers see it, as on ext4.
        if truncating {
            node.sessionLock.withLock { _ in
                guard let s = node.session else { return }
                _ = s.truncate(to: 0)
                s.dirty = true
            }
        }
        passthrough.madeLive(ino: node.ino)
        let backing = try install(
            OpenFile(node: node, readFD: -1, writable: true), in: fi,
            passthroughFrom: passthrough.active ? stagedBacking(node) : nil, holding: true)
        return (backing, truncating || backing != nil ? setIDToDrop(item, writer: caller) : nil)
    }

    /// Makes the stored file that passthrough readers of `node` hold (`stored`, its device and
    /// inode numbers) the node's live file and write session, the kernel's to write (call with
    /// the node's sessionLock held; tell `passthrough.madeLive` after letting go of it). False
    /// when the node has a session already or the provider cannot.
    func adoptReadersFile(_ node: InodeNode, _ item: Item, _ stored: (device: UInt64, inode: UInt64)) throws(RequestError) -> Bool {
        // Readers the kernel serves from the stored file have no staged copy beside them.
        guard let liveContents, node.session == nil else { return false }
        // The provider hears of the writer before the version is kept (see `restage`).
        let writer = openWriters.map { WriterRegistration(item.identifier, provider: $0) }
        do throws(RequestError) {
            var found = try attempt(.item(item.identifier)) { () throws(ProviderError) -> LiveContents? in
                try liveContents.detachLiveContents(of: item.identifier, device: stored.device, inode: stored.inode)
            }
            // Not the stored file any more (another replica's version replaced it): the current
            // version is brought into it instead (downloaded first where it is not here; the
            // provider heard of the writer, so no other version lands meanwhile).
            if found == nil, let readers = passthrough.storedDescriptor(ino: node.ino) {
                defer { close(readers) }
                found = try attempt(.item(item.identifier)) { () throws(ProviderError) -> LiveContents? in
                    let current = try provider.item(for: item.identifier)
                    let fd = try provider.openContents(of: current.identifier)
                    defer { close(fd) }
                    return try liveContents.adoptStaleContents(
                        of: item.identifier, readersFile: readers, current: fd, version: current.itemVersion)
                }
            }
            guard let live = found else {
                writer?.end()
                return false
            }
            let session: WriteSession
            if let descriptor = live.descriptor {
                session = WriteSession.adopting(descriptor: descriptor)
            } else {
                session = try attempt(.item(item.identifier)) { () throws(ProviderError) in try WriteSession.adopting(live.path) }
            }
            session.base = live.item.itemVersion
            session.writer = writer
            // The readers' handles write nothing, but a writer joining them does, through the
            // kernel: commits take copies, and the stamp tells what changed.
            session.backing = true
            session.committedStamp = session.stamp()
            node.session = session
            return true
        } catch {
            writer?.end()
            throw error
        }
    }

    /// The kernel took the staged copy as a writer's backing file (called before the open reply).
    func beganBacking(_ node: InodeNode) {
        node.sessionLock.withLock { _ in
            guard let s = node.session, !s.backing else { return }
            s.backing = true
            // Writes from here on move the stamp; one the daemon had not committed is `dirty`.
            s.committedStamp = s.stamp()
        }
    }

    /// The last handle of a backing file went (call with the node's sessionLock held). True when
    /// nothing is left to commit (the staged copy is dropped); else a last copy goes in.
    func endBacking(_ node: InodeNode, _ s: WriteSession) -> Bool {
        guard !s.isCommitting, !s.dirty, !s.changedSinceCommit() else { return false }
        node.session = nil
        // A refused copy: the kernel's attributes were the staged file's.
        if s.copyRefused { notifier.invalidateContents(ino: node.ino) }
        return true
    }

    /// Commits a copy of a backing file that changed since its last copy: the kernel may write it
    /// again through a dup'd descriptor, which must land in the next version, never in this one.
    func commitCopy(_ node: InodeNode, _ session: WriteSession, durable: Bool) async throws(RequestError) {
        // Decided and claimed under the node's lock; the copy and the provider's action (an
        // await) after it: `beginCommit` keeps other commits of this session off meanwhile.
        let start: CopyStart = node.sessionLock.withLock { _ in
            guard node.session === session, session.backing, !session.isCommitting else { return .notBacking }
            let stamp = session.stamp()
            guard session.dirty || stamp != session.committedStamp else { return .unchanged }
            session.dirty = false
            session.beginCommit()
            return .claimed(stamp: stamp, base: session.base)
        }
        let stamp: WriteSession.Stamp?
        let base: ItemVersion?
        switch start {
        case .notBacking: return try await commit(node, durable: durable)
        case .unchanged: return
        case .claimed(let claimedStamp, let claimedBase): (stamp, base) = (claimedStamp, claimedBase)
        }
        defer { session.endCommit() }
        if let copyIn = inodes.copyIn(of: node) {
            // A new file the kernel writes (`-o passthrough_create`): a copy is imported.
            if let placement = copyIn.placement {
                return try await importCopy(node, session, copyIn, placement, stamp: stamp, durable: durable)
            }
            // Unlinked, or its import refused: the writes go with it.
            node.sessionLock.withLock { _ in session.committedStamp = stamp }
            return
        }
        guard let identifier = inodes.identifier(node.ino) else { return }
        if inodes.orphanedItem(node) != nil {
            // Deleted or replaced while open: the writes go with the unlinked file.
            node.sessionLock.withLock { _ in session.committedStamp = stamp }
            return
        }
        do throws(RequestError) {
            let copy = try attempt(.item(identifier)) { () throws(ProviderError) in
                try session.copy(in: stagingFiles, durable: durable)
            }
            let url = URL(fileURLWithPath: copy.path, isDirectory: false)
            let item = try await attempt(.item(identifier)) { () async throws(ProviderError) in
                try await provider.modifyContents(ofItemWithIdentifier: identifier, baseVersion: base, from: url)
            }
            copy.committed = true // the provider's now: not unlinked
            node.sessionLock.withLock { _ in
                session.base = item.itemVersion
                session.landed = item.itemVersion
                session.committedStamp = stamp
                session.copyRefused = false
            }
        } catch {
            // Any failure but a refusal is tried again at the next close.
            guard error.error.code == .corruptFile || error.error.code == .typeNotAllowed else {
                node.sessionLock.withLock { _ in session.dirty = true }
                throw error
            }
            // Refused contents are not kept: the file reads as its stored version again at once,
            // as through the daemon. The kernel keeps the staged file while the handle is open,
            // so the stored version is copied back into it (a later write lands on top of that).
            node.sessionLock.withLock { _ in
                session.copyRefused = true
                if let current = try? provider.item(for: identifier), let fd = try? provider.openContents(of: identifier) {
                    defer { close(fd) }
                    if session.truncate(to: 0) == 0, let staged = session.backingFD,
                        (try? FileDescriptors.copyAll(from: fd, to: staged, what: "restore staged file")) != nil
                    {
                        session.setModificationTime(current.modificationTime)
                    }
                }
                session.committedStamp = session.stamp()
            }
            notifier.invalidateContents(ino: node.ino)
            throw error
        }
    }
}

extension Bridge {
    /// The import of a new file whose staged file the kernel writes (`-o passthrough_create`,
    /// called from `commitCopy` with the commit claimed): a copy of it goes in, with the copy-in's
    /// owner, mode and xattrs and the staged file's times; later closes commit copies as for any
    /// passthrough writer. Refused or failed, the file leaves the tree, as without passthrough.
    fileprivate func importCopy(
        _ node: InodeNode, _ session: WriteSession, _ copyIn: CopyIn, _ placement: CopyIn.Placement,
        stamp: WriteSession.Stamp?, durable: Bool
    ) async throws(RequestError) {
        do throws(RequestError) {
            let item = try await importNewFile(node, session, copyIn, placement) { parentID, subject, attributes throws(RequestError) in
                let copy = try attempt(subject) { () throws(ProviderError) in try session.copy(in: stagingFiles, durable: durable) }
                // Handed over by path and gone once the import returns, whatever the provider did.
                copy.committed = true
                return try await attempt(subject) { () async throws(ProviderError) in
                    try await importStaged(sealed: copy.path, name: placement.name, into: parentID, attributes: attributes)
                }
            }
            node.sessionLock.withLock { _ in
                session.base = item.itemVersion
                session.committedStamp = stamp
            }
        } catch {
            // Refused or failed: the open handles keep the bytes.
            node.sessionLock.withLock { _ in session.committedStamp = stamp }
            throw error
        }
    }
}

/// What `commitCopy` found under the node's `sessionLock`.
private enum CopyStart {
    /// No longer this node's backing session, or its copy is going in now: `commit` decides.
    case notBacking
    /// Nothing written since the last copy.
    case unchanged
    /// This call claimed the copy: the staged file's stamp and the version it was staged from.
    case claimed(stamp: WriteSession.Stamp?, base: ItemVersion?)
}
