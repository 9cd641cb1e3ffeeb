import ArgumentParser
import Foundation
import Glibc

@main
struct DocFS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docfs",
        abstract: "Mount a document provider tree with FUSE.",
        discussion: """
            A store holds the tree: item metadata in SQLite and contents as files. Folders declare
            in a layout file what may be added, read and written; the mount enforces it.
            """,
        subcommands: [Init.self, Mount.self, Unmount.self, Info.self, Check.self, Import.self, Trash.self, Tag.self]
    )

    /// Our own messages go out as they are ("docfs: …"), not behind ArgumentParser's "Error:".
    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let error as UserFacingError {
            FileHandle.standardError.write(Data((error.message + "\n").utf8))
            Glibc.exit(1)
        } catch {
            exit(withError: error)
        }
    }
}

/// A message for the user and a non-zero exit status, without a stack trace.
struct UserFacingError: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}
