import Foundation
import Logging
import DocFSRemote

/// The owner's set-up turns versioning on in the bucket (schema 18, docs/REMOTE.md *The bucket*):
/// a replica's keys may PUT over a key of its own folder, and with versions that PUT makes a
/// new version instead of replacing the pack's bytes, which are read as the version recorded
/// with the pack. Once it is on, the server takes packs only with their version.
enum BucketVersioning {
    /// Turns it on and tells the server; an S3 server that cannot (no versioning, or keys that may
    /// not) gets one warning and packs without versions, read by key alone.
    static func turnOn(
        _ configuration: ReplicaConfiguration, _ s3: S3Client, _ database: RemoteDatabase,
        logger: Logger
    ) async throws {
        do {
            try await s3.enableVersioning(bucket: configuration.bucket)
            guard try await s3.versioningEnabled(bucket: configuration.bucket) else {
                logger.warning(
                    "the bucket \(configuration.bucket) did not turn versioning on: a replica's S3 keys can still replace its own packs' bytes (docs/REMOTE.md, The bucket)"
                )
                return
            }
        } catch let error as S3Error where !error.isRetryable {
            logger.warning(
                "the bucket \(configuration.bucket) keeps no versions (\(error)): a replica's S3 keys can still replace its own packs' bytes (docs/REMOTE.md, The bucket)"
            )
            return
        }
        try await database.requirePackVersions()
    }
}

// gc in a bucket that keeps versions: an object it removes goes with every version.
extension S3Client {
    /// The versions under `folder`, by key: listed from the tree's first segment, as
    /// `forEachPage` lists (some S3-compatible servers check the signature of a `/` in a query
    /// value wrongly). A bucket without versioning lists each object once (version "null"); an
    /// S3 server without the call lists nothing (one warning): its objects go with a plain delete.
    func versionsByKey(bucket: String, under folder: String, logger: Logger) async throws -> [String: [S3ObjectVersion]] {
        let listed = String(folder.prefix(while: { $0 != "/" }))
        let all: [S3ObjectVersion]
        do {
            all = try await listObjectVersions(bucket: bucket, prefix: listed)
        } catch let error as S3Error where !error.isRetryable && error.kind != .authentication {
            logger.warning("gc: the bucket lists no versions (\(error)): objects are deleted without them")
            return [:]
        }
        return Dictionary(grouping: all.filter { $0.key.hasPrefix(folder) }, by: \.key)
    }

    /// Deletes an object for good: each of its versions (and delete markers), or, none listed,
    /// the key (one added since the listing, or a bucket that keeps no versions).
    func deleteWithVersions(bucket: String, key: String, versions: [S3ObjectVersion]) async throws {
        guard !versions.isEmpty else { return try await deleteObject(bucket: bucket, key: key) }
        for version in versions {
            try await deleteObjectVersion(bucket: bucket, key: key, versionID: version.versionID)
        }
    }
}
