import Foundation
import DocFSProvider

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

    package init(seq: Int64, id: UUID, kind: Kind, row: Int64, parent: Int64? = nil, name: String? = nil,
                bytes: Int64 = 0, enqueuedNs: Int64, details: OutboxDetails = OutboxDetails()) {
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

/// What an entry carries besides its place: the attributes a create sends, the changed ones of
/// an attributes change (nil: unchanged), and a content change's versions.
package struct OutboxDetails: Codable, Sendable, Equatable {
    package var kind: ItemKind?
    package var uid: UInt32?
    package var gid: UInt32?
    package var mode: UInt32?
    package var createdNs: Int64?
    package var modifiedNs: Int64?
    package var accessedNs: Int64?
    /// Tags as the provider keeps them (opaque bytes), base64 on the server.
    package var tagData: Data?
    package var tagsChanged: Bool?
    package var favoriteRank: Int64?
    package var favoriteRankChanged: Bool?
    package var symlinkTarget: String?
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

    package init(kind: ItemKind? = nil, uid: UInt32? = nil, gid: UInt32? = nil, mode: UInt32? = nil,
                createdNs: Int64? = nil, modifiedNs: Int64? = nil, accessedNs: Int64? = nil,
                tagData: Data? = nil, tagsChanged: Bool? = nil, favoriteRank: Int64? = nil,
                favoriteRankChanged: Bool? = nil, symlinkTarget: String? = nil, contentVersion: UInt64? = nil) {
        self.kind = kind
        self.uid = uid
        self.gid = gid
        self.mode = mode
        self.createdNs = createdNs
        self.modifiedNs = modifiedNs
        self.accessedNs = accessedNs
        self.tagData = tagData
        self.tagsChanged = tagsChanged
        self.favoriteRank = favoriteRank
        self.favoriteRankChanged = favoriteRankChanged
        self.symlinkTarget = symlinkTarget
        self.contentVersion = contentVersion
    }
}
