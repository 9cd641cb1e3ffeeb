import ArgumentParser
import Dispatch
import Foundation
import Glibc
import Logging
import Synchronization
import DocFSProvider
import DocFSStore

/// Set by SIGINT; the copy loops poll it between chunks.
let importCancelled = Atomic<Bool>(false)

/// `docfs import FILE... --to DIR [--types T,...]`: the command-line twin of fileImporter.
///
/// Through a mount (DIR inside a docfs mount): each file is created with O_EXCL, written and
/// closed, and close() is the import — its result is the provider's verdict; the identifier comes
/// from `user.docfs.identifier`. Against a store that is not mounted (`--store STORE --to /Inbox`):
/// each file is copied into the store's staging directory and handed to `importDocument` as a
/// security-scoped file. Either way the folder's own rules apply.
///
/// Ctrl-C: what was imported stays; the file in flight is dropped before it is imported (through
/// a mount it is unlinked while still open, so its close imports nothing; with --store its staged
/// copy is removed); the command says so and exits with status 130.
struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import files (and folders) into a folder of a docfs tree, many at once.",
        discussion: """
            One line per FILE on standard output: `imported NAME as ITEM-ID` or \
            `refused NAME: reason` (with --json, one JSON object per FILE instead).

            Exit status 0 only when every file was imported; 1 when some were refused; 130 when \
            cancelled (Ctrl-C). Progress (files, bytes, rate) is shown on standard error when it \
            is a terminal.

            A directory is imported as a folder with everything in it (or as one document when \
            its name makes it a package, e.g. *.deck declared in the layout).

            --types limits the content types accepted (by the name's extension; a type counts when \
            it conforms to one listed, e.g. public.image takes .png and .jpg).
            """)

    @Argument(help: "Files or directories to import.")
    var files: [String]

    @Option(help: "The destination folder: a path inside a docfs mount, or with --store a path in the store (/Inbox).")
    var to: String

    @Option(help: "Allowed content types, comma-separated (e.g. public.image,com.adobe.pdf).")
    var types: String?

    @Option(help: "Import straight into this store (it must not be mounted).")
    var store: String?

    @Flag(help: "One JSON object per FILE instead of a line (fields: see README, \"Output for scripts\").")
    var json = false

    // MARK: Running

    func run() throws {
        let allowed = (types ?? "").split(separator: ",").map { ContentType(String($0).trimmingCharacters(in: .whitespaces)) }
        signal(SIGINT) { _ in importCancelled.store(true, ordering: .relaxed) }
        defer { signal(SIGINT, SIG_DFL) }

        let destination: ImportDestination
        if let store {
            destination = try StoreDestination(store: store, folder: to)
        } else {
            destination = try MountDestination(folder: to)
        }
        defer { destination.close() }

        var progress = ImportProgress(enabled: isatty(2) != 0)
        let sources = files.map { ImportSource(path: $0) }
        for source in sources { progress.totalFiles += source.fileCount; progress.totalBytes += source.bytes }
        progress.draw(force: true)

        var imported = 0, refused = 0
        var cancelledAt: String?
        for (index, source) in sources.enumerated() {
            if importCancelled.load(ordering: .relaxed) { cancelledAt = ""; break }
            let outcome: ImportOutcome
            if let problem = source.problem {
                outcome = .refused(problem)
            } else if let reason = Self.typeRefusal(source, allowed: allowed) {
                outcome = .refused(reason)
            } else {
                outcome = destination.importItem(source, progress: &progress)
            }
            progress.clear()
            switch outcome {
            case .imported(let id):
                imported += 1
                if json { Self.sayJSON(source, "imported", identifier: id) } else { Self.say("imported \(source.name) as \(id)") }
            case .refused(let reason):
                refused += 1
                if json { Self.sayJSON(source, "refused", reason: reason) } else { Self.say("refused \(source.name): \(reason)") }
                progress.skip(source)
            case .cancelled:
                cancelledAt = source.name
                if json { Self.sayJSON(source, "cancelled") }
            }
            if cancelledAt != nil {
                let notStarted = sources.count - index - 1
                FileHandle.standardError.write(
                    Data("docfs: import cancelled: \(imported) imported, \(source.name) was not imported, \(notStarted) not started\n".utf8))
                throw ExitCode(130)
            }
            progress.draw(force: false)
        }
        progress.clear()
        if cancelledAt != nil {
            FileHandle.standardError.write(
                Data("docfs: import cancelled: \(imported) imported, \(sources.count - imported - refused) not started\n".utf8))
            throw ExitCode(130)
        }
        if progress.enabled {
            FileHandle.standardError.write(Data("\(progress.summary(imported: imported, refused: refused))\n".utf8))
        }
        if refused > 0 { throw ExitCode(1) }
    }

    /// A result line, unbuffered so a reader sees it as soon as the file is done.
    static func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

    /// `--json`: one object per FILE, on its own line.
    struct ResultJSON: Encodable {
        var source: String
        var name: String
        var status: String
        var identifier: String?
        var reason: String?
        enum CodingKeys: String, CodingKey { case source, name, status, identifier, reason }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(source, forKey: .source)
            try c.encode(name, forKey: .name)
            try c.encode(status, forKey: .status)
            try c.encode(identifier, forKey: .identifier)
            try c.encode(reason, forKey: .reason)
        }
    }

    static func sayJSON(_ source: ImportSource, _ status: String, identifier: String? = nil, reason: String? = nil) {
        say(JSONOutput.line(ResultJSON(source: source.path, name: source.name, status: status, identifier: identifier, reason: reason)))
    }

    /// With --types: the name's type must conform to one of them (a folder to public.folder…).
    static func typeRefusal(_ source: ImportSource, allowed: [ContentType]) -> String? {
        guard !allowed.isEmpty else { return nil }
        let registry = ContentTypeRegistry.standard
        let type: ContentType
        if source.isDirectory {
            if let t = registry.type(forFilename: source.name), registry.isPackage(t) { type = t } else { type = .folder }
        } else {
            type = registry.type(forFilename: source.name) ?? .data
        }
        let ok = allowed.contains { wanted in
            registry.conforms(type, to: wanted) || (type == .folder && wanted == .directory)
        }
        return ok ? nil : "its type \(type) is not among the allowed types (\(allowed.map(\.identifier).joined(separator: ", ")))"
    }
}
