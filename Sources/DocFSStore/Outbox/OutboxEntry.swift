import Foundation
import DocFSProvider
import DocFSWire

/// One change waiting to go to the server, in the order it was made (`seq`). Written in the
/// same journal entry (so the same SQLite transaction) as the change it describes; removed when
/// the server has it. `id` is the operation id the server answers retries from, so a change sent
/// twice (a lost reply, a crash after sending) is applied once.
package struct OutboxEntry: Sendable, Equatable {
    package enum Kind: String, Sendable, Codable {
        /// A new folder, file (with its first contents) or symbolic link under `parent` as `name`.
        case create
        /// New contents of a file.
        case content
        /// A rename and/or move to `parent` as `name`.
        case move
        /// Into the trash (the server keeps its folder and name).
        case trash
        /// Out of the trash, to `parent` as `name`.
        case untrash
        case delete
        /// Owner, group, mode, times, tags or favourite rank.
        case attributes
        /// A further name (`row`, a name row) of the file `details.linkOf`, under `parent` as `name`.
        case link
        /// A further name (`row`) goes.
        case unlink
        /// A further name (`row`) is renamed and/or moved to `parent` as `name`.
        case moveName
    }

    package var seq: Int64
    package var id: UUID
    package var kind: Kind
    /// The item's row: temporary (≥ `LocalStore.temporaryRowBase`) until the server gave it its
    /// permanent identifier; rewritten then in every entry still waiting.
    package var row: Int64
    /// The destination folder's row (create, move, untrash); 1 is the root.
    package var parent: Int64?
    package var name: String?
    /// Bytes to upload (a file's create or new contents).
    package var bytes: Int64
    /// When the change was made (nanoseconds since 1970).
    package var enqueuedNs: Int64
    package var details: OutboxDetails

    package init(
        seq: Int64, id: UUID, kind: Kind, row: Int64, parent: Int64? = nil, name: String? = nil,
        bytes: Int64 = 0, enqueuedNs: Int64, details: OutboxDetails = OutboxDetails()
    ) {
        self.seq = seq
        self.id = id
        self.kind = kind
        self.row = row
        self.parent = parent
        self.name = name
        self.bytes = bytes
        self.enqueuedNs = enqueuedNs
        self.details = details
    }
}

/// What an entry carries besides its place: a create's new item (`kind`, `newItem`), the changed
/// attributes of an attributes change (`changes`), and a content change's versions.
///
/// Stored as JSON with flat keys (the `Codable` extension below): a create's attributes sit under
/// the same keys as an attributes change's, so that the entries stores keep in their outbox, and
/// SQL that edits them (`json_set`), read one way whatever their kind.
package struct OutboxDetails: Sendable, Equatable {
    /// Create: the new item's kind.
    package var kind: ItemKind?
    /// Create: what the new item carries, as it is sent (its `types` are worked out when sent).
    package var newItem: ReplicatedAttributes?
    /// Attributes: what changed (nil fields: unchanged). Content: the `modificationTime`. A
    /// create's `favoriteRank` (recorded, not sent: the server's create takes no rank).
    package var changes = AttributeChanges()
    /// Content: the local content version this change made (the server's expected version is
    /// one less: every local content version is one outbox entry, so the two count alike).
    package var contentVersion: UInt64?
    /// Content: the version the change was based on (the server's compare-and-swap expects it);
    /// absent in entries an older docfs wrote, where it is `contentVersion - 1`.
    package var baseVersion: UInt64?
    /// Move: where the item was before (the server applies the move only if it is still there:
    /// a move another replica made first wins).
    package var fromParent: Int64?
    package var fromName: String?
    /// Link: the row of the file the new name names (rewritten with the rows when the server
    /// numbers a temporary one).
    package var linkOf: Int64?

    package init(
        kind: ItemKind? = nil, newItem: ReplicatedAttributes? = nil, changes: AttributeChanges = AttributeChanges(),
        contentVersion: UInt64? = nil
    ) {
        self.kind = kind
        self.newItem = newItem
        self.changes = changes
        self.contentVersion = contentVersion
    }
}

/// The flat JSON form. An entry with a `kind` is a create: its uid, gid, mode, times, tags and
/// link target are its `newItem` (absent ones as a create has always sent them: 0, 0, 0644,
/// 0, 0, none); any other entry's are what changed. Times are nanoseconds since 1970; a change
/// of tags or rank is its value and `tagsChanged`/`favoriteRankChanged` (no value: removed).
extension OutboxDetails: Codable {
    private enum Key: String, CodingKey {
        case kind, uid, gid, mode, createdNs, modifiedNs, accessedNs, tagData, tagsChanged, favoriteRank,
            favoriteRankChanged, symlinkTarget, types, contentVersion, baseVersion, fromParent, fromName, linkOf
    }

