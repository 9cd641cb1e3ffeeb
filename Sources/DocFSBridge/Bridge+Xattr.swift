import CFuse
import Foundation
import Glibc
import DocFSProvider

// Extended attributes: the item's provider metadata as read-only `user.docfs.*` attributes, with
// tags and favourite rank settable (setTagData / setFavoriteRank).
extension Bridge {
    static let tagsAttribute = "user.docfs.tags"
    static let favoriteRankAttribute = "user.docfs.favorite-rank"

    private static func format(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// The attributes an item shows, in listing order.
    func providerAttributes(of item: Item) -> [(String, String)] {
        var list: [(String, String)] = [
            ("user.docfs.identifier", item.identifier.rawValue),
            ("user.docfs.type", item.contentType.identifier),
            ("user.docfs.document-size", String(item.documentSize)),
            ("user.docfs.created", Self.format(item.creationDate)),
            ("user.docfs.modified", Self.format(item.contentModificationDate)),
            ("user.docfs.capabilities", item.capabilities.wordList.joined(separator: ", ")),
            ("user.docfs.version", "content \(item.itemVersion.contentVersion), metadata \(item.itemVersion.metadataVersion)"),
        ]
        if let used = item.lastUsedDate { list.append(("user.docfs.last-used", Self.format(used))) }
        if let tags = item.tagData { list.append((Self.tagsAttribute, String(decoding: tags, as: UTF8.self))) }
        if let rank = item.favoriteRank { list.append((Self.favoriteRankAttribute, String(rank))) }
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

    func getxattr(_ reply: consuming Reply, _ ino: UInt64, _ cname: UnsafePointer<CChar>, _ size: Int) {
        do throws(Failure) {
            let item = try self.item(ino)
            let name = String(cString: cname)
            guard let value = providerAttributes(of: item).first(where: { $0.0 == name })?.1 else {
                reply.error(ENODATA)
                return
            }
            replySized(reply, Array(value.utf8), size)
        } catch {
            reply.error(error.error.code == .noSuchItem && inodes.node(ino) != nil ? ENODATA : report("getxattr", error))
        }
    }

    func listxattr(_ reply: consuming Reply, _ ino: UInt64, _ size: Int) {
        do throws(Failure) {
            let item = try self.item(ino)
            var bytes: [UInt8] = []
            for (name, _) in providerAttributes(of: item) { bytes += Array(name.utf8) + [0] }
            replySized(reply, bytes, size)
        } catch {
            if inodes.node(ino) != nil, inodes.identifier(ino) == nil { replySized(reply, [], size); return }
            reply.error(report("listxattr", error))
        }
    }

    func setxattr(_ reply: consuming Reply, _ ino: UInt64, _ cname: UnsafePointer<CChar>, _ value: UnsafeRawBufferPointer, remove: Bool) {
        do throws(Failure) {
            let item = try self.item(ino)
            let name = String(cString: cname)
            let subject = Subject.item(item.identifier)
            let bytes = Data(value)
            switch name {
            case Self.tagsAttribute:
                let d = reply.deferred()
                executor.run { [self] in
                    do throws(Failure) {
                        _ = try await attempt(subject) { () async throws(ProviderError) in
                            try await provider.setTagData(remove ? nil : bytes, forItemIdentifier: item.identifier)
                        }
                        d.ok()
                    } catch { d.error(report("setxattr", error)) }
                }
            case Self.favoriteRankAttribute:
                let parsed = Int64(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespaces))
                if !remove, parsed == nil {
                    throw Failure(ProviderError(.invalidArgument, "favorite rank must be an integer"), subject)
                }
                let rank = remove ? nil : parsed
                let d = reply.deferred()
                executor.run { [self] in
                    do throws(Failure) {
                        _ = try await attempt(subject) { () async throws(ProviderError) in
                            try await provider.setFavoriteRank(rank, forItemIdentifier: item.identifier)
                        }
                        d.ok()
                    } catch { d.error(report("setxattr", error)) }
                }
            default:
                if name.hasPrefix("user.docfs.") {
                    throw Failure(ProviderError(.notPermitted, "\(name) is read-only"), subject)
                }
                reply.error(EOPNOTSUPP)
            }
        } catch {
            reply.error(report(remove ? "removexattr" : "setxattr", error))
        }
    }
}
