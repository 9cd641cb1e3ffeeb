import Foundation

/// What a new item of a replica carries besides its kind, parent and name: what the store's
/// outbox records for a create (`OutboxDetails.newItem`) and the server client sends
/// (`RemoteOperation.create`). One shape for both, so that nothing is mapped between them; the
/// caller's `NewItemAttributes` is the other shape. Here, not in the store or the server client,
/// because both see this module and neither sees the other. Times are nanoseconds since 1970.
package struct ReplicatedAttributes: Sendable, Equatable {
    package var uid: UInt32
    package var gid: UInt32
    /// Permission bits, set-ID and sticky included (07777); the kind is separate.
    package var mode: UInt32
    package var createdNs: Int64
    package var modifiedNs: Int64
    /// The server's words (`ServerTags`).
    package var tags: [String]
    package var symlinkTarget: String?
    /// The item's content type and what it conforms to, nearest first: the server checks its
    /// layout's rules against them (`RemoteSchema` version 3). nil: not given (the outbox leaves
    /// it out: the chain is worked out when the create is sent).
    package var types: [String]?

    package init(uid: UInt32 = 0, gid: UInt32 = 0, mode: UInt32 = 0o644, createdNs: Int64, modifiedNs: Int64,
                tags: [String] = [], symlinkTarget: String? = nil, types: [String]? = nil) {
        self.types = types
        self.uid = uid
        self.gid = gid
        self.mode = mode
        self.createdNs = createdNs
        self.modifiedNs = modifiedNs
        self.tags = tags
        self.symlinkTarget = symlinkTarget
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
