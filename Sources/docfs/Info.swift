import ArgumentParser
import Foundation
import CFuse
import Glibc

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show an item of a mounted tree: identifier, type, size, dates, capabilities, tags, version.")

    @Argument(help: "A path inside a docfs mount.")
    var path: String

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
    ]

    func run() throws {
        guard let identifier = Info.attribute(path, "user.docfs.identifier") else {
            if access(path, F_OK) != 0 { throw UserFacingError("docfs: \(path): \(String(cString: strerror(errno)))") }
            throw UserFacingError("docfs: \(path) is not inside a docfs mount")
        }
        print("path          \(path)")
        print("identifier    \(identifier)")
        for (label, attribute) in Info.fields.dropFirst() {
            guard let value = Info.attribute(path, attribute), !value.isEmpty else { continue }
            print(label.padding(toLength: 14, withPad: " ", startingAt: 0) + value)
        }
    }

    static func attribute(_ path: String, _ name: String) -> String? {
        var buf = [UInt8](repeating: 0, count: 65536)
        let n = lgetxattr(path, name, &buf, buf.count)
        guard n >= 0 else { return nil }
        return String(decoding: buf[0..<n], as: UTF8.self)
    }
}
