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
                FileHandle.standardError.write(Data("docfs: import cancelled: \(imported) imported, \(source.name) was not imported, \(notStarted) not started\n".utf8))
                throw ExitCode(130)
            }
            progress.draw(force: false)
        }
        progress.clear()
        if cancelledAt != nil {
            FileHandle.standardError.write(Data("docfs: import cancelled: \(imported) imported, \(sources.count - imported - refused) not started\n".utf8))
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

enum ImportOutcome {
    case imported(String)
    case refused(String)
    case cancelled
}

/// One FILE argument, looked at before anything is copied.
struct ImportSource {
    let path: String
    let name: String
    var isDirectory = false
    var fileCount = 1
    var bytes: Int64 = 0
    var problem: String?

    init(path: String) {
        self.path = path
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        name = (trimmed as NSString).lastPathComponent
        var st = stat()
        guard lstat(path, &st) == 0 else { problem = String(cString: strerror(errno)); return }
        switch st.st_mode & S_IFMT {
        case S_IFREG: bytes = Int64(st.st_size)
        case S_IFDIR:
            isDirectory = true
            fileCount = 0
            let walker = FileManager.default.enumerator(atPath: path)
            while let rel = walker?.nextObject() as? String {
                var s = stat()
                if lstat(path + "/" + rel, &s) == 0, s.st_mode & S_IFMT == S_IFREG { fileCount += 1; bytes += Int64(s.st_size) }
            }
        case S_IFLNK: bytes = 0
        default: problem = "only files, folders and symbolic links can be imported"
        }
    }
}

/// Files, bytes and rate on standard error, redrawn at most ten times a second.
struct ImportProgress {
    let enabled: Bool
    var totalFiles = 0, doneFiles = 0
    var totalBytes: Int64 = 0, doneBytes: Int64 = 0
    var current = ""
    let start = Date()
    private var lastDraw = Date.distantPast
    private var shown = false

    init(enabled: Bool) { self.enabled = enabled }

    mutating func file(_ name: String) { current = name }
    mutating func bytes(_ n: Int) { doneBytes += Int64(n); draw(force: false) }
    mutating func fileDone() { doneFiles += 1; draw(force: false) }
    mutating func skip(_ source: ImportSource) { totalFiles -= source.fileCount; totalBytes -= source.bytes }

    static func size(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n), i = 0
        while v >= 1024, i < units.count - 1 { v /= 1024; i += 1 }
        return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
    }

    var rate: String {
        let t = Date().timeIntervalSince(start)
        return t > 0 ? Self.size(Int64(Double(doneBytes) / t)) + "/s" : "-"
    }

    mutating func draw(force: Bool) {
        guard enabled else { return }
        let now = Date()
        guard force || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        let line = "\r\u{1B}[K[\(doneFiles)/\(totalFiles) files] \(Self.size(doneBytes)) of \(Self.size(totalBytes)), \(rate)  \(current.prefix(40))"
        FileHandle.standardError.write(Data(line.utf8))
        shown = true
    }

    mutating func clear() {
        guard enabled, shown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        shown = false
    }

    func summary(imported: Int, refused: Int) -> String {
        let t = Date().timeIntervalSince(start)
        return "docfs: \(imported) imported, \(refused) refused; \(doneFiles) files, \(Self.size(doneBytes)) in \(String(format: "%.1f", t)) s (\(rate))"
    }
}

protocol ImportDestination {
    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome
    func close()
}

// MARK: - Through a mount

/// DIR inside a docfs mount: plain POSIX calls, so the mount's rules apply as for `cp`.
struct MountDestination: ImportDestination {
    let folder: String

