import Foundation
import Logging
import DocFSRemote

/// What one `docfs remote gc` removed (or, with `dryRun`, would remove).
package struct GarbageReport: Sendable, Codable, Equatable {
    /// Objects of versions that stopped being current (replaced, or their item deleted).
    package var versions = 0
    package var versionBytes: Int64 = 0
    /// Objects in the bucket that no version names (uploads whose operation never arrived).
    package var leftovers = 0
    package var leftoverBytes: Int64 = 0
    /// Left-over objects spared because they are newer than the grace period (may be in flight).
    package var recentKept = 0
    /// Multipart uploads started before the grace period and never finished (a replica that
    /// stopped mid-upload and never came back), aborted so their parts stop taking space.
    package var abandonedUploads = 0
    /// Change log entries trimmed.
    package var logEntries = 0
    /// Upload intents of replicas that never committed, dropped (older than the intent lifetime).
    package var expiredIntents = 0
    /// Older than `--keep-log`: applied operation ids, rows of versions whose objects are gone,
    /// and deleted items nothing names any more, removed from PostgreSQL.
    package var operations = 0
    package var versionRows = 0
    package var tombstones = 0
    /// Blocks (schema 8): manifests dropped, blocks no manifest names any more, packs deleted
    /// (nothing in them) or rewritten (mostly dead), and the bytes that frees.
    package var manifests = 0
    package var blocks = 0
    package var blockBytes: Int64 = 0
    package var packsDeleted = 0
    package var packsRewritten = 0
    package var packBytes: Int64 = 0
    /// Blocks marked damaged when gc ran (schema 9), never dropped unsaid: those a manifest names
    /// stay (a replica holding the bytes, or the next upload of them, heals them); those none
    /// names go with the other unnamed blocks.
    package var damagedBlocks: [DamagedBlock] = []
    package var dryRun = false
}

