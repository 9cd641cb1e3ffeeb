import ArgumentParser
import Foundation
import DocFS
import Glibc
import DocFSProvider
import DocFSStore

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an item of a mounted tree: identifier, type, size, dates, capabilities, tags, version.")

    @Argument(help: "A path inside a docfs mount.")
    var path: String

    @Flag(help: "Print one JSON object (fields: see README, \"Output for scripts\").")
    var json = false

    static let fields: [(label: String, attribute: String)] = [
        ("identifier", "user.docfs.identifier"),
        ("type", "user.docfs.type"),
        ("conforms to", "user.docfs.conforms-to"),
        ("size", "user.docfs.document-size"),
        ("created", "user.docfs.created"),
        ("modified", "user.docfs.modified"),
        ("last used", "user.docfs.last-used"),
        ("capabilities", "user.docfs.capabilities"),
        ("tags", "user.docfs.tags"),
        ("favorite rank", "user.docfs.favorite-rank"),
        ("version", "user.docfs.version"),
        ("sync", "user.docfs.sync"),
        ("downloaded", "user.docfs.downloaded"),
        ("pinned", "user.docfs.pinned"),
    ]

    func run() throws {
        guard let identifier = Info.attribute(path, "user.docfs.identifier") else {
            if access(path, F_OK) != 0 { throw UserFacingError("docfs: \(path): \(String(cString: strerror(errno)))") }
            throw UserFacingError("docfs: \(path) is not inside a docfs mount")
        }
        if json {
            JSONOutput.print(InfoJSON(path: path, identifier: identifier))
            return
        }
        print("path          \(path)")
        let temporary = Info.isTemporary(path: path, identifier: identifier)
        print("identifier    \(identifier)\(temporary ? " (temporary: the server has not numbered it yet)" : "")")
        for (label, attribute) in Info.fields.dropFirst() {
            guard let value = Info.attribute(path, attribute), !value.isEmpty else { continue }
            print(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value)
        }
    }

    /// A replica's item (it has a sync state) whose identifier is still a temporary one.
    static func isTemporary(path: String, identifier: String) -> Bool {
        attribute(path, "user.docfs.sync") != nil && LocalStore.isTemporary(ItemIdentifier(identifier))
    }

    static func attribute(_ path: String, _ name: String) -> String? {
        ExtendedAttributeCalls.get(path, name).map { String(decoding: $0, as: UTF8.self) }
    }
}

/// `docfs info --json`: the item's `user.docfs.*` attributes under stable names.
struct InfoJSON: Encodable {
    var path: String
    var identifier: String
    var type: String?
    var conformsTo: [String]
    var size: Int64?
    var created: String?
    var modified: String?
    var lastUsed: String?
    var capabilities: [String]
    var tags: [String]
    var favoriteRank: Int?
    var contentVersion: Int64?
    var metadataVersion: Int64?
    var trashedFrom: String?
    /// A replica's item: "uploaded", "pending" or "error: …"; null without a remote.
    var sync: String?
    /// Whether the identifier is a temporary one (the server has not numbered the item yet).
    var temporary: Bool
    /// A replica's file: whether its contents are here (false: on the server only); null otherwise.
    var downloaded: Bool?
    /// Whether the item, or a folder above it, is pinned (`docfs pin`).
    var pinned: Bool

    enum CodingKeys: String, CodingKey {
        case path, identifier, type, conformsTo, size, created, modified, lastUsed, capabilities, tags, favoriteRank
        case contentVersion, metadataVersion, trashedFrom, sync, temporary, downloaded, pinned
    }

    init(path: String, identifier: String) {
        func attr(_ name: String) -> String? {
            Info.attribute(path, "user.docfs." + name).flatMap { $0.isEmpty ? nil : $0 }
        }
        func list(_ name: String) -> [String] {
            (attr(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        self.path = path
        self.identifier = identifier
        type = attr("type")
        conformsTo = list("conforms-to")
        size = attr("document-size").flatMap { Int64($0) }
        created = attr("created")
        modified = attr("modified")
        lastUsed = attr("last-used")
        capabilities = list("capabilities")
        tags = list("tags")
        favoriteRank = attr("favorite-rank").flatMap { Int($0) }
        // "content 3, metadata 5"
        var versions: [String: Int64] = [:]
        for part in (attr("version") ?? "").split(separator: ",") {
            let words = part.split(separator: " ")
            if words.count == 2, let n = Int64(words[1]) { versions[String(words[0])] = n }
        }
        contentVersion = versions["content"]
        metadataVersion = versions["metadata"]
        trashedFrom = attr("trashed-from")
        sync = attr("sync")
        temporary = sync != nil && LocalStore.isTemporary(ItemIdentifier(identifier))
        downloaded = attr("downloaded").map { $0 == "yes" }
        pinned = attr("pinned") == "yes"
    }

    /// Every key is always written; an absent value is null.
    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(path, forKey: .path)
        try c.encode(identifier, forKey: .identifier)
        try c.encode(type, forKey: .type)
        try c.encode(conformsTo, forKey: .conformsTo)
        try c.encode(size, forKey: .size)
        try c.encode(created, forKey: .created)
        try c.encode(modified, forKey: .modified)
        try c.encode(lastUsed, forKey: .lastUsed)
        try c.encode(capabilities, forKey: .capabilities)
        try c.encode(tags, forKey: .tags)
        try c.encode(favoriteRank, forKey: .favoriteRank)
        try c.encode(contentVersion, forKey: .contentVersion)
        try c.encode(metadataVersion, forKey: .metadataVersion)
        try c.encode(trashedFrom, forKey: .trashedFrom)
        try c.encode(sync, forKey: .sync)
        try c.encode(temporary, forKey: .temporary)
        try c.encode(downloaded, forKey: .downloaded)
        try c.encode(pinned, forKey: .pinned)
    }
}
