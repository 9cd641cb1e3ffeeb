import Foundation
import DocFSRemote
import DocFSStore
import DocFSWire

/// What a replica checks in every row the server sends before it uses it: a row this docfs could
/// not have written (an older server, a hand-edited database) is refused, never applied, and can
/// neither trap the daemon nor name a place outside the store. Each check answers the rule a row
/// breaks (nil: none), for one log line naming the item and the rule.
enum ServerRowChecks {
    /// The largest size a replica takes (ext4's largest file): a larger one is no file's, and
    /// would size a download's plan beyond memory.
    static let largestSize: Int64 = 1 << 44
    /// The largest block the chunker makes (a file below `wholeBelow` is one smaller block).
    static let largestBlock = Int64(max(ContentChunker.standard.maximum, ContentChunker.wholeBelow))
    /// Linux's PATH_MAX less its NUL: the longest target `symlink(2)` takes.
    static let longestTarget = 4095
    /// S3's longest key.
    static let longestKey = 1024
    /// The largest step between two changes a sequence makes (gaps come from rolled-back
    /// transactions, a few at a time): a larger one would move the anchor past every change to come.
    static let largestGap: Int64 = 1 << 40

    /// A name a Linux folder can hold: 1–255 bytes, no `/`, no NUL, not `.` or `..`.
    static func name(_ name: String) -> String? {
        let bytes = name.utf8
        if bytes.isEmpty { return "an empty name" }
        if bytes.count > 255 { return "a name of \(bytes.count) bytes (255 at most)" }
        if bytes.contains(UInt8(ascii: "/")) { return "a name with a /" }
        if bytes.contains(0) { return "a name with a NUL" }
        if name == "." || name == ".." { return "the name \(name)" }
        return nil
    }

    /// An identifier the store can take for a server item (rows 1 and 2 are its root and trash,
    /// rows from `temporaryRowBase` its own new items).
    static func identifier(_ id: Int64) -> Bool { ReplicaRows.isPermanent(id) }

    /// An item row (the root is not checked: it is never applied).
    static func item(_ item: ServerItem, rootID: Int64?, prefix: String) -> String? {
        guard identifier(item.id) else { return "the identifier \(item.id) is out of range" }
        // A deleted item only goes: its other fields are not used.
        if item.deleted { return nil }
        if let parent = item.parentID, parent != rootID, !identifier(parent) || parent == item.id {
            return "the parent \(parent) is out of range"
        }
        if let problem = name(item.name) { return problem }
        if let named = item.linkOf {
            if !identifier(named) || named == item.id { return "a further name of item \(named), out of range" }
            if item.kind == .folder || item.parentID == nil { return "a further name of a folder or of the root" }
        }
        if item.size < 0 || item.size > largestSize { return "the size \(item.size) is out of range" }
        if item.contentVersion < 0 || item.metadataVersion < 0 { return "a version below 0" }
        switch item.kind {
        case .symlink:
            guard let target = item.symlinkTargetPath, !target.isEmpty else { return "a symbolic link without a target" }
            if target.utf8.count > longestTarget { return "a link target of \(target.utf8.count) bytes (\(longestTarget) at most)" }
            if target.utf8.contains(0) { return "a link target with a NUL" }
        case .file:
            if let key = item.contentKey, let problem = contentKey(key, prefix: prefix) { return problem }
        case .folder, .fifo, .socket, .characterDevice, .blockDevice:
            break // the server keeps only files, folders and links (`ServerItem.kind`)
        }
        return nil
    }

    /// A version's key: an object or a manifest of this tree (`ContentObjectKey`).
    static func contentKey(_ key: String, prefix: String) -> String? {
        under(prefix: prefix, ["objects/", "manifests/"], key, what: "content key")
    }

