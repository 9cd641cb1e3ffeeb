import ArgumentParser
import Foundation
import Logging
import DocFSRemote
import DocFSReplica
import DocFSStore

/// The owner's commands for replicas' login roles: one per replica, listed and revocable.
enum ReplicaRoleCommand {
    /// Runs `body` with the server the options name (the owner's role), for one command.
    static func withDatabase<T: Sendable>(
        _ options: RemoteOptions, _ what: String,
        _ body: @escaping @Sendable (RemoteDatabase) async throws -> T
    ) throws -> T {
        guard options.remote != nil, options.objects != nil else {
            throw UserFacingError("docfs: \(what) needs --remote postgres://OWNER@HOST:PORT/DB and --objects s3://BUCKET[/PREFIX]")
        }
        let server = try options.server()
        let configuration: ReplicaConfiguration
        do { configuration = try ReplicaConfiguration.resolve(link: server.link, store: nil, environment: server.environment) } catch {
            throw UserFacingError("docfs: cannot use the remote: \(error)")
        }
        var logger = Logger(label: "docfs.replicas")
        logger.logLevel = .warning
        let (url, quiet) = (configuration.postgres, logger)
        switch runBlocking({ () async throws -> T in
            let database = RemoteDatabase(url: url, logger: quiet, maximumConnections: 2, operationTimeout: .seconds(15))
            do {
                let result = try await body(database)
                await database.shutdown()
                return result
            } catch {
                await database.shutdown()
                throw error
            }
        }) {
        case .success(let value): return value
        case .failure(let error): throw UserFacingError("docfs: \(what) on \(server.stored): \(error)")
        }
    }
}

