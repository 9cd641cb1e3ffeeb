import ArgumentParser
import Foundation
import Glibc
import DocFSRemote
import DocFSReplica
import DocFSStore

/// The options that name a server (`docfs init --remote …` and `docfs remote setup`), and what
/// both make of them: the link a store keeps (no secret), the password for this run, the
/// environment the configuration is resolved in.
struct RemoteOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The server's PostgreSQL database (init: make the store a replica of it).", valueName: "postgres://USER@HOST:PORT/DB"))
    var remote: String?

    @Option(help: ArgumentHelp("Where contents go.", valueName: "s3://BUCKET[/PREFIX]"))
    var objects: String?

    @Option(name: .customLong("s3-endpoint"), help: ArgumentHelp("An S3-compatible server (path-style); AWS itself without it.", valueName: "URL"))
    var s3Endpoint: String?

    @Option(help: "The S3 region (default: AWS_REGION, else us-east-1).")
    var region: String?

    @Option(
        name: .customLong("s3-credentials"),
        help: ArgumentHelp(
            "A file (mode 0600) with aws_access_key_id and aws_secret_access_key ([AWS_PROFILE] section), read when the environment has no AWS keys.",
            valueName: "FILE"))
    var s3Credentials: String?

    @Option(
        name: .customLong("s3-ca"),
        help: ArgumentHelp(
            "A CA certificate (PEM) to check the S3 endpoint's certificate against, instead of the system's (else AWS_CA_BUNDLE).", valueName: "FILE")
    )
    var s3CA: String?

    @Option(
        name: .customLong("password-file"),
        help: ArgumentHelp("A file (mode 0600) whose first line is the PostgreSQL password, instead of one in the URL.", valueName: "FILE"))
    var passwordFile: String?

    /// Any option but --remote given.
    var anyServerOption: Bool {
        objects != nil || s3Endpoint != nil || region != nil || s3Credentials != nil || s3CA != nil || passwordFile != nil
    }

    /// What the options say, checked.
    struct Server {
        /// With the password, for this run only.
        var url: PostgresURL
        /// Without it, certificate paths absolute: what the store keeps and messages show.
        var stored: PostgresURL
        var link: RemoteLink
        var environment: [String: String]
        var bucket: String
        var prefix: String
    }

    func server() throws -> Server {
        guard let remote, var url = PostgresURL(remote, environment: [:]) else {
            throw UserFacingError(
                "docfs: --remote must be postgres://USER[:PASSWORD]@HOST:PORT/DATABASE[?sslmode=disable|allow|prefer|require|verify-ca|verify-full&sslrootcert=FILE&sslcert=FILE&sslkey=FILE]"
            )
        }
        guard let objects, let (bucket, prefix) = ReplicaConfiguration.parseObjects(objects) else {
            throw UserFacingError("docfs: --objects must be s3://BUCKET[/PREFIX]")
        }
        if let s3Endpoint, S3Endpoint(url: s3Endpoint) == nil {
            throw UserFacingError("docfs: --s3-endpoint must be http(s)://HOST[:PORT]")
        }
        let absolute = { (path: String?) in path.map { URL(fileURLWithPath: $0).standardizedFileURL.path } }
        let caFile = absolute(s3CA)
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw UserFacingError("docfs: --s3-ca: cannot read \(caFile)")
        }
        var environment = ProcessInfo.processInfo.environment
        if let passwordFile {
            guard url.password == nil else { throw UserFacingError("docfs: give the password in --remote or in --password-file, not both") }
            url.password = try Self.readPasswordFile(passwordFile)
        } else if url.password != nil {
            // A password on the command line shows in `ps` and the shell's history.
            FileHandle.standardError.write(
                Data(
                    "docfs: warning: a password in --remote shows in `ps` and your shell's history; give it instead in PGPASSWORD, --password-file FILE (mode 0600), or a line of ~/.pgpass (host:port:database:user:password, mode 0600)\n"
                        .utf8))
        }
        if let password = url.password { environment["PGPASSWORD"] = password }
        var stored = url
        stored.password = nil
        // Certificate paths are kept absolute: the mount may start from another folder.
        stored.sslRootCert = absolute(stored.sslRootCert)
        stored.sslCert = absolute(stored.sslCert)
        stored.sslKey = absolute(stored.sslKey)
        let link = RemoteLink(
            postgres: stored.withoutPassword, bucket: bucket, prefix: prefix, endpoint: s3Endpoint,
            region: region ?? environment["AWS_REGION"] ?? "us-east-1",
            credentialsFile: absolute(s3Credentials), s3CA: caFile)
        return Server(url: url, stored: stored, link: link, environment: environment, bucket: bucket, prefix: prefix)
    }

    /// The first line of a file only its owner may read.
    static func readPasswordFile(_ path: String) throws -> String {
        var st = stat()
        guard stat(path, &st) == 0 else { throw UserFacingError("docfs: cannot read \(path): \(String(cString: strerror(errno)))") }
        guard st.st_mode & 0o077 == 0 else { throw UserFacingError("docfs: \(path) may be read by others: chmod 600 it") }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let first = text.split(separator: "\n", omittingEmptySubsequences: false).first, !first.isEmpty
        else {
            throw UserFacingError("docfs: \(path) holds no password")
        }
        return String(first)
    }
}
