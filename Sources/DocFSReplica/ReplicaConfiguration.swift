#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import DocFSRemote
import Logging
import DocFSStore

/// Everything needed to reach a replica's server, secrets included: resolved when a mount or
/// `docfs init --remote` starts, from the store's `RemoteLink` and the environment, and never
/// written anywhere.
///
/// - S3 keys: the AWS tools' order (`AWSCredentialChain`: the environment, the link's credentials
///   file, `~/.aws/credentials` and `~/.aws/config` under `AWS_PROFILE`), read again when the
///   server says the keys are no longer good. Region: `AWS_REGION`, the files', else the link's.
/// - PostgreSQL password: the URL given to init (kept in `STORE/pgpass`, mode 0600), else
///   `PGPASSWORD`, else `~/.pgpass` (PostgreSQL's own format and rules).
package struct ReplicaConfiguration: Sendable {
    package var postgres: PostgresURL
    package var endpoint: S3Endpoint
    package var credentials: S3Credentials
    package var region: String
    package var bucket: String
    package var prefix: String
    /// `docfs mount --upload-limit` / `--download-limit`: bytes per second (nil: no limit).
    package var uploadLimit: Int64?
    package var downloadLimit: Int64?
    /// The CA the S3 endpoint's certificate is checked against (`--s3-ca`, else AWS_CA_BUNDLE).
    package var s3CA: String?
    /// Where the S3 credentials were found, read again when the server refuses them.
    package var credentialChain: AWSCredentialChain?
    /// Where the mount LISTENs for the change log's notifications (`RemoteLink.listen`).
    package var listen: ListenTarget = .server
    /// Where the mount reads the change log, listings and metadata (`RemoteLink.read`): a hot
    /// standby of `postgres`; nil, `postgres` itself (`StandbyReads`).
    package var read: PostgresURL?

    package enum ListenTarget: Sendable, Equatable {
        /// On the `postgres` URL.
        case server
        /// On a URL of its own (PostgreSQL itself, where `postgres` names a pgbouncer).
        case url(PostgresURL)
        /// Nowhere: the change log is read every second.
        case none
    }

    /// The credentials as they are now (nil: none, or the same source gone).
    package func currentCredentials() -> S3Credentials? { (try? credentialChain?.resolve())??.credentials }

    package struct Problem: Error, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// `s3://BUCKET[/PREFIX]` → bucket and prefix (without slashes at its ends).
    package static func parseObjects(_ text: String) -> (bucket: String, prefix: String)? {
        guard text.hasPrefix("s3://") else { return nil }
        let rest = text.dropFirst("s3://".count)
        let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bucket = parts.first, !bucket.isEmpty else { return nil }
        let prefix = parts.count > 1 ? parts[1].split(separator: "/").joined(separator: "/") : ""
        return (String(bucket), prefix)
    }

    /// `store`: the replica's store (its `pgpass` is read first); nil for the owner's set-up.
    package static func resolve(
        link: RemoteLink, store: URL?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> ReplicaConfiguration {
        guard var postgres = PostgresURL(link.postgres, environment: [:]) else {
            throw Problem("the store's PostgreSQL URL is not valid: \(link.postgres)")
        }
        if postgres.password == nil {
            postgres.password =
                store.flatMap { pgpassPassword($0.path + "/pgpass", postgres) }
                ?? environment["PGPASSWORD"]
                ?? environment["HOME"].flatMap { pgpassPassword($0 + "/.pgpass", postgres) }
        }
        let chain = AWSCredentialChain(environment: environment, explicitFile: link.credentialsFile)
        guard let resolved = try chain.resolve() else {
            throw Problem(
                "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile of ~/.aws/credentials with AWS_PROFILE, or give `docfs init --s3-credentials FILE`"
            )
        }
        let credentials = resolved.credentials
        let region = resolved.region ?? link.region
        let endpoint: S3Endpoint
        if let text = link.endpoint {
            guard let parsed = S3Endpoint(url: text) else { throw Problem("the S3 endpoint is not http(s)://HOST[:PORT]: \(text)") }
            endpoint = parsed
        } else {
            endpoint = .aws(region: region)
        }
        var configuration = ReplicaConfiguration(
            postgres: postgres, endpoint: endpoint, credentials: credentials, region: region,
            bucket: link.bucket, prefix: link.prefix)
        configuration.credentialChain = chain
        configuration.listen = try listenTarget(link.listen, postgres: postgres, store: store, environment: environment)
        configuration.read = try readTarget(link.read, postgres: postgres, store: store, environment: environment)
        configuration.s3CA = link.s3CA ?? environment["AWS_CA_BUNDLE"].flatMap { $0.isEmpty ? nil : $0 }
        return configuration
    }

    /// The password of the first matching line of a pgpass file (`host:port:database:user:password`,
    /// `*` matches anything, `\:` and `\\` escape). Ignored, as libpq does, when others may read it.
    static func pgpassPassword(_ path: String, _ url: PostgresURL) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & 0o077 == 0,
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else { return nil }
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            var fields: [String] = []
            var current = ""
            var escaped = false
            for ch in line {
                if escaped {
                    current.append(ch); escaped = false
                } else if ch == "\\" {
                    escaped = true
                } else if ch == ":" && fields.count < 4 {
                    fields.append(current); current = ""
                } else {
                    current.append(ch)
                }
            }
            fields.append(current)
            guard fields.count == 5 else { continue }
            let wanted = [url.host, String(url.port), url.database, url.user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }

    /// `--remote-listen`'s value as kept in the link: its password found like the server's, else
    /// the server's own when it names the same role.
    static func listenTarget(
        _ text: String?, postgres: PostgresURL, store: URL?,
        environment: [String: String]
    ) throws -> ListenTarget {
        guard let text else { return .server }
        if text == RemoteLink.noListen { return .none }
        guard let url = PostgresURL(text, environment: [:]) else {
            throw Problem("the store's listening URL (--remote-listen) is not valid: \(text)")
        }
        return .url(withPassword(url, postgres: postgres, store: store, environment: environment))
    }

    /// `--remote-read`'s value as kept in the link (nil: reads go to `postgres`), its password
    /// found as `--remote-listen`'s is.
    static func readTarget(
        _ text: String?, postgres: PostgresURL, store: URL?,
        environment: [String: String]
    ) throws -> PostgresURL? {
        guard let text else { return nil }
        guard let url = PostgresURL(text, environment: [:]) else {
            throw Problem("the store's standby URL (--remote-read) is not valid: \(text)")
        }
        return withPassword(url, postgres: postgres, store: store, environment: environment)
    }

    /// A second URL of the tree's server with its password: the store's pgpass, else the
    /// server's own when it names the same role, else PGPASSWORD, else ~/.pgpass.
    static func withPassword(_ url: PostgresURL, postgres: PostgresURL, store: URL?, environment: [String: String]) -> PostgresURL {
        var url = url
        if url.password == nil {
            url.password =
                store.flatMap { pgpassPassword($0.path + "/pgpass", url) }
                ?? (url.user == postgres.user ? postgres.password : nil)
                ?? environment["PGPASSWORD"]
                ?? environment["HOME"].flatMap { pgpassPassword($0 + "/.pgpass", url) }
        }
        return url
    }

    /// Keeps the password given in a URL to `docfs init` beside the store (mode 0600, pgpass
    /// format), so that the store's database never holds it.
    package static func savePassword(_ url: PostgresURL, store: URL) throws {
        guard let password = url.password else { return }
        let escape = { (s: String) in s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ":", with: "\\:") }
        let line = [url.host, String(url.port), url.database, url.user, password].map(escape).joined(separator: ":") + "\n"
        let path = store.path + "/pgpass"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Problem("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        _ = fchmod(fd, 0o600)
        let written = line.withCString { write(fd, $0, strlen($0)) }
        guard written == line.utf8.count else { throw Problem("cannot write \(path)") }
    }
}

extension ReplicaConfiguration {
    /// A database client and an S3 client of this server for the length of `body` (a command's
    /// work: init, gc), both shut down however it ends.
    func withClients<T: Sendable>(
        logger: Logger, operationTimeout: Duration = .seconds(15),
        _ body: (RemoteDatabase, S3Client) async throws -> T
    ) async throws -> T {
        let database = RemoteDatabase(url: postgres, logger: logger, maximumConnections: 2, operationTimeout: operationTimeout)
        let s3 = S3Client(
            endpoint: endpoint, credentials: credentials, region: region, connectTimeout: .seconds(5), logger: logger,
            renewCredentials: { [self] in currentCredentials() }, caFile: s3CA)
        do {
            let result = try await body(database, s3)
            await database.shutdown()
            try? await s3.shutdown()
            return result
        } catch {
            await database.shutdown()
            try? await s3.shutdown()
            throw error
        }
    }
}
