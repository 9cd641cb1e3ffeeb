import Foundation
import DocFSProvider
@testable import DocFSRemote
import DocFSWire

/// The in-memory server's further names of a file (hard links), with the checks of the real
/// server's `docfs_op_link`, `docfs_pass_name` and name operations (`RemoteSchema+Links`): a
/// name row has its own place and `linkOf`; the name operations take name rows only, the others
/// items only (`apply(target:)`).
extension InMemoryServer {
    /// `link`: a new name of a live file or symbolic link (not a folder, not in the trash, not a
    /// name itself) in a live folder; a taken name gets the usual suffix.
    func link(operationID: UUID, itemID: Int64, parentID: Int64, name: String) async throws -> AppliedChange {
        try apply("link", operationID, .link) { s, position in
            try checkRejected(s, name)
            guard let item = s.items[itemID], !item.deleted else { throw RemoteError.notFound(itemID: itemID) }
            if let of = item.linkOf { throw RemoteError.invalid("item \(itemID) is a name of item \(of), not an item") }
            if item.parentID == nil || item.kind == .folder {
                throw RemoteError.invalid("item \(itemID) is a folder: folders cannot be hard-linked")
            }
            if item.trashTime != nil { throw RemoteError.invalid("item \(itemID) is in the trash") }
            guard let folder = s.items[parentID], !folder.deleted else { throw RemoteError.notFound(itemID: parentID) }
            if folder.kind != .folder || folder.linkOf != nil { throw RemoteError.invalid("item \(parentID) is not a directory") }
            if folder.trashTime != nil { throw RemoteError.invalid("folder \(parentID) is in the trash") }
            let id = s.nextID
            s.nextID += 1
            var row = item
            row.id = id
            row.parentID = parentID
            row.name = Self.freeName(s, name, isFolder: false, parent: parentID, except: nil)
            row.size = 0
            row.contentKey = nil
            row.contentVersion = 1
            row.metadataVersion = 1
            row.changeTime = FileTime(totalNanoseconds: position)
            row.favoriteRank = nil
            row.linkOf = itemID
            s.items[id] = row
            return (id, row.name)
        }
    }

    /// `unlink`: that name (a name row) goes, as a tombstone.
    func unlink(operationID: UUID, nameID: Int64) async throws -> AppliedChange {
        try apply("unlink", operationID, .unlink, target: nameID) { s, position in
            var row = try Self.live(s, nameID)
            row.deleted = true
            row.metadataVersion += 1
            row.changeTime = FileTime(totalNanoseconds: position)
            s.items[nameID] = row
            return (nameID, row.name)
        }
    }

    /// An item's own name goes while it has others (`delete` of it): it takes the place of its
    /// oldest other name, which goes, logged as that name's `unlink`. False: no other name.
    static func passName(_ s: inout State, of itemID: Int64, operationID: UUID, at position: Int64) -> Bool {
        guard var named = s.items.values.filter({ $0.linkOf == itemID && !$0.deleted }).min(by: { $0.id < $1.id }),
            var item = s.items[itemID]
        else { return false }
        named.deleted = true
        named.metadataVersion += 1
        named.changeTime = FileTime(totalNanoseconds: position)
        s.items[named.id] = named
        log(
            &s,
            RemoteChange(
                position: nextPosition(s), itemID: named.id, kind: .unlink, operationID: operationID,
                contentVersion: named.contentVersion, metadataVersion: named.metadataVersion, atNs: position))
        item.parentID = named.parentID
        item.name = named.name
        item.trashTime = named.trashTime
        item.metadataVersion += 1
        item.changeTime = FileTime(totalNanoseconds: position)
        s.items[itemID] = item
        return true
    }
}