    init(folder: String) throws {
        var st = stat()
        guard stat(folder, &st) == 0 else { throw UserFacingError("docfs: \(folder): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw UserFacingError("docfs: \(folder) is not a folder") }
        guard Info.attribute(folder, "user.docfs.identifier") != nil else {
            throw UserFacingError("docfs: \(folder) is not inside a docfs mount (to import into a store that is not mounted, use --store STORE --to /FOLDER)")
        }
        self.folder = folder
    }

    func close() {}

    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome {
        let target = folder + "/" + source.name
        let outcome = copy(source.path, to: target, progress: &progress)
        switch outcome {
        case .imported:
            guard let id = Info.attribute(target, "user.docfs.identifier") else {
                return .refused("imported, but its identifier cannot be read: \(String(cString: strerror(errno)))")
            }
            return .imported(id)
        case .refused, .cancelled:
            return outcome
        }
    }

    /// Copies one file, link or tree; a failed or cancelled folder is removed again.
    private func copy(_ source: String, to target: String, progress: inout ImportProgress) -> ImportOutcome {
        var st = stat()
        guard lstat(source, &st) == 0 else { return .refused(String(cString: strerror(errno))) }
        switch st.st_mode & S_IFMT {
        case S_IFLNK:
            guard let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: source) else { return .refused("cannot read the link") }
            return symlink(dest, target) == 0 ? .imported("") : .refused(String(cString: strerror(errno)))
        case S_IFDIR:
            guard mkdir(target, st.st_mode & 0o7777) == 0 else { return .refused(String(cString: strerror(errno))) }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: source)) ?? []).sorted()
            for name in names {
                let inner = copy(source + "/" + name, to: target + "/" + name, progress: &progress)
                switch inner {
                case .imported: continue
                case .refused(let reason):
                    removeTree(target)
                    return .refused("\(name): \(reason)")
                case .cancelled:
                    removeTree(target)
                    return .cancelled
                }
            }
            return .imported("")
        case S_IFREG:
            return copyFile(source, to: target, mode: st.st_mode & 0o7777, progress: &progress)
        default:
            return .refused("only files, folders and symbolic links can be imported")
        }
    }

    private func copyFile(_ source: String, to target: String, mode: mode_t, progress: inout ImportProgress) -> ImportOutcome {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return .refused(String(cString: strerror(errno))) }
        defer { Glibc.close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard output >= 0 else { return .refused(String(cString: strerror(errno))) }
        progress.file((target as NSString).lastPathComponent)
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        /// Drops the new file before its close: unlinked while open, it is never imported.
        func abandon() { unlink(target); Glibc.close(output) }
        while true {
            if importCancelled.load(ordering: .relaxed) { abandon(); return .cancelled }
            let n = read(input, buffer, size)
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno; abandon(); return .refused("reading it: \(String(cString: strerror(e)))")
            }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = write(output, buffer + done, n - done)
                if w < 0 {
                    if errno == EINTR { continue }
                    let e = errno; abandon(); return .refused(String(cString: strerror(e)))
                }
                done += w
            }
            progress.bytes(n)
        }
        if importCancelled.load(ordering: .relaxed) { abandon(); return .cancelled }
        // close() is the import: its result is the provider's verdict.
        if Glibc.close(output) != 0 { return .refused(String(cString: strerror(errno))) }
        progress.fileDone()
        return .imported("")
    }

    private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
}

// MARK: - Straight into a store

/// A store that is not mounted: LocalStore directly, with the same rules the mount applies.
final class StoreDestination: ImportDestination {
    let store: LocalStore
    let folder: Item
    let folderPath: String

    init(store path: String, folder: String) throws {
        var log = Logger(label: "docfs.import")
        log.logLevel = .warning
        do { store = try LocalStore.open(at: URL(fileURLWithPath: path), logger: log) } catch let error as ProviderError {
            if error.code == .busy {
                throw UserFacingError("docfs: cannot import into store \(path): \(error.reason); import through the mount instead (--to MOUNT/FOLDER)")
            }
            throw UserFacingError("docfs: cannot open store \(path): \(error)")
        } catch {
            throw UserFacingError("docfs: cannot open store \(path): \(error)")
        }
        let opened: LocalStore = store
        var current = try? opened.item(for: .rootContainer)
        for component in folder.split(separator: "/") where component != "." {
            current = current.flatMap { try? opened.childItem(named: String(component), in: $0.identifier) }
        }
        guard let current, current.kind == .folder else {
            opened.close()
            throw UserFacingError("docfs: no folder \(folder) in store \(path)")
        }
        self.folder = current
        self.folderPath = folder
    }

