import ArgumentParser
import Foundation
import Logging
import DocFSRemote
import DocFSReplica
import DocFSStore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store (a new path or an existing empty directory).")

    @Argument(help: "Where to create the store.")
    var store: String

    @Option(help: "A layout file (YAML or JSON) declaring folders, their capabilities and allowed types.")
    var layout: String?

    @OptionGroup var server: RemoteOptions

    @Option(
        name: .customLong("remote-listen"),
        help: ArgumentHelp(
            "Where the mount LISTENs for other replicas' changes, when --remote is a pgbouncer in transaction pooling (which cannot carry LISTEN): PostgreSQL itself, as the same role; or none: no LISTEN, the change log is read every second. Kept with the store.",
            valueName: "postgres://USER@HOST:PORT/DB|none"))
    var remoteListen: String?

    @Option(
        name: .customLong("remote-read"),
        help: ArgumentHelp(
            "A hot standby of --remote's PostgreSQL (streaming replication) that the mount reads the change log, listings and metadata from; writes still go to --remote, and no change is applied before the standby has replayed it. As the same role unless the URL names another. Kept with the store.",
            valueName: "postgres://USER@HOST:PORT/DB"))
    var remoteRead: String?

    func validate() throws {
        if server.remote == nil, server.anyServerOption {
            throw ValidationError("--objects, --s3-endpoint, --region, --s3-credentials, --s3-ca and --password-file go with --remote")
        }
        if server.remote != nil, server.objects == nil { throw ValidationError("--remote needs --objects s3://BUCKET[/PREFIX]") }
        if server.remote == nil, remoteListen != nil { throw ValidationError("--remote-listen goes with --remote") }
        if server.remote == nil, remoteRead != nil { throw ValidationError("--remote-read goes with --remote") }
    }

    func run() throws {
        let layoutValue: Layout?
        var templates: [(identifier: String, file: String, source: Templates.Contents)] = []
        if let layout {
            let url = URL(fileURLWithPath: layout)
            do { layoutValue = try Layout.load(from: url) } catch {
                throw UserFacingError("docfs: cannot use layout \(layout): \(error)")
            }
            // Templates for `docfs new`, checked before the store is made.
            if let layoutValue { templates = try Templates.plan(for: layoutValue, layoutFile: url) }
        } else {
            layoutValue = nil
        }
        if server.remote != nil {
            try initReplica(layout: layoutValue)
        } else {
            do { try LocalStore.create(at: URL(fileURLWithPath: store), layout: layoutValue) } catch {
                throw UserFacingError("docfs: cannot create store at \(store): \(error)")
            }
        }
        try Templates.install(templates, store: store)
    }

    /// `--remote-listen` as the store keeps it: no password (the same role's is used), certificate
    /// paths absolute.
    private func listenLink() throws -> String? {
        guard let remoteListen else { return nil }
        if remoteListen == RemoteLink.noListen { return remoteListen }
        return try keptURL(remoteListen, option: "--remote-listen", shape: "none or postgres://USER@HOST:PORT/DATABASE[?sslmode=…]")
    }

    /// A second URL of the server as the store keeps it (`--remote-listen`, `--remote-read`).
    private func keptURL(_ text: String, option: String, shape: String) throws -> String {
        guard var url = PostgresURL(text, environment: [:]) else {
            throw UserFacingError("docfs: \(option) must be \(shape)")
        }
        guard url.password == nil else {
            throw UserFacingError(
                "docfs: \(option) takes no password: it is --remote's when the role is the same, else STORE/pgpass, PGPASSWORD or ~/.pgpass")
        }
        let absolute = { (path: String?) in path.map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
        url.sslRootCert = absolute(url.sslRootCert)
        url.sslCert = absolute(url.sslCert)
        url.sslKey = absolute(url.sslKey)
        return url.withoutPassword
    }

    /// `--remote`: checks the server, makes the store a replica of it (and downloads the tree it
    /// has). Nothing is left behind when it fails.
    private func initReplica(layout: Layout?) throws {
        let server = try self.server.server()
        let (url, stored, environment, bucket, prefix) = (server.url, server.stored, server.environment, server.bucket, server.prefix)
        var kept = server.link
        kept.listen = try listenLink()
        kept.read = try remoteRead.map { try keptURL($0, option: "--remote-read", shape: "postgres://USER@HOST:PORT/DATABASE[?sslmode=…]") }
        let link = kept
        let storeURL = URL(fileURLWithPath: store)
        let configuration: ReplicaConfiguration
        do { configuration = try ReplicaConfiguration.resolve(link: link, store: storeURL, environment: environment) } catch {
            throw UserFacingError("docfs: cannot use the remote: \(error)")
        }
        // The listening URL is checked now, like --remote (the mount would only retry it).
        if case .url(let listen) = configuration.listen,
            case .failure(let error) = runBlocking({ try await RemoteDatabase.probe(listen) })
        {
            throw UserFacingError("docfs: --remote-listen \(listen): \(error)")
        }
        // The standby too, and that it serves this tree (another database's rows would be applied).
        if let standby = configuration.read,
            case .failure(let error) = runBlocking({ try await configuration.checkStandby() })
        {
            throw UserFacingError("docfs: --remote-read \(standby): \(error)")
        }
        let existed = FileManager.default.fileExists(atPath: store)
        // Only a new path or an empty directory: the cleanup after a failure removes what is there.
        if existed, !((try? FileManager.default.contentsOfDirectory(atPath: store))?.isEmpty ?? false) {
            throw UserFacingError("docfs: cannot create store \(store): give a new path or an empty directory")
        }
        let logger = Logger(label: "docfs")
        let progress = ProgressLine()
        let result = runBlocking {
            try await ReplicaBootstrap.initialize(
                store: storeURL, link: link, configuration: configuration,
                layout: layout, logger: logger
            ) { s in
                progress.update(
                    "taking the server's tree: \(s.folders) folder(s), \(s.files) file(s) (\(ImportProgress.size(s.bytes))), \(s.links) link(s)")
            }
        }
        progress.clear()
        switch result {
        case .success(let summary):
            do { try ReplicaConfiguration.savePassword(url, store: storeURL) } catch {
                throw UserFacingError("docfs: \(error)")
            }
            var line =
                "docfs: \(store) is a replica of \(stored) with contents in s3://\(bucket)/\(prefix) (server schema version \(summary.schemaVersion))"
            if summary.files + summary.folders + summary.links > 0 {
                line +=
                    "; took the metadata of \(summary.folders) folder(s), \(summary.files) file(s) (\(summary.bytes) bytes, downloaded when opened), \(summary.links) link(s)"
            }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        case .failure(let error):
            // Nothing half-done: the store goes (an empty directory given to init stays, emptied).
            if existed {
                for entry in (try? FileManager.default.contentsOfDirectory(atPath: store)) ?? [] {
                    try? FileManager.default.removeItem(atPath: store + "/" + entry)
                }
            } else {
                try? FileManager.default.removeItem(atPath: store)
            }
            throw UserFacingError("docfs: cannot make \(store) a replica of \(stored): \(error)")
        }
    }
}
