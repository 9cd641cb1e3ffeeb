import ArgumentParser
import Foundation
import Glibc

@main
struct DocFS: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docfs",
        abstract: "Mount a document provider tree with FUSE.",
        discussion: """
            A store holds the tree: item metadata in SQLite and contents as files. Folders declare \
            in a layout file what may be added, read and written; the mount enforces it.
            """,
        version: BuildInfo.text,
        subcommands: [
            Init.self, Mount.self, Unmount.self, Status.self, Info.self, Check.self, Import.self, New.self, Trash.self, Tag.self, Pin.self,
            Evict.self, Sync.self, Versions.self, Remote.self,
        ]
    )

    /// Our own messages go out as they are ("docfs: …"), not behind ArgumentParser's "Error:".
    static func main() {
        do {
            var arguments: [String]? = nil
            // As a mount(8) helper (mount.fuse.docfs, or mount.fuse3's `docfs STORE MNT -o …`).
            let names = configuration.subcommands.map { $0._commandName }
            switch try MountHelper.invocation(CommandLine.arguments, subcommands: names) {
            case .command: break
            case .fake: return
            case .mount(let translated):
                if MountHelper.alreadyMounted(translated) {
                    FileHandle.standardError.write(Data("docfs: \(translated[1]) is already mounted at \(translated[2])\n".utf8))
                    return
                }
                arguments = translated
            }
            var command = try parseAsRoot(arguments)
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
