import Foundation
import DocFSProvider

/// What a new item of a replica carries besides its kind, parent and name: what the store's
/// outbox records for a create (`OutboxDetails.newItem`) and the server client sends
/// (`RemoteOperation.create`), and what the incoming apply compares of a row here with the
/// server's item (`ReplicaNode`). One shape for all three, so that nothing is mapped between
/// them; the caller's `NewItemAttributes` is the other shape. Fields are named as the provider's `Item`'s
/// (`uid`, `mode`, nanoseconds and the tag words are only the outbox's keys and the server's).
package struct ReplicatedAttributes: Sendable, Equatable {
    package var ownerID: UInt32
    package var groupID: UInt32
    /// Permission bits, set-ID and sticky included (07777); the kind is separate.
    package var posixPermissions: UInt16
    package var creationTime: FileTime
    package var modificationTime: FileTime
    /// The tags as the provider keeps them (the server's words, `ServerTags`); nil: none.
    package var tagData: Data?
    package var symlinkTargetPath: String?
    /// The item's content type and what it conforms to, nearest first: the server checks its
    /// layout's rules against them (`RemoteSchema` version 3). nil: not given (the outbox leaves
    /// it out: the chain is worked out when the create is sent).
    package var types: [String]?

    package init(
        ownerID: UInt32 = 0, groupID: UInt32 = 0, posixPermissions: UInt16 = 0o644, creationTime: FileTime,
        modificationTime: FileTime, tagData: Data? = nil, symlinkTargetPath: String? = nil, types: [String]? = nil
    ) {
        self.types = types
        self.ownerID = ownerID
        self.groupID = groupID
        self.posixPermissions = posixPermissions
        self.creationTime = creationTime
        self.modificationTime = modificationTime
        // Bytes that hold no word are no tags (the server keeps none).
        self.tagData = tagData.flatMap { ServerTags.array($0).isEmpty ? nil : $0 }
        self.symlinkTargetPath = symlinkTargetPath
    }
}

/// Tags between the server's text array and the provider's bytes (UTF-8, comma-separated, as
/// `docfs tag` writes them); bytes that were not UTF-8 travel as one "base64:" element.
package enum ServerTags {
    package static func array(_ data: Data?) -> [String] {
        guard let data, !data.isEmpty else { return [] }
        guard let text = String(data: data, encoding: .utf8) else { return ["base64:" + data.base64EncodedString()] }
        return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    package static func data(_ tags: [String]) -> Data? {
        guard !tags.isEmpty else { return nil }
        if tags.count == 1, tags[0].hasPrefix("base64:"), let raw = Data(base64Encoded: String(tags[0].dropFirst(7))) { return raw }
        return Data(tags.joined(separator: ",").utf8)
    }
}
