import ArgumentParser
import Foundation
import Glibc
import Logging
import DocFSRemote
import DocFSReplica
import DocFSStore

/// `docfs versions PATH`: a replica's file's versions on the server; `docfs versions restore
/// PATH N [--as NAME]` writes version N back through the mount (a new version the other
/// replicas follow) or beside it.
struct Versions: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List a replica's file's versions on the server, or restore one.",
        discussion: """
            The server keeps each version of a file until `docfs remote gc` removes it, once it \
            has not been current for --keep-versions (30 days by default).
            """,
        subcommands: [VersionsList.self, VersionsRestore.self],
        defaultSubcommand: VersionsList.self)

    /// The store of the mount `path` is in, and the item's server identifier.
    static func locate(_ path: String) throws -> (store: String, itemID: Int64, configuration: ReplicaConfiguration) {
        try CacheCommand.requireMounted(path)
        guard let store = MountTable.store(holding: path) else {
            throw UserFacingError("docfs: \(path): cannot tell which store is mounted there")
        }
        guard let link = try? LocalStore.remoteLink(at: URL(fileURLWithPath: store)) else {
            throw UserFacingError("docfs: \(path) is in a mount of \(store), which is not a replica of a server")
        }
        guard let text = Info.attribute(path, "user.docfs.identifier"), let id = Int64(text) else {
            throw UserFacingError("docfs: \(path) has no identifier")
        }
        guard id < LocalStore.temporaryRowBase else { throw UserFacingError("docfs: \(path) is not on the server yet: it has no versions there") }
        do {
            return (store, id, try ReplicaConfiguration.resolve(link: link, store: URL(fileURLWithPath: store)))
        } catch {
            throw UserFacingError("docfs: \(store) is a replica of \(link.postgres): \(error)")
        }
    }

    static var quiet: Logger {
        var logger = Logger(label: "docfs.versions")
        logger.logLevel = .warning
        return logger
    }
}

struct VersionsList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List a file's versions (the default).")

    @Argument(help: "A file inside a docfs mount of a replica.") var path: String
    @Flag(help: "Print JSON: {current, versions: [{number, createdNs, size, key, collected, replica, role}]}.") var json = false

    func run() throws {
        let (_, id, configuration) = try Versions.locate(path)
        let logger = Versions.quiet
        let listing: VersionHistory.Listing
        switch runBlocking({ try await VersionHistory.list(itemID: id, configuration: configuration, logger: logger) }) {
        case .success(let l): listing = l
        case .failure(let error): throw UserFacingError("docfs: versions of \(path): \(error)")
        }
        if json {
            struct Output: Encodable { var current: Int64?; var versions: [RemoteVersion] }
            JSONOutput.print(Output(current: listing.current, versions: listing.versions))
            return
        }
        for version in listing.versions {
            let date = Date(timeIntervalSince1970: Double(version.createdNs) / 1e9).formatted(.iso8601)
            var line = String(format: "%4lld  %@  %12lld bytes", version.number, date, version.size)
            if let replica = version.replica { line += "  from \(replica)" }
            if let role = version.role { line += " (role \(role))" }
            if version.number == listing.current { line += "  current" }
            if version.collected { line += "  removed by gc" }
            print(line)
        }
    }
}

struct VersionsRestore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Make version N the file's contents again, or a file beside it.")

    @Argument(help: "A file inside a docfs mount of a replica.") var path: String
    @Argument(help: "The version's number (`docfs versions PATH`).") var number: Int64
    @Option(name: .customLong("as"), help: ArgumentHelp("Write it as a new file NAME beside PATH instead.", valueName: "NAME")) var name: String?

    func validate() throws {
        if let name, name.isEmpty || name.contains("/") || name == "." || name == ".." {
            throw ValidationError("--as: a name, not a path: \(name)")
        }
    }

    func run() throws {
        let (store, id, configuration) = try Versions.locate(path)
        // Fetched into the store's staging folder when this user may write there (its
        // filesystem has room for the store's files), else the temporary folder; then written
        // through the mount like any edit.
        let folder = access(store + "/staging", W_OK) == 0 ? store + "/staging" : NSTemporaryDirectory()
        let fetched = folder + "/restore-\(getpid())-\(UUID().uuidString)"
        defer { unlink(fetched) }
        let (number, logger) = (self.number, Versions.quiet)
        let progress = ProgressLine()
        defer { progress.clear() }
        progress.update("fetching version \(number) from the server", force: true)
        switch runBlocking({ try await VersionHistory.fetch(itemID: id, number: number, to: fetched, configuration: configuration, logger: logger) })
        {
        case .success: break
        case .failure(let error): throw UserFacingError("docfs: version \(number) of \(path): \(error)")
        }
        var fetchedSize = stat()
        let size = stat(fetched, &fetchedSize) == 0 ? Int64(fetchedSize.st_size) : 0
        let target = name.map { (path as NSString).deletingLastPathComponent + "/" + $0 } ?? path
        let flags = name == nil ? O_WRONLY | O_TRUNC : O_WRONLY | O_CREAT | O_EXCL
        let out = open(target, flags | O_CLOEXEC, 0o644)
        guard out >= 0 else { throw UserFacingError("docfs: cannot write \(target): \(String(cString: strerror(errno)))") }
        let input = open(fetched, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { close(out); throw UserFacingError("docfs: cannot read the fetched version: \(String(cString: strerror(errno)))") }
        defer { close(input) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: Int64 = 0
        while true {
            let n = read(input, &buffer, buffer.count)
            if n == 0 { break }
            guard n > 0 else { close(out); throw UserFacingError("docfs: cannot read the fetched version: \(String(cString: strerror(errno)))") }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { write(out, $0.baseAddress! + written, n - written) }
                guard w > 0 else { close(out); throw UserFacingError("docfs: cannot write \(target): \(String(cString: strerror(errno)))") }
                written += w
            }
            total += Int64(n)
            progress.update("writing version \(number): \(ImportProgress.size(total)) of \(ImportProgress.size(size)), \(progress.rate(total))")
        }
        progress.clear()
        // close() returning 0 is the mount's promise that the contents are kept.
        guard close(out) == 0 else { throw UserFacingError("docfs: cannot write \(target): \(String(cString: strerror(errno)))") }
        print("docfs: version \(number) of \(path) restored to \(target) (\(total) bytes)")
    }
}