/// `docfs remote add-replica NAME`: a login role for one replica.
struct RemoteAddReplica: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-replica",
        abstract: "Make a login role for one replica (the owner's step), and say how to init with it.",
        discussion: """
            The role is a member of the tree's replicas group: it reads the tables and writes only \
            through the server's functions, which record it on every change and version. Run with \
            the database's owner (with CREATEROLE). Running it again for a removed replica lets it in again.
            """)

    @OptionGroup var server: RemoteOptions

    @Argument(help: "The replica's role name (letters, digits, _, - and .).")
    var name: String

    @Option(
        name: .customLong("replica-password-file"),
        help: ArgumentHelp("A file (mode 0600) holding the role's password (none: certificate or peer login).", valueName: "FILE"))
    var replicaPasswordFile: String?

    func run() throws {
        let password = try replicaPasswordFile.map(RemoteOptions.readPasswordFile)
        let name = self.name
        let (created, group, largeObjects) = try ReplicaRoleCommand.withDatabase(server, "add-replica") { database in
            (
                try await database.addReplica(name, password: password), try await database.replicasGroup(),
                try await database.publicMayCreateLargeObjects()
            )
        }
        let stored = try server.server().stored
        var url = stored
        url.user = name
        url.password = nil
        print("docfs: replica \(name) \(created ? "added" : "let in again") (a login role in \(group))")
        print("init a replica with: docfs init --remote \(url) --objects \(server.objects ?? "s3://BUCKET/PREFIX") STORE")
        if largeObjects {
            FileHandle.standardError.write(
                Data(
                    """
                    docfs: warning: every role may create large objects in this database, outside every quota (the \
                    functions are the bootstrap superuser's); a superuser runs, in it: \(RemoteSchema.largeObjectRevoke)

                    """.utf8))
        }
        if let objects = server.objects, let (bucket, prefix) = ReplicaConfiguration.parseObjects(objects) {
            print("give it S3 keys of its own, with this policy and no other S3 rights (AWS IAM, MinIO):")
            print(Self.objectPolicy(bucket: bucket, prefix: prefix, role: name))
        }
    }

    /// What one replica's object credentials may do (docs/REMOTE.md, *The bucket*): read the
    /// tree's objects (and their versions: readers ask for a pack's recorded version), add packs
    /// under its own folder (`PREFIX/packs/ROLE/`), and nothing else: no delete anywhere, no write
    /// elsewhere (only the owner's gc deletes). The Deny holds even where another policy of the
    /// same keys allows more: no delete of an object or a version, no change to the bucket's
    /// versioning, lifecycle or policy (a PUT over its own pack makes a version no one reads).
    static func objectPolicy(bucket: String, prefix: String, role: String) -> String {
        let tree = ContentObjectKey.under(prefix: prefix, "")
        let own = ContentObjectKey.packFolder(prefix: prefix) + role + "/"
        let policy: [String: Any] = [
            "Version": "2012-10-17",
            "Statement": [
                [
                    "Sid": "ReadTheTree", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                    "Resource": ["arn:aws:s3:::\(bucket)/\(tree)*"],
                ],
                [
                    "Sid": "AddItsOwnPacks", "Effect": "Allow",
                    "Action": ["s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
                    "Resource": ["arn:aws:s3:::\(bucket)/\(own)*"],
                ],
                [
                    "Sid": "ListItsUploads", "Effect": "Allow", "Action": ["s3:ListBucketMultipartUploads"],
                    "Resource": ["arn:aws:s3:::\(bucket)"],
                ],
                [
                    "Sid": "NeverRemoveOrRewind", "Effect": "Deny",
                    "Action": [
                        "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutBucketVersioning",
                        "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy",
                    ],
                    "Resource": ["arn:aws:s3:::\(bucket)", "arn:aws:s3:::\(bucket)/*"],
                ],
            ],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: policy, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// `docfs remote replicas`: every replica role of the tree.
struct RemoteReplicas: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replicas",
        abstract: "List the replicas' login roles: when each was last seen and what it sent.")

    @OptionGroup var server: RemoteOptions

    @Flag(help: "Print one JSON array.")
    var json = false

    func run() throws {
        let (list, quotas) = try ReplicaRoleCommand.withDatabase(server, "replicas") { database in
            let list = try await database.replicas()
            return (list, try await database.quotas(of: list.map(\.name)))
        }
        if json { return JSONOutput.print(list.map { ReplicaListing(replica: $0, quota: quotas[$0.name]) }) }
        print("NAME\tSTATE\tLAST SEEN\tOPERATIONS\tVERSIONS\tBYTES\tINTENTS (QUOTA)\tPACK BYTES 24H (QUOTA)")
        for replica in list {
            let seen = replica.lastSeenNs.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0) / 1e9)) } ?? "never"
            print(
                "\(replica.name)\t\(replica.active ? "active" : "removed")\t\(seen)\t\(replica.operations)\t\(replica.versions)\t\(Status.bytesText(replica.bytes))\t\(ReplicaListing.usage(quotas[replica.name]))"
            )
        }
        if let all = quotas[RemoteDatabase.defaultQuotaRole] {
            print(
                "default quotas (docfs remote quota default): \(all.liveIntents.map(String.init) ?? "no limit") intents, \(all.bytesPerDay.map(Status.bytesText) ?? "no limit") of packs per 24 hours"
            )
        }
    }
}

/// `docfs remote remove-replica NAME`: revokes one replica.
struct RemoteRemoveReplica: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove-replica",
        abstract: "Revoke one replica's role: it may no longer log in, its sessions end; the others are untouched.",
        discussion: """
            Its mount stops syncing with one line (docfs status says so); its changes stay in its \
            outbox. `docfs remote add-replica NAME` lets it in again.
            """)

    @OptionGroup var server: RemoteOptions

    @Argument(help: "The replica's role name.")
    var name: String

    func run() throws {
        let name = self.name
        let removal = try ReplicaRoleCommand.withDatabase(server, "remove-replica") { try await $0.removeReplica(name) }
        guard removal.survivors.isEmpty else {
            throw UserFacingError(
                "docfs: replica \(name) may no longer log in or call the server, but \(removal.survivors.count) "
                    + "session(s) of it could not be ended (pids \(removal.survivors.map(String.init).joined(separator: ", "))): "
                    + (removal.why ?? "still running")
                    + "; a superuser can end them, or GRANT pg_signal_backend TO the owner and run remove-replica again")
        }
        print("docfs: replica \(name) removed: it may no longer log in (\(removal.ended) session(s) ended)")
    }
}
