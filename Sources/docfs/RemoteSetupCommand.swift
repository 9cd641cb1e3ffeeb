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

    @OptionGroup var server: RemoteOptions

    @Option(name: .customLong("replica-role"), help: ArgumentHelp("Create (if missing) and grant the role replicas log in as.", valueName: "ROLE"))
    var replicaRole: String?

    @Option(
        name: .customLong("replica-password-file"),
        help: ArgumentHelp(
            "With --replica-role: a file (mode 0600) holding the new role's password (none: the role has no password, e.g. for certificate or peer login).",
            valueName: "FILE"))
    var replicaPasswordFile: String?

    @Option(help: "A layout file (YAML or JSON) for a server that has none yet.")
    var layout: String?

    func run() throws {
        guard server.remote != nil, server.objects != nil else {
            throw UserFacingError("docfs: remote setup needs --remote postgres://OWNER@HOST:PORT/DB and --objects s3://BUCKET[/PREFIX]")
        }
        if replicaPasswordFile != nil, replicaRole == nil {
            throw UserFacingError("docfs: --replica-password-file needs --replica-role")
        }
        let password = try replicaPasswordFile.map(RemoteOptions.readPasswordFile)
        let layoutValue: Layout?
        do { layoutValue = try layout.map { try Layout.load(from: URL(fileURLWithPath: $0)) } } catch {
            throw UserFacingError("docfs: cannot use layout \(layout ?? ""): \(error)")
        }
        let server = try self.server.server()
        let (stored, link, environment, bucket, prefix) = (server.stored, server.link, server.environment, server.bucket, server.prefix)
        let configuration: ReplicaConfiguration
        do { configuration = try ReplicaConfiguration.resolve(link: link, store: nil, environment: environment) } catch {
            throw UserFacingError("docfs: cannot use the remote: \(error)")
        }
        var quiet = Logger(label: "docfs.setup")
        quiet.logLevel = .warning
        let (role, layoutValueCopy, logger) = (replicaRole, layoutValue, quiet)
        let progress = ProgressLine()
        defer { progress.clear() }
        let result = runBlocking({
            try await RemoteSetup.run(
                configuration: configuration, replicaRole: role, password: password,
                layout: layoutValueCopy, logger: logger
            ) { step in
                progress.update("docfs remote setup: \(step)", force: true)
            }
        })
        progress.clear()
        switch result {
        case .failure(let error):
            throw UserFacingError("docfs: cannot set up \(stored): \(error)")
        case .success(let report):
            var line =
                "docfs: \(stored) is set up (schema version \(report.schemaVersion), tree \(report.treeID)) with contents in s3://\(bucket)/\(prefix)"
            if let role = report.replicaRole { line += "; replica role \(role) \(report.createdRole ? "created" : "granted again")" }
            if report.layoutSet { line += "; layout set" }
            print(line)
        }
    }
}
