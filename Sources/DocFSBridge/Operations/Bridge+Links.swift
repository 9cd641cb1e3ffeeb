import CFuse
import Foundation
import Glibc
import DocFSProvider

// Hard links: link(2), and the removal and move of one name of an item that has several, for a
// provider that keeps them (`HardLinkProvider`). An item has one identifier, so one inode, under
// all its names.
extension Bridge {
    /// `link(2)`: `ino` gets the name `cname` in `newParent`. Refused with EPERM by a provider
    /// without hard links, for a folder, and by ext4's protected_hardlinks rule; with EACCES
    /// without write and search on the folder or its `add` capability.
    func link(_ reply: consuming Reply, _ ino: UInt64, _ newParent: UInt64, _ cname: UnsafePointer<CChar>) {
        do throws(RequestError) {
            let subject: Subject = inodes.identifier(newParent).map { .child($0, String(cString: cname)) } ?? .ino(newParent)
            guard let links = hardLinks else {
                throw RequestError(ProviderError(.notPermitted, "this provider keeps no hard links"), subject)
            }
            let caller = Caller(reply.req)
            // A file still being copied in (created, not closed) is imported first, as its
            // close would: ext4 links a file while it is being written.
            let owned = try permissionSubject(of: ino)
            let stored = owned.item
            let kind = stored?.kind ?? .file
            let (parentItem, name) = try attempt(subject) { () throws(ProviderError) -> (Item, String) in
                guard let parentID = inodes.identifier(newParent) else { throw ProviderError(.noSuchItem) }
                let name = try Bridge.name(cname)
                let parentItem = try provider.item(for: parentID)
                guard parentItem.kind == .folder else { throw ProviderError(.notDirectory, "'\(parentItem.filename)' is not a folder") }
                if kind == .folder { throw ProviderError(.notPermitted, "folders cannot be hard-linked") }
                if name == "." || name == ".." { throw ProviderError(.filenameCollision, "reserved name") }
                if (try? provider.childItem(named: name, in: parentID)) != nil || inodes.pendingChild(parent: newParent, name: name) != nil {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists")
                }
                try Bridge.requireMayLink(owned, kind: kind, caller: caller)
                try PermissionCheck.requireChange(in: parentItem, for: caller)
                try CapabilityCheck.add(into: parentItem)
                try checkTrashRules(addingTo: parentItem, name: name)
                // An item whose one name is in the trash (one of several names may be there).
                if options.trash, let stored, stored.linkCount <= 1, isTrashOrInTrash(stored) {
                    throw ProviderError(.notPermitted, "an item in the trash gets no new names (restore it first)")
                }
                try provider.admitItem(named: name, kind: kind, into: parentID)
                return (parentItem, name)
            }
            let d = reply.deferred()
            perform("link", d) { [self] () async throws(RequestError) in
                if stored == nil, let node = inodes.node(ino) { try await commit(node, durable: false) }
                guard let identifier = inodes.identifier(ino) else { throw RequestError(ProviderError(.noSuchItem, "the file is gone"), subject) }
                let linked = try await attempt(subject) { () async throws(ProviderError) in
                    try await links.linkItem(withIdentifier: identifier, toParentItemIdentifier: parentItem.identifier, name: name)
                }
                let node = inodes.remember(linked.identifier)
                var e = entry(for: linked, node: node, cacheName: cachesNames(below: parentItem))
                d.entry(&e)
            }
        } catch {
            reply.error(report("link", error))
        }
    }

    /// ext4's `fs.protected_hardlinks` (on by default, and on where the sysctl cannot be read):
    /// someone other than the owner (and root) may link only a regular file they may read and
    /// write that is neither set-user-ID nor set-group-ID and group-executable (EPERM).
    static func requireMayLink(_ item: some PermissionSubject, kind: ItemKind, caller: Caller) throws(ProviderError) {
        guard protectedHardlinks, !caller.isRoot, caller.uid != item.ownerID else { return }
        let mode = item.permissionBits
        let safe =
            kind == .file && mode & 0o4000 == 0 && mode & 0o2010 != 0o2010
            && PermissionCheck.allows(PermissionCheck.read | PermissionCheck.write, on: item, for: caller)
        guard safe else {
            throw ProviderError(
                .notPermitted,
                "protected_hardlinks: uid \(caller.uid) may link only its own files, or a regular file it may read and write that is not set-ID")
        }
    }

    /// `/proc/sys/fs/protected_hardlinks`, read once.
    static let protectedHardlinks: Bool = {
        guard let text = try? String(contentsOfFile: "/proc/sys/fs/protected_hardlinks", encoding: .utf8) else { return true }
        return text.trimmingCharacters(in: .whitespacesAndNewlines) != "0"
    }()

    /// `unlink` of one of several names of `item` (checked by the caller): the other names stay,
    /// and so does the inode.
    func removeName(
        _ d: DeferredReply, _ links: any HardLinkProvider, op: String, name: String, in parentItem: Item, item: Item,
        subject: Subject
    ) {
        perform(op, d) { [self] () async throws(RequestError) in
            try await attempt(subject) { () async throws(ProviderError) in
                try await links.removeName(name, inParentItemIdentifier: parentItem.identifier, ofItemWithIdentifier: item.identifier)
            }
            if let node = inodes.knownNode(item.identifier) { notifier.invalidateAttributesNow(ino: node.ino) }
            d.ok()
        }
    }

    /// `rename` of one name of an item with several, or over such a name (checked by the caller).
    func moveName(
        _ d: DeferredReply, _ links: any HardLinkProvider, name: String, from fromParent: Item, item: Item,
        to toParent: Item, newName: String, replaced: Item?, subject: Subject
    ) {
        perform("rename", d) { [self] () async throws(RequestError) in
            _ = try await attempt(subject) { () async throws(ProviderError) in
                try await links.moveName(
                    name, inParentItemIdentifier: fromParent.identifier, ofItemWithIdentifier: item.identifier,
                    toParentItemIdentifier: toParent.identifier, newName: newName)
            }
            if let replaced {
                if replaced.linkCount > 1 {
                    if let node = inodes.knownNode(replaced.identifier) { notifier.invalidateAttributesNow(ino: node.ino) }
                } else {
                    inodes.orphan(replaced)
                }
            }
            if let node = inodes.knownNode(item.identifier) { notifier.invalidateAttributesNow(ino: node.ino) }
            d.ok()
        }
    }
}