    func close() { store.close() }

    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome {
        let name = source.name
        // The folder's rules, as the mount checks them before anything is written.
        do throws(ProviderError) { try CapabilityCheck.add(into: folder) } catch {
            return .refused("\(folderPath): \(error.reason)")
        }
        if (try? store.childItem(named: name, in: folder.identifier)) != nil { return .refused("\(name) already exists in \(folderPath)") }
        do throws(ProviderError) {
            try store.admitItem(named: name, kind: source.isDirectory ? .folder : .file, into: folder.identifier)
        } catch {
            return .refused(error.reason.isEmpty ? error.code.rawValue : error.reason)
        }
        // Stage a copy under a sealed name; it is readable by the store only inside its scope.
        progress.file(name)
        let sealed = store.stagingDirectory.appendingPathComponent("import-\(getpid())-\(UUID().uuidString)").path
        if let problem = stageCopy(source, to: sealed, progress: &progress) {
            try? FileManager.default.removeItem(atPath: sealed)
            return problem
        }
        let scoped: SecurityScopedURL
        do { scoped = try SecurityScopedURL(sealed: sealed, name: name, in: store.stagingDirectory) } catch {
            try? FileManager.default.removeItem(atPath: sealed)
            return .refused(error.reason)
        }
        defer { scoped.finish() }
        let store = self.store, parent = folder.identifier
        let result = Self.blocking { () async throws(ProviderError) -> Item in
            try await store.importDocument(from: scoped, toParentItemIdentifier: parent)
        }
        switch result {
        case .success(let item):
            progress.fileDone()
            return .imported(item.identifier.rawValue)
        case .failure(let error):
            return .refused(error.reason.isEmpty ? error.code.rawValue : error.reason)
        }
    }

    /// Copies the source to the sealed staging path; nil when done.
    private func stageCopy(_ source: ImportSource, to sealed: String, progress: inout ImportProgress) -> ImportOutcome? {
        if source.isDirectory {
            do { try FileManager.default.copyItem(atPath: source.path, toPath: sealed) } catch {
                return .refused("cannot stage it: \(error.localizedDescription)")
            }
            progress.bytes(Int(source.bytes))
            return importCancelled.load(ordering: .relaxed) ? .cancelled : nil
        }
        var st = stat()
        guard lstat(source.path, &st) == 0 else { return .refused(String(cString: strerror(errno))) }
        if st.st_mode & S_IFMT == S_IFLNK {
            guard let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: source.path), symlink(dest, sealed) == 0 else {
                return .refused("cannot stage the link")
            }
            return nil
        }
        let input = open(source.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return .refused(String(cString: strerror(errno))) }
        defer { Glibc.close(input) }
        let output = open(sealed, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0o7777)
        guard output >= 0 else { return .refused("cannot stage it: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        while true {
            if importCancelled.load(ordering: .relaxed) { return .cancelled }
            let n = read(input, buffer, size)
            if n < 0 { if errno == EINTR { continue }; return .refused("reading it: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = write(output, buffer + done, n - done)
                if w < 0 { if errno == EINTR { continue }; return .refused("cannot stage it: \(String(cString: strerror(errno)))") }
                done += w
            }
            progress.bytes(n)
        }
        var times = [timespec](repeating: timespec(), count: 2)
        times[0] = st.st_atim
        times[1] = st.st_mtim
        futimens(output, times)
        return importCancelled.load(ordering: .relaxed) ? .cancelled : nil
    }

    /// Runs an async provider action from this synchronous command.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws(ProviderError) -> T) -> Result<T, ProviderError> {
        let done = DispatchSemaphore(value: 0)
        let box = Mutex<Result<T, ProviderError>?>(nil)
        Task.detached {
            let r: Result<T, ProviderError>
            do throws(ProviderError) { r = .success(try await body()) } catch { r = .failure(error) }
            box.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return box.withLock { $0! }
    }
}