    /// A pack of this tree: `PREFIX/packs/<name>`, or `PREFIX/packs/<writer>/<name>` (schema 16).
    static func packKey(_ key: String, prefix: String) -> String? {
        let folder = ContentObjectKey.packFolder(prefix: prefix)
        let parts = key.hasPrefix(folder) ? key.dropFirst(folder.count).split(separator: "/", omittingEmptySubsequences: false) : []
        if parts.count == 2, ContentObjectKey.isWriter(String(parts[0])) {
            return under(prefix: prefix, ["packs/" + parts[0] + "/"], key, what: "pack")
        }
        return under(prefix: prefix, ["packs/"], key, what: "pack")
    }

    private static func under(prefix: String, _ folders: [String], _ key: String, what: String) -> String? {
        if key.utf8.count > longestKey || key.utf8.contains(0) { return "a \(what) of \(key.utf8.count) bytes or with a NUL" }
        for folder in folders {
            let start = ContentObjectKey.under(prefix: prefix, folder)
            guard key.hasPrefix(start) else { continue }
            // One name in that folder, as every replica makes them: nothing below it, nothing above.
            let rest = key.dropFirst(start.count)
            if rest.isEmpty || rest.contains("/") || rest == "." || rest == ".." { break }
            return nil
        }
        return "the \(what) \(key.prefix(120)) is not one of this tree's (\(ContentObjectKey.under(prefix: prefix, folders[0]))…)"
    }

    /// A block of a manifest, or of a pack gc rewrites.
    static func block(_ block: StoredBlock, prefix: String) -> String? {
        if !hash(block.hash) { return "the block hash \(block.hash.prefix(80)) is not 64 lowercase hex digits" }
        if block.length <= 0 || block.length > largestBlock {
            return "block \(block.hash.prefix(12))… has the length \(block.length) (1 to \(largestBlock))"
        }
        // Within any pack's size (and no overflow in offset + length, nor in a reader's end + 1).
        if block.offset < 0 || block.offset > largestSize - block.length {
            return "block \(block.hash.prefix(12))… has the offset \(block.offset)"
        }
        if let version = block.version, !S3Client.isVersionID(version) {
            return "block \(block.hash.prefix(12))… names the pack version \(version.prefix(80)), not a version id"
        }
        return packKey(block.pack, prefix: prefix)
    }

    /// A manifest: its blocks each checked, and its size theirs summed.
    static func manifest(size: Int64, blocks: [StoredBlock], prefix: String) -> String? {
        if size < 0 || size > largestSize { return "the manifest's size \(size) is out of range" }
        var sum: Int64 = 0
        for block in blocks {
            if let problem = self.block(block, prefix: prefix) { return problem }
            // Each length is at most a few MiB and the size at most `largestSize`: no overflow.
            sum += block.length
            if sum > size { break }
        }
        if sum != size { return "the manifest's size \(size) is not the sum of its \(blocks.count) blocks' lengths" }
        return nil
    }

    /// A SHA-256 as the server keeps it: 64 lowercase hex digits.
    static func hash(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The changes after `anchor` that can be applied, in order, up to the first that cannot (a
    /// position not after the one before it, or further past it than a sequence goes), and that
    /// one's rule: the anchor never moves past it. (Their items are checked when fetched.)
    static func changes(_ changes: [RemoteChange], after anchor: Int64) -> (usable: [RemoteChange], refused: (RemoteChange, String)?) {
        var previous = anchor
        for (index, change) in changes.enumerated() {
            let problem: String?
            if change.position <= 0 || change.position <= previous {
                problem = "the position \(change.position) does not follow \(previous)"
            } else if change.position - previous > largestGap {
                problem = "the position \(change.position) is \(change.position - previous) past the one before it (no sequence jumps that far)"
            } else {
                problem = nil
            }
            if let problem { return (Array(changes[..<index]), (change, problem)) }
            previous = change.position
        }
        return (changes, nil)
    }
}

/// A row refused by `ServerRowChecks`: the reader gets EIO, the item is set aside.
struct RefusedRow: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