/// Removes the objects no current version needs, so that deletes and overwrites do not grow
/// the bucket forever, and trims the change log.
///
/// Safe against work in flight: a version is collected only when it stopped being current before
/// `now - grace` (a replica downloading it has long finished), and an object no version names
/// only when no upload intent names it either (a replica records the key before it uploads and
/// renews it right before it commits the version) and it was written before the cutoff. Every
/// cutoff is the server's clock. Each object is deleted before its versions are marked
/// collected, so a gc that stops half-way is finished by the next.
package struct GarbageCollector: Sendable {
    let configuration: ReplicaConfiguration
    let logger: Logger
    /// Told each step and the figures so far (for `docfs remote gc` on a terminal).
    package var progress: (@Sendable (String, GarbageReport) -> Void)?

    package init(configuration: ReplicaConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// `keepVersions`: how long a version that stopped being current stays (`docfs versions`
    /// lists and restores it meanwhile); never less than `grace`.
    package func collect(
        grace: Duration, keepVersions: Duration = .seconds(30 * 86400), keepLog: Duration?,
        dryRun: Bool = false
    ) async throws -> GarbageReport {
        try await configuration.withClients(logger: logger) { database, s3 in
            // Two runs never decide at once: each would act on what it read before the other's deletes.
            guard let lock = try await database.takeGarbageLock() else {
                throw ReplicaConfiguration.Problem(
                    "another docfs remote gc of this tree is running (it holds the server's gc lock); nothing was removed: run it again once that one has finished"
                )
            }
            do {
                let report = try await collect(database, s3, grace: grace, keepVersions: keepVersions, keepLog: keepLog, dryRun: dryRun)
                await lock.release()
                return report
            } catch {
                await lock.release()
                throw error
            }
        }
    }

    private func collect(
        _ database: RemoteDatabase, _ s3: S3Client, grace: Duration, keepVersions: Duration,
        keepLog: Duration?, dryRun: Bool
    ) async throws -> GarbageReport {
        let bucket = configuration.bucket
        // Every cutoff is measured by the server's clock, which wrote the times compared: a
        // replica or a gc with a slow clock never makes anything collectable early.
        let nowNs = try await database.serverTimeNs()
        let now = Date(timeIntervalSince1970: Double(nowNs) / 1e9)
        let graceNs = Int64(Self.seconds(grace) * 1e9)
        let cutoffNs = nowNs - graceNs
        let cutoff = Date(timeIntervalSince1970: Double(cutoffNs) / 1e9)
        var report = GarbageReport(dryRun: dryRun)

        // Upload intents of replicas that stopped before committing (renewed right before each
        // commit, so only those of a replica gone for the lifetime expire); their objects are then
        // left-overs like any other.
        if !dryRun {
            report.expiredIntents = try await database.expireUploadIntents(before: nowNs - max(graceNs, Self.intentLifetimeNs))
        }

        // Versions no longer current whose object no live item names (versions sent together
        // share one): each key is deleted once, however many versions name it.
        var seen: Set<String> = []
        // Only keys under PREFIX/objects/ are ever deleted: a version row naming any other key
        // (written by hand, or by another tool) leaves the object alone.
        let folder = ContentObjectKey.folder(prefix: configuration.prefix)
        if let tree = try await database.treeID() {
            try await TreeMarker.check(tree: tree, configuration: configuration, objects: s3)
        }
        let versionCutoffNs = nowNs - max(graceNs, Int64(Self.seconds(keepVersions) * 1e9))
        let manifests = ContentObjectKey.under(prefix: configuration.prefix, "manifests/")
        // Whole objects (before schema 8) go with every version in a bucket that keeps them.
        let objectVersions = dryRun ? [:] : try await s3.versionsByKey(bucket: bucket, under: folder, logger: logger)
        progress?("old versions", report)
        for version in try await database.garbageVersions(before: versionCutoffNs)
        where (version.key.hasPrefix(folder) || version.key.hasPrefix(manifests)) && seen.insert(version.key).inserted {
            progress?("old versions", report)
            report.versions += 1
            report.versionBytes += version.size
            guard !dryRun else { continue }
            if version.key.hasPrefix(manifests) {
                // Its blocks go below, once no other manifest names them.
                try await database.markCollected(key: version.key)
                try await database.dropManifests([version.key])
                report.manifests += 1
            } else {
                try await s3.deleteWithVersions(bucket: bucket, key: version.key, versions: objectVersions[version.key] ?? [])
                try await database.markCollected(key: version.key)
            }
        }
        progress?("blocks and packs", report)
        try await PackCollector(database: database, s3: s3, bucket: bucket, prefix: configuration.prefix, logger: logger)
            .collect(cutoffNs: cutoffNs, dryRun: dryRun, report: &report)

        // Objects under PREFIX/objects/ that nothing names, a page at a time.
        var listed = 0
        try await s3.forEachPage(bucket: bucket, under: folder) { ours in
            listed += ours.count
            progress?("objects: \(listed) listed", report)
            let named = try await database.referencedKeys(ours.map(\.key))
            for object in ours where !named.contains(object.key) && !seen.contains(object.key) {
                guard let written = object.lastModified, written < cutoff else {
                    report.recentKept += 1
                    continue
                }
                report.leftovers += 1
                report.leftoverBytes += object.size
                if !dryRun { try await s3.deleteWithVersions(bucket: bucket, key: object.key, versions: objectVersions[object.key] ?? []) }
            }
        }

        let top = String(folder.prefix(while: { $0 != "/" }))
        // Multipart uploads never finished: one started before the grace period that got no
        // part within it is abandoned (a replica that comes back starts it over); a large upload
        // still sending parts over a slow link is not.
        progress?("multipart uploads", report)
        for upload in try await s3.listMultipartUploads(bucket: bucket, prefix: top) where upload.key.hasPrefix(folder) {
            guard let started = upload.initiated, started < cutoff else { continue }
            let parts = try await s3.listParts(bucket: bucket, key: upload.key, uploadID: upload.uploadID)
            if parts.contains(where: { ($0.lastModified ?? now) >= cutoff }) { continue }
            report.abandonedUploads += 1
            if !dryRun { try await s3.abortMultipartUpload(bucket: bucket, key: upload.key, uploadID: upload.uploadID) }
        }

        if let keepLog, !dryRun {
            progress?("change log", report)
            let logCutoff = nowNs - Int64(Self.seconds(keepLog) * 1e9)
            report.logEntries = try await database.trimChangeLog(before: logCutoff)
            let trimmed = try await database.trimHistory(before: logCutoff)
            report.operations = trimmed.operations
            report.versionRows = trimmed.versionRows
            report.tombstones = trimmed.tombstones
        }
        logger.notice(
            """
            gc of s3://\(bucket)/\(folder)\(dryRun ? " (dry run)" : ""): \(report.versions) old version(s), \
            \(report.leftovers) left-over object(s), \(report.recentKept) recent object(s) kept, \
            \(report.abandonedUploads) abandoned multipart upload(s), \(report.blocks) block(s) in \(report.packsDeleted) pack(s) \
            deleted and \(report.packsRewritten) rewritten, \
            \(report.logEntries) change log entries trimmed
            """)
        return report
    }

    /// How long an upload intent lives at least, whatever the grace period: a replica renews its
    /// intents right before it commits, so only one gone (or stuck) that long loses them.
    static let intentLifetimeNs: Int64 = 10 * 60 * 1_000_000_000

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }
}

extension S3Client {
    /// The objects under `folder`, a page at a time. The listing asks for the folder's first
    /// segment only and filters here: moto refuses the signature of a query value holding "/"
    /// (see Tests/remote/servers.sh).
    func forEachPage(bucket: String, under folder: String, _ body: ([S3Object]) async throws -> Void) async throws {
        let listed = String(folder.prefix(while: { $0 != "/" }))
        var token: String?
        repeat {
            let page = try await listObjects(bucket: bucket, prefix: listed, continuationToken: token)
            token = page.continuationToken
            try await body(page.objects.filter { $0.key.hasPrefix(folder) })
        } while token != nil
    }
}
