import Foundation

/// Where a replica's server is: kept in the store's `meta` table (key `remote`) by
/// `docfs init --remote`. Never a secret: the PostgreSQL password is kept apart (`STORE/pgpass`,
/// mode 0600) and S3 keys come from the environment or a credentials file named here.
package struct RemoteLink: Codable, Sendable, Equatable {
    /// `postgres://USER@HOST:PORT/DATABASE`, without a password.
    package var postgres: String
    /// The bucket and the key prefix of content objects (`s3://BUCKET/PREFIX`).
    package var bucket: String
    package var prefix: String
    /// An S3-compatible server's endpoint (path-style); nil for AWS itself.
    package var endpoint: String?
    package var region: String
    /// A credentials file (mode 0600) to read the S3 keys from when the environment has none.
    package var credentialsFile: String?
    /// A CA certificate file (PEM) the S3 endpoint's certificate is checked against instead of
    /// the system's (`--s3-ca`); absolute.
    package var s3CA: String?
    /// Where the mount LISTENs for the change log's notifications (`--remote-listen`): nil, the
    /// `postgres` URL; a URL without a password (PostgreSQL itself, where `postgres` names a
    /// pgbouncer in transaction pooling, which cannot carry LISTEN); `none`, no LISTEN at all:
    /// the mount reads the change log every second instead.
    package var listen: String?
    /// Where the mount reads the change log, listings and metadata (`--remote-read`): nil, the
    /// `postgres` URL; else a URL without a password of a hot standby of that server (PostgreSQL's
    /// own streaming replication). Writes always go to `postgres`.
    package var read: String?

    package init(
        postgres: String, bucket: String, prefix: String, endpoint: String?, region: String, credentialsFile: String?,
        s3CA: String? = nil
    ) {
        self.s3CA = s3CA
        self.postgres = postgres
        self.bucket = bucket
        self.prefix = prefix
        self.endpoint = endpoint
        self.region = region
        self.credentialsFile = credentialsFile
    }

    static let metaKey = "remote"
    /// `listen`'s value for no LISTEN.
    package static let noListen = "none"
}
