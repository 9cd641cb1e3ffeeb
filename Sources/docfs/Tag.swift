import ArgumentParser
import Foundation
import DocFS
import Glibc

/// `docfs tag PATH [TAG...]`: a friendlier front for `user.docfs.tags`.
struct Tag: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show, set or clear an item's tags (the user.docfs.tags attribute; setTagData).",
        discussion: """
            With only FILE, lists the tags, one per line. With tags after FILE, sets the tags to \
            exactly these. --add TAG adds tags and --remove TAG removes some (both repeatable); \
            --clear removes all tags.
            """)
    @Argument(help: "A path inside a docfs mount.") var path: String
    @Argument(help: "Tags to set (replacing the current ones).") var tags: [String] = []
    @Option(name: .customLong("add"), help: "Add a tag (repeatable).") var add: [String] = []
    @Option(name: .customLong("remove"), help: "Remove a tag (repeatable).") var remove: [String] = []
    @Flag(help: "Remove all tags.") var clear = false

    static let attribute = "user.docfs.tags"

    func run() throws {
        guard Info.attribute(path, "user.docfs.identifier") != nil else {
            if access(path, F_OK) != 0 { throw UserFacingError("docfs: \(path): \(String(cString: strerror(errno)))") }
            throw UserFacingError("docfs: \(path) is not inside a docfs mount")
        }
        let current = (Info.attribute(path, Tag.attribute) ?? "").split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if clear {
            if ExtendedAttributeCalls.remove(path, Tag.attribute) != 0, errno != ENODATA {
                throw UserFacingError("docfs: cannot clear the tags of \(path): \(String(cString: strerror(errno)))")
            }
            return
        }
        if tags.isEmpty && add.isEmpty && remove.isEmpty {
            for tag in current { print(tag) }
            return
        }
        var wanted = tags.isEmpty ? current : []
        for tag in tags + add where !wanted.contains(tag) { wanted.append(tag) }
        wanted.removeAll { remove.contains($0) }
        if let bad = wanted.first(where: { $0.contains(",") || $0.isEmpty }) {
            throw UserFacingError("docfs: a tag may not be empty or contain a comma: '\(bad)'")
        }
        let rc: Int32
        if wanted.isEmpty {
            rc = ExtendedAttributeCalls.remove(path, Tag.attribute) == 0 || errno == ENODATA ? 0 : -1
        } else {
            let value = Array(wanted.joined(separator: ",").utf8)
            rc = ExtendedAttributeCalls.set(path, Tag.attribute, value)
        }
        if rc != 0 { throw UserFacingError("docfs: cannot set the tags of \(path): \(String(cString: strerror(errno)))") }
    }
}
