import ArgumentParser
import Foundation
import Logging
import DocFSRemote
import DocFSReplica
import DocFSStore

/// `docfs remote setup`: the server's owner prepares it once (and after each docfs upgrade).
struct RemoteSetupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup",
        abstract: "Set a server up for replicas: its schema, a least-privilege replica role, the tree marker.",
        discussion: """
            Run with a role that owns the database (and may create roles, for --replica-role). \
            Applies or upgrades the schema (replicas never do), creates ROLE if it is missing \
            with only what a replica needs, and writes the tree marker beside the objects so \
            that no other tree uses the prefix. Running it again changes nothing but what is \
            missing. See docs/REMOTE.md, "Deploying a server".
            """)

    @Option(help: ArgumentHelp("The server's PostgreSQL database, as its owner.", valueName: "postgres://OWNER@HOST:PORT/DB"))
    var remote: String

    @Option(help: ArgumentHelp("Where contents go.", valueName: "s3://BUCKET[/PREFIX]"))
    var objects: String

    @Option(name: .customLong("s3-endpoint"), help: ArgumentHelp("An S3-compatible server (path-style); AWS itself without it.", valueName: "URL"))
    var s3Endpoint: String?

    @Option(help: "The S3 region (default: AWS_REGION, else us-east-1).")
    var region: String?

    @Option(name: .customLong("s3-credentials"), help: ArgumentHelp("A file (mode 0600) with aws_access_key_id and aws_secret_access_key, read when the environment has no AWS keys.", valueName: "FILE"))
    var s3Credentials: String?

    @Option(name: .customLong("s3-ca"), help: ArgumentHelp("A CA certificate (PEM) to check the S3 endpoint's certificate against (else AWS_CA_BUNDLE).", valueName: "FILE"))
    var s3CA: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("A file (mode 0600) whose first line is the owner's PostgreSQL password, instead of one in the URL.", valueName: "FILE"))
    var passwordFile: String?

    @Option(name: .customLong("replica-role"), help: ArgumentHelp("Create (if missing) and grant the role replicas log in as.", valueName: "ROLE"))
    var replicaRole: String?

    @Option(name: .customLong("replica-password-file"), help: ArgumentHelp("With --replica-role: a file (mode 0600) holding the new role's password (none: the role has no password, e.g. for certificate or peer login).", valueName: "FILE"))
    var replicaPasswordFile: String?

    @Option(help: "A layout file (YAML or JSON) for a server that has none yet.")
    var layout: String?

    func run() throws {
        guard var url = PostgresURL(remote, environment: [:]) else {
            throw UserFacingError("docfs: --remote must be postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?sslmode=…]")
        }
        guard let (bucket, prefix) = ReplicaConfiguration.parseObjects(objects) else {
            throw UserFacingError("docfs: --objects must be s3://BUCKET[/PREFIX]")
        }
        if replicaPasswordFile != nil, replicaRole == nil {
            throw UserFacingError("docfs: --replica-password-file needs --replica-role")
        }
        let password = try replicaPasswordFile.map(Self.readPasswordFile)
        let layoutValue: Layout?
        do { layoutValue = try layout.map { try Layout.load(from: URL(fileURLWithPath: $0)) } } catch {
            throw UserFacingError("docfs: cannot use layout \(layout ?? ""): \(error)")
        }
        var environment = ProcessInfo.processInfo.environment
        if let file = passwordFile {
            guard url.password == nil else { throw UserFacingError("docfs: give the password in --remote or in --password-file, not both") }
            url.password = try Self.readPasswordFile(file)
            environment["PGPASSWORD"] = url.password
        } else if let password = url.password {
            environment["PGPASSWORD"] = password
            FileHandle.standardError.write(Data("docfs: warning: a password in --remote shows in `ps` and your shell's history; give it instead in PGPASSWORD, --password-file FILE (mode 0600), or a line of ~/.pgpass (host:port:database:user:password, mode 0600)\n".utf8))
        }
        var stored = url
        stored.password = nil
        let link = RemoteLink(postgres: stored.withoutPassword, bucket: bucket, prefix: prefix, endpoint: s3Endpoint,
                              region: region ?? environment["AWS_REGION"] ?? "us-east-1",
                              credentialsFile: s3Credentials.map { URL(fileURLWithPath: $0).standardizedFileURL.path },
                              s3CA: s3CA.map { URL(fileURLWithPath: $0).standardizedFileURL.path })
        let configuration: ReplicaConfiguration
        do { configuration = try ReplicaConfiguration.resolve(link: link, store: nil, environment: environment) } catch {
            throw UserFacingError("docfs: cannot use the remote: \(error)")
        }
        var quiet = Logger(label: "docfs.setup")
        quiet.logLevel = .warning
        let (role, layoutValueCopy, logger) = (replicaRole, layoutValue, quiet)
        switch runBlocking({ try await RemoteSetup.run(configuration: configuration, replicaRole: role, password: password,
                                                       layout: layoutValueCopy, logger: logger) }) {
        case .failure(let error):
            throw UserFacingError("docfs: cannot set up \(stored): \(error)")
        case .success(let report):
            var line = "docfs: \(stored) is set up (schema version \(report.schemaVersion), tree \(report.treeID)) with contents in s3://\(bucket)/\(prefix)"
            if let role = report.replicaRole { line += "; replica role \(role) \(report.createdRole ? "created" : "granted again")" }
            if report.layoutSet { line += "; layout set" }
            print(line)
        }
    }

    /// The first line of a file only its owner may read.
    static func readPasswordFile(_ path: String) throws -> String {
        var st = stat()
        guard stat(path, &st) == 0 else { throw UserFacingError("docfs: cannot read \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & 0o077 == 0 else { throw UserFacingError("docfs: \(path) may be read by others: chmod 600 it") }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let first = text.split(separator: "\n", omittingEmptySubsequences: false).first, !first.isEmpty else {
            throw UserFacingError("docfs: \(path) holds no password")
        }
        return String(first)
    }
}
