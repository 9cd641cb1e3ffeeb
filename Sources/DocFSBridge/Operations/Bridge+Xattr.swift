import CFuse
import Foundation
import Glibc
import DocFSProvider

// Extended attributes: the item's provider metadata as read-only `user.docfs.*` attributes, with
// tags and favourite rank settable (setTagData / setFavoriteRank).
extension Bridge {
    static let tagsAttribute = "user.docfs.tags"
    static let favoriteRankAttribute = "user.docfs.favorite-rank"
    static let syncAttribute = "user.docfs.sync"
    static let statusAttribute = "user.docfs.status"
    static let conflictAttribute = "user.docfs.conflict"
    static let typeAttribute = "user.docfs.type"
    static let conformsToAttribute = "user.docfs.conforms-to"
    /// A replica's contents on demand: whether a file's bytes are here ("yes"/"no"), whether the
    /// item is kept downloaded (set to pin, remove to unpin: `docfs pin`), and a write-only
    /// trigger that drops downloaded contents the server has (`docfs evict`).
    static let downloadedAttribute = "user.docfs.downloaded"
    static let pinnedAttribute = "user.docfs.pinned"
    static let evictAttribute = "user.docfs.evict"

    private static func format(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// The attributes an item shows, in listing order. `withSync: false` leaves out a replica's
    /// sync state and status, which cost a query and a JSON encoding: getxattr asks for them by name.
    /// `typed: false` (listxattr, another attribute asked for): the type's values are left as
    /// stored, since a new file's type may wait for its first reader (`Provider.contentType(of:)`).
    func providerAttributes(of item: Item, withSync: Bool = true, typed: Bool = true) -> [(String, String)] {
        let type = typed ? provider.contentType(of: item) : item.contentType
        var list: [(String, String)] = [
            ("user.docfs.identifier", item.identifier.rawValue),
            (Self.typeAttribute, type.identifier),
            (Self.conformsToAttribute, provider.supertypes(of: type).map(\.identifier).joined(separator: ", ")),
            ("user.docfs.document-size", String(item.documentSize)),
            ("user.docfs.created", Self.format(item.creationDate)),
            ("user.docfs.modified", Self.format(item.contentModificationDate)),
            ("user.docfs.capabilities", item.capabilities.wordList.joined(separator: ", ")),
            ("user.docfs.version", "content \(item.itemVersion.contentVersion), metadata \(item.itemVersion.metadataVersion)"),
        ]
        if let used = item.lastUsedDate { list.append(("user.docfs.last-used", Self.format(used))) }
        if let tags = item.tagData { list.append((Self.tagsAttribute, String(decoding: tags, as: UTF8.self))) }
        if let rank = item.favoriteRank { list.append((Self.favoriteRankAttribute, String(rank))) }
        if withSync, let sync = replicaStatus?.syncState(of: item.identifier) {
            list.append((Self.syncAttribute, sync))
            if item.kind == .file { list.append((Self.downloadedAttribute, item.isDownloaded ? "yes" : "no")) }
        }
        if onDemand?.isPinned(item.identifier) == true { list.append((Self.pinnedAttribute, "yes")) }
        if withSync, let conflict = replicaStatus?.conflict(of: item.identifier) { list.append((Self.conflictAttribute, conflict)) }
        if withSync, item.identifier == .rootContainer, let status = replicaStatus?.syncStatus() { list.append((Self.statusAttribute, status)) }
        // An item with several names: where its name at the top of the trash came from, if any.
        if item.parentIdentifier == .trashContainer || item.linkCount > 1, let origin = trashOrigin(of: item.identifier) {
            let folder = path(of: origin.parentIdentifier)
            list.append(("user.docfs.trashed-from", folder == "/" ? "/" + origin.filename : folder + "/" + origin.filename))
        }
        return list
    }

    private func replySized(_ reply: consuming Reply, _ bytes: [UInt8], _ size: Int) {
        if size == 0 { reply.xattrSize(bytes.count); return }
        guard bytes.count <= size else { reply.error(ERANGE); return }
        let p = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        defer { p.deallocate() }
        p.copyMemory(from: bytes, byteCount: bytes.count)
        reply.buffer(p, bytes.count)
    }

    /// The namespace of an attribute name: docfs's own, a stored `user.*` one, or refused.
    enum AttributeSpace { case docfs, user, refused }

    @inline(__always)
    static func space(of name: String) -> AttributeSpace {
        if name.hasPrefix(ExtendedAttributes.docfsPrefix) { return .docfs }
        if name.hasPrefix(ExtendedAttributes.userPrefix), name.utf8.count > ExtendedAttributes.userPrefix.utf8.count { return .user }
        return .refused
    }

    func getxattr(_ reply: consuming Reply, _ ino: UInt64, _ cname: UnsafePointer<CChar>, _ size: Int) {
        // Only user.* exists here: security.*, system.* (ACLs) and trusted.* are namespaces this
        // filesystem does not support, answered before any lookup. EOPNOTSUPP (not ENODATA) is
        // what such a filesystem gives, and tools take it as "none on this device": `ls -l` then
        // stops asking for the SELinux label and ACL of every entry (one round trip each).
        if strncmp(cname, "user.", 5) != 0 { reply.error(EOPNOTSUPP); return }
        let name = String(cString: cname)
        let caller = Caller(reply.req)
        if let (_, copyIn) = inodes.copyIn(ino) {
            do throws(ProviderError) {
                try PermissionCheck.requireUserAttribute(write: false, on: copyIn, kind: .file, for: caller)
            } catch {
                reply.error(report("getxattr", RequestError(error, .ino(ino))))
                return
            }
            guard let value = copyIn.extendedAttributes[name] else { reply.error(ENODATA); return }
            replySized(reply, Array(value), size)
            return
        }
        do throws(RequestError) {
            let item = try self.item(ino)
            try attempt(.item(item.identifier)) { () throws(ProviderError) in
                try PermissionCheck.requireUserAttribute(write: false, on: item, kind: item.kind, for: caller)
            }
            switch Self.space(of: name) {
            case .docfs:
                let found: String?
                switch name {
                case Self.syncAttribute: found = replicaStatus?.syncState(of: item.identifier)
                case Self.downloadedAttribute:
                    found = item.kind == .file && replicaStatus?.syncState(of: item.identifier) != nil ? (item.isDownloaded ? "yes" : "no") : nil
                case Self.conflictAttribute: found = replicaStatus?.conflict(of: item.identifier)
                case Self.statusAttribute: found = item.identifier == .rootContainer ? replicaStatus?.syncStatus() : nil
                default:
                    let typed = name == Self.typeAttribute || name == Self.conformsToAttribute
                    found = providerAttributes(of: item, withSync: false, typed: typed).first(where: { $0.0 == name })?.1
                }
                guard let value = found else {
                    reply.error(ENODATA)
                    return
                }
                replySized(reply, Array(value.utf8), size)
            case .user:
                let value = try attempt(.item(item.identifier)) { () throws(ProviderError) in
                    try storedAttribute(named: name, of: item.identifier)
                }
                replySized(reply, Array(value), size)
            case .refused:
                reply.error(EOPNOTSUPP) // "user." alone: not a name in any namespace
            }
        } catch {
            if error.error.code == .noSuchAttribute { reply.error(ENODATA); return }
            reply.error(error.error.code == .noSuchItem && inodes.node(ino) != nil ? ENODATA : report("getxattr", error))
        }
    }

    func listxattr(_ reply: consuming Reply, _ ino: UInt64, _ size: Int) {
        if let (_, copyIn) = inodes.copyIn(ino) {
            let names = copyIn.extendedAttributes.keys.sorted()
            var bytes: [UInt8] = []
            for name in names { bytes += Array(name.utf8) + [0] }
            replySized(reply, bytes, size)
            return
        }
        do throws(RequestError) {
            let item = try self.item(ino)
            var bytes: [UInt8] = []
            for (name, _) in providerAttributes(of: item, typed: false) { bytes += Array(name.utf8) + [0] }
            let stored = try attempt(.item(item.identifier)) { () throws(ProviderError) in
                try storedAttributeNames(of: item.identifier)
            }
            for name in stored { bytes += Array(name.utf8) + [0] }
            replySized(reply, bytes, size)
        } catch {
            if inodes.node(ino) != nil, inodes.identifier(ino) == nil { replySized(reply, [], size); return }
            reply.error(report("listxattr", error))
        }
    }

    /// setxattr (flags: XATTR_CREATE → EEXIST if set, XATTR_REPLACE → ENODATA if not) and
    /// removexattr (ENODATA if not set). `user.docfs.tags` and `user.docfs.favorite-rank` call the
    /// provider actions; other `user.docfs.*` are read-only (EPERM); other `user.*` are stored with
    /// the item; `security.*`, `trusted.*`, `system.*` are refused (EOPNOTSUPP).
    func setxattr(
        _ reply: consuming Reply, _ ino: UInt64, _ cname: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer,
        remove: Bool, flags: Int32
    ) {
        let op = remove ? "removexattr" : "setxattr"
        let name = String(cString: cname)
        let mode: ExtendedAttributes.WriteMode = flags & Self.xattrCreate != 0 ? .create : (flags & Self.xattrReplace != 0 ? .replace : .upsert)
        let bytes = Data(value)
        let caller = Caller(reply.req)
        do throws(RequestError) {
            if let (node, copyIn) = inodes.copyIn(ino) {
                let kept = try attempt(.ino(ino)) { () throws(ProviderError) -> Bool in
                    if Self.space(of: name) != .refused {
                        try PermissionCheck.requireUserAttribute(write: true, on: copyIn, kind: .file, for: caller)
                    }
                    // Kept until the import lands; nil when it landed meanwhile: then the item takes it below.
                    return try inodes.updateCopyIn(node) { (c) throws(ProviderError) in
                        try c.setExtendedAttribute(name, to: remove ? nil : bytes, mode: mode)
                    } != nil
                }
                if kept { reply.ok(); return }
            }
            let item = try self.item(ino)
            let subject = Subject.item(item.identifier)
            if Self.space(of: name) != .refused {
                try attempt(subject) { () throws(ProviderError) in
                    try PermissionCheck.requireUserAttribute(write: true, on: item, kind: item.kind, for: caller)
                }
            }
            switch Self.space(of: name) {
            case .refused:
                throw RequestError(ProviderError(.unsupported, "only user.* extended attributes can be set (not \(name))"), subject)
            case .user:
                if !remove, bytes.count > ExtendedAttributes.maxValueBytes {
                    throw RequestError(
                        ProviderError(.invalidArgument, "\(name): a value may have at most \(ExtendedAttributes.maxValueBytes) bytes", errno: E2BIG),
                        subject)
                }
                let d = reply.deferred()
                executor.run { [self] in
                    do throws(RequestError) {
                        try await attempt(subject) { () async throws(ProviderError) in
                            try await setStoredAttribute(named: name, to: remove ? nil : bytes, mode: mode, of: item.identifier)
                        }
                        d.ok()
                    } catch {
                        d.error(error.error.code == .noSuchAttribute ? ENODATA : report(op, error))
                    }
                }
            case .docfs where name == Self.syncAttribute && !remove:
                // "retry": the item's changes set aside (refused by the server) are tried again.
                guard String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "retry" else {
                    throw RequestError(ProviderError(.invalidArgument, "\(name) takes only \"retry\""), subject)
                }
                let d = reply.deferred()
                perform(op, d) { [self] () async throws(RequestError) in
                    try await attempt(subject) { () async throws(ProviderError) in
                        guard let replicaStatus else { throw ProviderError(.unsupported, "this provider has no server to send changes to") }
                        try await replicaStatus.retrySync(of: item.identifier)
                    }
                    d.ok()
                }
            case .docfs where name == Self.pinnedAttribute || name == Self.evictAttribute:
                if name == Self.evictAttribute && remove { reply.error(ENODATA); return }
                let d = reply.deferred()
                perform(op, d) { [self] () async throws(RequestError) in
                    try await attempt(subject) { () async throws(ProviderError) in
                        guard let onDemand else {
                            throw ProviderError(
                                .unsupported,
                                name == Self.evictAttribute
                                    ? "this provider has no server to download evicted contents from"
                                    : "this provider keeps every file's contents here; there is nothing to pin")
                        }
                        if name == Self.evictAttribute {
                            _ = try await onDemand.evictContents(ofItemWithIdentifier: item.identifier)
                        } else {
                            try await onDemand.setPinned(!remove, forItemIdentifier: item.identifier)
                        }
                    }
                    d.ok()
                }
            case .docfs:
                let isSet: Bool
                switch name {
                case Self.tagsAttribute: isSet = item.tagData != nil
                case Self.favoriteRankAttribute: isSet = item.favoriteRank != nil
                default: throw RequestError(ProviderError(.notPermitted, "\(name) is read-only"), subject)
                }
                if (remove || mode == .replace) && !isSet { reply.error(ENODATA); return }
                if mode == .create && isSet { throw RequestError(ProviderError(.filenameCollision, "\(name) is already set"), subject) }
                let parsed = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
                if name == Self.favoriteRankAttribute, !remove, parsed == nil {
                    throw RequestError(ProviderError(.invalidArgument, "favorite rank must be an integer"), subject)
                }
                let rank = remove ? nil : parsed
                let d = reply.deferred()
                perform(op, d) { [self] () async throws(RequestError) in
                    _ = try await attempt(subject) { () async throws(ProviderError) in
                        if name == Self.tagsAttribute {
                            return try await setTagData(remove ? nil : bytes, of: item.identifier)
                        }
                        return try await setFavoriteRank(rank, of: item.identifier)
                    }
                    d.ok()
                }
            }
        } catch {
            if error.error.code == .noSuchAttribute { reply.error(ENODATA); return }
            reply.error(report(op, error))
        }
    }

    /// setxattr flags (linux/xattr.h).
    static let xattrCreate: Int32 = 1
    static let xattrReplace: Int32 = 2

    /// After an import: stores the attributes that were set while the file was being copied in.
    func storeExtendedAttributes(of copyIn: CopyIn, on identifier: ItemIdentifier, subject: Subject) async {
        for (name, value) in copyIn.extendedAttributes.sorted(by: { $0.key < $1.key }) {
            do throws(ProviderError) {
                try await setStoredAttribute(named: name, to: value, mode: .upsert, of: identifier)
            } catch {
                _ = report("setxattr", RequestError(error, subject))
            }
        }
    }
}