    package init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        kind = try c.decodeIfPresent(ItemKind.self, forKey: .kind)
        let uid = try c.decodeIfPresent(UInt32.self, forKey: .uid)
        let gid = try c.decodeIfPresent(UInt32.self, forKey: .gid)
        let mode = try c.decodeIfPresent(UInt32.self, forKey: .mode)
        let createdNs = try c.decodeIfPresent(Int64.self, forKey: .createdNs)
        let modifiedNs = try c.decodeIfPresent(Int64.self, forKey: .modifiedNs)
        let tagData = try c.decodeIfPresent(Data.self, forKey: .tagData)
        let tagsChanged = try c.decodeIfPresent(Bool.self, forKey: .tagsChanged)
        if kind != nil {
            newItem = ReplicatedAttributes(
                ownerID: uid ?? 0, groupID: gid ?? 0,
                posixPermissions: UInt16(truncatingIfNeeded: mode ?? 0o644) & 0o7777,
                creationTime: FileTime(totalNanoseconds: createdNs ?? 0),
                modificationTime: FileTime(totalNanoseconds: modifiedNs ?? 0),
                tagData: tagData,
                symlinkTargetPath: try c.decodeIfPresent(String.self, forKey: .symlinkTarget),
                types: try c.decodeIfPresent([String].self, forKey: .types))
        } else {
            changes.ownerID = uid
            changes.groupID = gid
            changes.posixPermissions = mode.map { UInt16(truncatingIfNeeded: $0) & 0o7777 }
            changes.creationTime = createdNs.map(FileTime.init(totalNanoseconds:))
            changes.modificationTime = modifiedNs.map(FileTime.init(totalNanoseconds:))
            if tagsChanged == true { changes.tagData = .some(tagData) }
        }
        changes.accessTime = try c.decodeIfPresent(Int64.self, forKey: .accessedNs).map(FileTime.init(totalNanoseconds:))
        if try c.decodeIfPresent(Bool.self, forKey: .favoriteRankChanged) == true {
            changes.favoriteRank = .some(try c.decodeIfPresent(Int64.self, forKey: .favoriteRank))
        }
        contentVersion = try c.decodeIfPresent(UInt64.self, forKey: .contentVersion)
        baseVersion = try c.decodeIfPresent(UInt64.self, forKey: .baseVersion)
        fromParent = try c.decodeIfPresent(Int64.self, forKey: .fromParent)
        fromName = try c.decodeIfPresent(String.self, forKey: .fromName)
        linkOf = try c.decodeIfPresent(Int64.self, forKey: .linkOf)
    }

    package func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encodeIfPresent(kind, forKey: .kind)
        if let newItem {
            try c.encode(newItem.ownerID, forKey: .uid)
            try c.encode(newItem.groupID, forKey: .gid)
            try c.encode(UInt32(newItem.posixPermissions), forKey: .mode)
            try c.encode(newItem.creationTime.totalNanoseconds, forKey: .createdNs)
            try c.encode(newItem.modificationTime.totalNanoseconds, forKey: .modifiedNs)
            // The tags as the provider keeps them: `ServerTags.array` reads the server's words
            // from them (bytes that are not UTF-8 as their one "base64:" word).
            if let tagData = newItem.tagData, !ServerTags.array(tagData).isEmpty {
                try c.encode(tagData, forKey: .tagData)
                try c.encode(true, forKey: .tagsChanged)
            }
            try c.encodeIfPresent(newItem.symlinkTargetPath, forKey: .symlinkTarget)
            try c.encodeIfPresent(newItem.types, forKey: .types)
        } else {
            try c.encodeIfPresent(changes.ownerID, forKey: .uid)
            try c.encodeIfPresent(changes.groupID, forKey: .gid)
            try c.encodeIfPresent(changes.posixPermissions.map(UInt32.init), forKey: .mode)
            try c.encodeIfPresent(changes.creationTime?.totalNanoseconds, forKey: .createdNs)
            try c.encodeIfPresent(changes.modificationTime?.totalNanoseconds, forKey: .modifiedNs)
            if let tagData = changes.tagData {
                try c.encodeIfPresent(tagData, forKey: .tagData)
                try c.encode(true, forKey: .tagsChanged)
            }
        }
        try c.encodeIfPresent(changes.accessTime?.totalNanoseconds, forKey: .accessedNs)
        if let rank = changes.favoriteRank {
            try c.encodeIfPresent(rank, forKey: .favoriteRank)
            try c.encode(true, forKey: .favoriteRankChanged)
        }
        try c.encodeIfPresent(contentVersion, forKey: .contentVersion)
        try c.encodeIfPresent(baseVersion, forKey: .baseVersion)
        try c.encodeIfPresent(fromParent, forKey: .fromParent)
        try c.encodeIfPresent(fromName, forKey: .fromName)
        try c.encodeIfPresent(linkOf, forKey: .linkOf)
    }
}
