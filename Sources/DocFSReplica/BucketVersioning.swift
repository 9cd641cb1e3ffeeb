import Foundation
import Logging
import DocFSRemote

/// The owner's set-up turns versioning on in the bucket (schema 18, docs/REMOTE.md *The bucket*):
/// a replica's keys may PUT over a key of its own folder, and with versions that PUT makes a
/// new version instead of replacing the pack's bytes, which are read as the version recorded
/// with the pack. Once it is on, the server takes packs only with their version.
enum BucketVersioning {
    /// Turns it on and tells the server; an S3 server that cannot (no versioning, or keys that may
    /// not) gets one warning and packs without versions, read as today.
    static func turnOn(_ configuration: ReplicaConfiguration, _ s3: S3Client, _ database: RemoteDatabase,
                       logger: Logger) async throws {
        do {
            try await s3.enableVersioning(bucket: configuration.bucket)
            guard try await s3.versioningEnabled(bucket: configuration.bucket) else {
                logger.warning("the bucket \(configuration.bucket) did not turn versioning on: a replica's S3 keys can still replace its own packs' bytes (docs/REMOTE.md, The bucket)")
                return
            }
        } catch let error as S3Error where !error.isRetryable {
            logger.warning("the bucket \(configuration.bucket) keeps no versions (\(error)): a replica's S3 keys can still replace its own packs' bytes (docs/REMOTE.md, The bucket)")
            return
        }
        try await database.requirePackVersions()
    }
}
