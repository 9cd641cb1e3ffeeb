import CFuse
import Foundation
import Glibc
import DocFSProvider

// The commit at close (flush), fsync, a truncate by path and the last release: a new file's
// staged copy is imported, a changed one's becomes a new content version. Decided and claimed
// under the node's `sessionLock`, handed to the provider after it is let go.
extension Bridge {
    /// Hands the staged file to the provider when it has news: the import of a new file, or a
    /// new content version of an existing one.
    func commit(_ node: InodeNode, durable: Bool) async throws(RequestError) {
        let copyIn = inodes.copyIn(of: node)
        let placement = copyIn?.placement
        // The lock is held to decide and claim, never across the provider's action (an await):
        // the claim (`committed`, `beginCommit`) is what keeps writers and other commits off.
        let start: CommitStart = node.sessionLock.withLock { _ in
            if let s = node.session, !s.committed, s.backing || s.isCommitting { return .busy(s) }
            guard let session = node.session, !session.committed, session.dirty || placement != nil else {
                return .nothingToCommit(claimedBy: node.session.flatMap { $0.committed ? $0 : nil })
            }
            // Claim it: a write arriving now stages a fresh copy instead of changing this file.
            session.committed = true
            session.dirty = false
            session.beginCommit()
            return .claimed(session)
        }
        let session: WriteSession
        switch start {
        case .busy(let s):
            // The kernel writes this staged file (passthrough): a copy of it goes in. Or such a
            // copy is going in now: wait for it, then see what is left to do.
            guard s.isCommitting else { return try await commitCopy(node, s, durable: durable) }
            await s.waitForCommit()
            return try await commit(node, durable: durable)
        case .nothingToCommit(let claimed):
            // Another request (a release racing a truncate by path) is committing this copy: its
            // result is ours too, so wait for it rather than answer with the old contents.
            if let claimed, claimed.isCommitting { await claimed.waitForCommit() }
            return
        case .claimed(let claimed):
            session = claimed
        }
        defer { session.endCommit() }
        if durable { session.sync() }

        if let copyIn, let placement {
            _ = try await importNewFile(node, session, copyIn, placement) { parentID, subject, attributes throws(RequestError) in
                if let smallFiles, let bytes = session.memoryContents() {
                    // A small file still in memory: its bytes, no staged file.
                    return try await attempt(subject) { () async throws(ProviderError) in
                        try await smallFiles.importDocument(
                            contents: bytes, named: placement.name, toParentItemIdentifier: parentID,
                            attributes: attributes)
                    }
                }
                // The staged file is handed over (by path to the store, security-scoped to
                // another provider) and gone, whatever the provider left, once it returns.
                let sealed = try attempt(subject) { () throws(ProviderError) in try session.stagedPath() }
                return try await attempt(subject) { () async throws(ProviderError) in
                    try await importStaged(sealed: sealed, name: placement.name, into: parentID, attributes: attributes)
                }
            }
            return
        }
        guard let identifier = inodes.identifier(node.ino) else { return }
        if inodes.orphanedItem(node) != nil {
            // Deleted or replaced while open: what was written goes with the unlinked file, as
            // on a local filesystem; close() succeeds.
            // The staged copy stays readable through the handles still open, and goes at the last.
            node.sessionLock.withLock { _ in
                session.committed = false; session.dirty = false
            }
            return
        }
        do throws(RequestError) {
            // The staged file becomes the stored contents; keep a name for it so the session
            // (whose path the provider takes) can still be unlinked if the provider refuses.
            let url = URL(
                fileURLWithPath: try attempt(.item(identifier)) { () throws(ProviderError) in try session.stagedPath() },
                isDirectory: false)
            let base = node.sessionLock.withLock { _ in session.base }
            let item = try await attempt(.item(identifier)) { () async throws(ProviderError) in
                try await provider.modifyContents(ofItemWithIdentifier: identifier, baseVersion: base, from: url)
            }
            node.sessionLock.withLock { _ in session.landed = item.itemVersion }
        } catch {
            // Contents the provider refused (not a valid document, a type the folder does not
            // take) are not kept: the file reads as its stored version again. Any other failure
            // keeps the staged bytes for the next close to try again.
            let refused = error.error.code == .corruptFile || error.error.code == .typeNotAllowed
            node.sessionLock.withLock { _ in
                guard node.session === session else { return }
                session.committed = false
                if refused { node.session = nil } else { session.dirty = true }
            }
            if refused { notifier.invalidateContents(ino: node.ino) }
            throw error
        }
    }

    /// Imports a new file (`copyIn`, to go at `placement`) with the staged file's times: `made`
    /// hands the provider its contents (given the folder, the subject and the attributes) and
    /// returns the item, which the node is then bound to, with the copy-in's xattrs. Refused or
    /// failed, nothing of it stays in the tree.
    func importNewFile(
        _ node: InodeNode, _ session: WriteSession, _ copyIn: CopyIn, _ placement: CopyIn.Placement,
        _ made: (ItemIdentifier, Subject, NewItemAttributes) async throws(RequestError) -> Item
    ) async throws(RequestError) -> Item {
        guard let parentID = inodes.identifier(placement.parent) else {
            dropCopyIn(node, placement)
            throw RequestError(ProviderError(.noSuchItem, "the folder was removed during the copy"), .ino(node.ino))
        }
        let subject = Subject.child(parentID, placement.name)
        do throws(RequestError) {
            let times = stagedTimes(session)
            let attributes = copyIn.importAttributes(stagedModificationTime: times.modified, stagedChangeTime: times.changed)
            let item = try await made(parentID, subject, attributes)
            node.sessionLock.withLock { _ in session.landed = item.itemVersion }
            let landed = inodes.bind(node, to: item.identifier) ?? copyIn
            await storeExtendedAttributes(of: landed, on: item.identifier, subject: subject)
            return item
        } catch {
            dropCopyIn(node, placement)
            throw error
        }
    }

    /// A new file whose import failed leaves the tree, and the kernel forgets its name (cached
    /// since the create). Queued: the kernel may hold the folder locked for a request of its own.
    func dropCopyIn(_ node: InodeNode, _ placement: CopyIn.Placement) {
        inodes.dropPending(node)
        notifier.invalidateEntry(parent: placement.parent, name: placement.name)
    }
}

/// What `commit` found under the node's `sessionLock`; it acts on it after the lock is let go.
private enum CommitStart {
    /// A backing file (passthrough) not being committed, or a session being committed now.
    case busy(WriteSession)
    /// Nothing dirty; `claimedBy` is a committed session whose commit may still be running.
    case nothingToCommit(claimedBy: WriteSession?)
    /// This commit claimed the session.
    case claimed(WriteSession)
}
