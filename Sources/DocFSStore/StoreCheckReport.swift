import DocFSProvider

/// What `docfs check STORE [--repair]` found in a store that is not mounted, and what it mended
/// (made by `StoreChecker.check(at:repair:)`, printed by `Sources/docfs/Check.swift`).
package struct StoreCheckReport: Sendable {
    /// The kinds of problem a check looks for; `StoreChecker` names what a repair does about each.
    package enum Kind: String, Sendable {
        case database // SQLite's own integrity check failed (not repairable here)
        case missingRoot // the root or trash row is missing or not a folder
        case missingParent // an item's parent row does not exist
        case parentNotFolder // an item's parent is a file or a symbolic link
        case unreachable // an item is not below the root or the trash (a cycle)
        case invalidName // empty, `.`/`..`, `/` or NUL inside, longer than 255 bytes
        case duplicateName // two items with the same name in one folder
        case missingContents // a file item without its content file
        case sizeMismatch // a file item whose size is not its content file's
        case orphanContents // a content file that belongs to no file item
        case stagedLeftover // a file left in staging/ by an interrupted copy
        case danglingAttribute // a stored extended attribute of an item that does not exist
        case danglingLink // a symbolic link item without a target
        case sequence // the identifier sequence is behind the largest identifier
        case journal // the journal holds changes that cannot be applied (set aside by a repair)
        case segment // a segment (small files' bytes) unreadable from some offset on (cut there by a repair)
        case danglingName // a hard link's name row naming no item (or a folder, or another name)
        case linkCount // an item whose count of names is not the names it has
    }

    /// One problem: its kind and a line naming the item or file.
    package struct Problem: Sendable, CustomStringConvertible {
        package var kind: Kind
        package var message: String
        /// `kind: message`, as `docfs check` prints it.
        package var description: String { "\(kind.rawValue): \(message)" }
    }

    /// Problems found (before any repair).
    package var problems: [Problem] = []
    /// What `--repair` did, one line each.
    package var repairs: [String] = []
    /// Problems still there at the end (after a repair: what could not be mended).
    package var remaining: [Problem] = []

    /// Folder items, the root and the trash included.
    package var folders = 0
    /// File items.
    package var files = 0
    /// Symbolic-link items.
    package var symlinks = 0
    /// FIFOs, sockets and device nodes.
    package var special = 0
    /// Hard links' further names (name rows): a file with two names counts one file and one name.
    package var names = 0
    /// Content files in `contents/` that belong to a file item.
    package var contentFiles = 0
    /// Small files whose bytes a segment holds (`segments/`).
    package var segmentFiles = 0
    /// The total size of content files and segment-stored files.
    package var contentBytes: Int64 = 0

    /// The store is consistent now (nothing was wrong, or everything was mended).
    package var isConsistent: Bool { remaining.isEmpty }

    /// One line: how many items of each kind, content files and bytes.
    package var summary: String {
        "\(folders + files + symlinks) items (\(folders) folders with root and trash, \(files) files, \(symlinks) symbolic links\(names > 0 ? ", \(names) further names of hard-linked items" : "")), "
            + "\(contentFiles) content files, \(segmentFiles > 0 ? "\(segmentFiles) files in segments, " : "")\(contentBytes) bytes"
    }
}
