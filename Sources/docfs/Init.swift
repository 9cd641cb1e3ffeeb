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

    @Option(help: ArgumentHelp("Make the store a replica of a server: its PostgreSQL database.", valueName: "postgres://USER[:PASSWORD]@HOST:PORT/DB"))
    var remote: String?

    @Option(help: ArgumentHelp("With --remote: where contents go.", valueName: "s3://BUCKET[/PREFIX]"))
    var objects: String?

    @Option(name: .customLong("s3-endpoint"), help: ArgumentHelp("With --remote: an S3-compatible server (path-style); AWS itself without it.", valueName: "URL"))
    var s3Endpoint: String?

    @Option(help: "With --remote: the S3 region (default: AWS_REGION, else us-east-1).")
    var region: String?

    @Option(name: .customLong("s3-credentials"), help: ArgumentHelp("With --remote: a file (mode 0600) with aws_access_key_id and aws_secret_access_key, read when the environment has no AWS keys.", valueName: "FILE"))
    var s3Credentials: String?

    @Option(name: .customLong("s3-ca"), help: ArgumentHelp("With --remote: a CA certificate (PEM) to check the S3 endpoint's certificate against, instead of the system's (else AWS_CA_BUNDLE).", valueName: "FILE"))
    var s3CA: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("With --remote: a file (mode 0600) whose first line is the PostgreSQL password (kept in STORE/pgpass), instead of one in the URL.", valueName: "FILE"))
    var passwordFile: String?

    func validate() throws {
        if remote == nil, objects != nil || s3Endpoint != nil || region != nil || s3Credentials != nil || s3CA != nil || passwordFile != nil {
            throw ValidationError("--objects, --s3-endpoint, --region, --s3-credentials, --s3-ca and --password-file go with --remote")
        }
        if remote != nil, objects == nil { throw ValidationError("--remote needs --objects s3://BUCKET[/PREFIX]") }
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
        if let remote {
            try initReplica(remote: remote, layout: layoutValue)
        } else {
            do { try LocalStore.create(at: URL(fileURLWithPath: store), layout: layoutValue) } catch {
                throw UserFacingError("docfs: cannot create store at \(store): \(error)")
            }
        }
        try Templates.install(templates, store: store)
    }

    /// `--remote`: checks the server, makes the store a replica of it (and downloads the tree it
    /// has). Nothing is left behind when it fails.
    private func initReplica(remote: String, layout: Layout?) throws {
        guard var url = PostgresURL(remote, environment: [:]) else {
            throw UserFacingError("docfs: --remote must be postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?sslmode=disable|allow|prefer|require|verify-ca|verify-full&sslrootcert=FILE&sslcert=FILE&sslkey=FILE]")
        }
        guard let objects, let (bucket, prefix) = ReplicaConfiguration.parseObjects(objects) else {
            throw UserFacingError("docfs: --objects must be s3://BUCKET[/PREFIX]")
        }
        if let s3Endpoint, S3Endpoint(url: s3Endpoint) == nil {
            throw UserFacingError("docfs: --s3-endpoint must be http(s)://HOST[:PORT]")
        }
        var stored = url
        stored.password = nil
        // Certificate paths are kept absolute: the mount may start from another folder.
        let absolute = { (path: String?) in path.map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
        stored.sslRootCert = absolute(stored.sslRootCert)
        stored.sslCert = absolute(stored.sslCert)
        stored.sslKey = absolute(stored.sslKey)
        let credentialsFile = s3Credentials.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        let caFile = s3CA.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw UserFacingError("docfs: --s3-ca: cannot read \(caFile)")
        }
        let fromFile = try passwordFile.map(RemoteSetupCommand.readPasswordFile)
        if let fromFile {
            guard url.password == nil else { throw UserFacingError("docfs: give the password in --remote or in --password-file, not both") }
            url.password = fromFile
        }
        let link = RemoteLink(postgres: stored.withoutPassword,
                              bucket: bucket, prefix: prefix, endpoint: s3Endpoint,
                              region: region ?? ProcessInfo.processInfo.environment["AWS_REGION"] ?? "us-east-1",
                              credentialsFile: credentialsFile, s3CA: caFile)
        let storeURL = URL(fileURLWithPath: store)
        var environment = ProcessInfo.processInfo.environment
        if let password = url.password {
            environment["PGPASSWORD"] = password
        }
        if url.password != nil, fromFile == nil {
            // A password on the command line shows in `ps` and the shell's history.
            FileHandle.standardError.write(Data("docfs: warning: a password in --remote shows in `ps` and your shell's history; give it instead in PGPASSWORD, --password-file FILE (mode 0600), or a line of ~/.pgpass (host:port:database:user:password, mode 0600)\n".utf8))
        }
        let configuration: ReplicaConfiguration
        do { configuration = try ReplicaConfiguration.resolve(link: link, store: storeURL, environment: environment) } catch {
            throw UserFacingError("docfs: cannot use the remote: \(error)")
        }
        let existed = FileManager.default.fileExists(atPath: store)
        // Only a new path or an empty directory: the cleanup after a failure removes what is there.
        if existed, !((try? FileManager.default.contentsOfDirectory(atPath: store))?.isEmpty ?? false) {
            throw UserFacingError("docfs: cannot create store \(store): give a new path or an empty directory")
        }
        let logger = Logger(label: "docfs")
        let result = runBlocking {
            try await ReplicaBootstrap.initialize(store: storeURL, link: link, configuration: configuration,
                                                  layout: layout, logger: logger)
        }
        switch result {
        case .success(let summary):
            do { try ReplicaConfiguration.savePassword(url, store: storeURL) } catch {
                throw UserFacingError("docfs: \(error)")
            }
            var line = "docfs: \(store) is a replica of \(stored) with contents in s3://\(bucket)/\(prefix) (server schema version \(summary.schemaVersion))"
            if summary.files + summary.folders + summary.links > 0 {
                line += "; took the metadata of \(summary.folders) folder(s), \(summary.files) file(s) (\(summary.bytes) bytes, downloaded when opened), \(summary.links) link(s)"
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
