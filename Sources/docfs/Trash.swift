import ArgumentParser
import Foundation
import DocFS
import Glibc

/// `docfs trash list|restore|empty MOUNTPOINT ...`: works through a mounted tree with plain POSIX
/// calls (readdir, rename, unlink/rmdir), so the mount's rules and logging apply exactly as they
/// do for `ls`, `mv` and `rm`. The mount must have a trash (`--trash` or `trash: true`).
struct Trash: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, restore or empty the trash of a mounted tree (through the mount).",
        subcommands: [List.self, Restore.self, Empty.self])

    static let trashIdentifier = "NSFileProviderTrashContainerItemIdentifier"

    /// MOUNTPOINT/.Trash, after checking that it is a docfs trash.
    static func trashPath(_ mountpoint: String) throws -> String {
        let mnt = MountTable.canonical(mountpoint)
        guard let entry = MountTable.entry(at: mnt), entry.type == "fuse.docfs" else {
            throw UserFacingError("docfs: \(mountpoint) is not a docfs mountpoint")
        }
        let path = mnt + "/.Trash"
        guard Info.attribute(path, "user.docfs.identifier") == trashIdentifier else {
            throw UserFacingError("docfs: the mount at \(mountpoint) has no trash (mount it with --trash, or set trash: true in the layout)")
        }
        return path
    }

    static func entries(_ trash: String) throws -> [String] {
        do { return try FileManager.default.contentsOfDirectory(atPath: trash).sorted() } catch {
            throw UserFacingError("docfs: cannot list \(trash): \(error.localizedDescription)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "One line per item in the trash: its name in the trash, then where it came from.")
        @Argument(help: "The mountpoint.") var mountpoint: String
        @Flag(help: "Print a JSON array of {name, folder, trashedFrom, identifier} (see README, \"Output for scripts\").")
        var json = false

        struct Entry: Encodable {
            var name: String
            var folder: Bool
            var trashedFrom: String?
            var identifier: String?
            func encode(to encoder: Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(name, forKey: .name)
                try c.encode(folder, forKey: .folder)
                try c.encode(trashedFrom, forKey: .trashedFrom)
                try c.encode(identifier, forKey: .identifier)
            }
            enum CodingKeys: String, CodingKey { case name, folder, trashedFrom, identifier }
        }

        func run() throws {
            let trash = try Trash.trashPath(mountpoint)
            var entries: [Entry] = []
            for name in try Trash.entries(trash) {
                let path = trash + "/" + name
                var st = stat()
                let isDir = lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFDIR
                let from = Info.attribute(path, "user.docfs.trashed-from")
                if json {
                    entries.append(
                        Entry(
                            name: name, folder: isDir, trashedFrom: from,
                            identifier: Info.attribute(path, "user.docfs.identifier")))
                } else {
                    print("\(name)\(isDir ? "/" : "")\t\(from ?? "?")")
                }
            }
            if json { JSONOutput.print(entries) }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Move items out of the trash, back where they came from (or into --to DIR).",
            discussion: "A name already taken at the destination is reported and left alone, never overwritten.")
        @Argument(help: "The mountpoint.") var mountpoint: String
        @Argument(help: "Names as `docfs trash list` shows them.") var names: [String] = []
        @Option(help: "Restore into this folder (a path inside the mount) instead of the original one.") var to: String?
        @Flag(help: "Restore everything in the trash.") var all = false

        func validate() throws {
            if names.isEmpty && !all { throw ValidationError("name the items to restore, or give --all") }
        }

        func run() throws {
            let trash = try Trash.trashPath(mountpoint)
            let mnt = MountTable.canonical(mountpoint)
            var failed = 0
            for name in all ? try Trash.entries(trash) : names {
                let source = trash + "/" + name
                let target: String
                if let to {
                    target = to + "/" + (Info.attribute(source, "user.docfs.trashed-from").map { ($0 as NSString).lastPathComponent } ?? name)
                } else if let from = Info.attribute(source, "user.docfs.trashed-from") {
                    target = mnt + from
                } else {
                    let reason = access(source, F_OK) == 0 ? "where it came from is not known; use --to DIR" : String(cString: strerror(errno))
                    FileHandle.standardError.write(Data("docfs: cannot restore \(name): \(reason)\n".utf8))
                    failed += 1
                    continue
                }
                let folder = (target as NSString).deletingLastPathComponent
                var st = stat()
                if stat(folder, &st) != 0 {
                    FileHandle.standardError.write(Data("docfs: cannot restore \(name): its folder \(folder) is gone; use --to DIR\n".utf8))
                    failed += 1
                    continue
                }
                if lstat(target, &st) == 0 {
                    FileHandle.standardError.write(Data("docfs: cannot restore \(name): \(target) already exists\n".utf8))
                    failed += 1
                    continue
                }
                if rename(source, target) != 0 {
                    FileHandle.standardError.write(Data("docfs: cannot restore \(name) to \(target): \(String(cString: strerror(errno)))\n".utf8))
                    failed += 1
                    continue
                }
                print("restored \(name) to \(target)")
            }
            if failed > 0 { throw ExitCode(1) }
        }
    }

    struct Empty: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete everything in the trash for good (needs allowsDeleting on each item).")
        @Argument(help: "The mountpoint.") var mountpoint: String

        func run() throws {
            let trash = try Trash.trashPath(mountpoint)
            var deleted = 0
            var failed = 0
            for name in try Trash.entries(trash) {
                do {
                    try FileManager.default.removeItem(atPath: trash + "/" + name)
                    deleted += 1
                } catch {
                    let reason = (error as NSError).userInfo[NSUnderlyingErrorKey].map { "\($0)" } ?? error.localizedDescription
                    FileHandle.standardError.write(Data("docfs: cannot delete \(name) from the trash: \(reason)\n".utf8))
                    failed += 1
                }
            }
            print("deleted \(deleted) item(s) from the trash\(failed > 0 ? "; \(failed) could not be deleted" : "")")
            if failed > 0 { throw ExitCode(1) }
        }
    }
}
