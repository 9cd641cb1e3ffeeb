import Foundation
import Logging
import DocFSRemote

/// gc's part for blocks (`GarbageCollector` calls it after the versions): drops the manifests
/// of collected versions and those no version ever named, the blocks no manifest names, the
/// packs no block is in, and rewrites a pack mostly dead (its live blocks copied into a new
/// pack, the blocks pointed at it, then the old one deleted: a reader that had the old place
/// fails its request and asks again).
struct PackCollector {
    let database: RemoteDatabase
    let s3: S3Client
    let bucket: String
    let prefix: String
    let logger: Logger

    /// A pack whose live blocks use less than this share of it is rewritten.
    static let rewriteBelow = 0.5

    func collect(cutoffNs: Int64, dryRun: Bool, report: inout GarbageReport) async throws {
        report.damagedBlocks = try await database.damagedBlocks()
        if !report.damagedBlocks.isEmpty {
            let named = report.damagedBlocks.filter(\.named).count
            logger.error(
                "gc: \(report.damagedBlocks.count) block(s) are marked damaged (\(named) named by kept versions: kept until a replica sends their bytes again; `docfs remote check` lists the files)"
            )
        }
        if !dryRun {
            report.manifests += try await database.dropOrphanManifests(before: cutoffNs)
            let dropped = try await database.dropUnnamedBlocks(before: cutoffNs)
            report.blocks = dropped.count
            report.blockBytes = dropped.bytes
        }
        let folder = ContentObjectKey.packFolder(prefix: prefix)
        // Every version of every pack (schema 18: a bucket that keeps versions holds a pack's
        // bytes, and whatever was PUT over its key, as versions): a pack dropped goes with all.
        let versions = dryRun ? [:] : try await s3.versionsByKey(bucket: bucket, under: folder, logger: logger)
        try await s3.forEachPage(bucket: bucket, under: folder) { packs in
            // Rows and intents of the page's packs from one snapshot of the server (not a usage
            // read once at the start and intents later: a pack can go from the one to the other
            // in between): a pack with an intent is being uploaded, one with neither is dead,
            // whatever the bucket's Last-Modified says.
            let states = try await database.packStates(packs.map(\.key))
            for pack in packs {
                guard let state = states[pack.key], !state.pending else { continue }
                guard state.usage.blocks > 0 else {
                    report.packsDeleted += 1
                    report.packBytes += pack.size
                    if !dryRun { try await s3.deleteWithVersions(bucket: bucket, key: pack.key, versions: versions[pack.key] ?? []) }
                    continue
                }
                let used = state.usage
                guard Double(used.liveBytes) < Double(pack.size) * Self.rewriteBelow else { continue }
                report.packsRewritten += 1
                report.packBytes += pack.size - used.liveBytes
                if !dryRun { try await rewrite(pack.key, size: pack.size, versions: versions[pack.key] ?? []) }
            }
        }
    }

    /// Copies the pack's live blocks, each checked against its hash, into a new pack.
    private func rewrite(_ key: String, size: Int64, versions: [S3ObjectVersion]) async throws {
        let blocks = try await database.blocks(inPack: key)
        guard !blocks.isEmpty else { return }
        // The recorded version (schema 18), not whatever was PUT over the key since.
        let version = blocks.first { $0.version != nil }?.version
        let recorded = version.flatMap { v in versions.first { $0.versionID == v }?.size } ?? size
        let bytes = try await s3.getObjectBytes(bucket: bucket, key: key, versionID: version, range: nil, upTo: Int(recorded) + 1)
        let newKey = ContentObjectKey.pack(prefix: prefix)
        var pack: [UInt8] = []
        var moved: [StoredBlock] = []
        var damaged = 0
        var refused = 0
        for block in blocks {
            // A row no replica could have written (a length of 0 or below, an offset past any
            // pack): left as it is, and the pack kept, rather than a range that traps.
            if let problem = ServerRowChecks.block(block, prefix: prefix) {
                if refused == 0 { logger.error("gc: refused a block row of the pack \(key): \(problem); the pack is kept") }
                refused += 1
                continue
            }
            let range = Int(block.offset)..<Int(block.offset + block.length)
            guard range.upperBound <= bytes.count,
                bytes.withUnsafeBytes({ BlockHash.of(UnsafeRawBufferPointer(rebasing: $0[range])) }) == block.hash
            else {
                damaged += 1
                // Marked, so that no upload counts on it and a replica holding it sends it again.
                try await database.markBlockDamaged(hash: block.hash, pack: key)
                continue
            }
            moved.append(StoredBlock(hash: block.hash, pack: newKey, offset: Int64(pack.count), length: block.length))
            pack.append(contentsOf: bytes[range])
        }
        if !moved.isEmpty {
            try await database.recordUploadIntents([newKey])
            let written = try await s3.putNewObject(bucket: bucket, key: newKey, bytes: pack)
            for i in moved.indices { moved[i].version = written.versionID }
            try await database.moveBlocks(moved, from: key)
            try await database.dropUploadIntents([newKey])
        }
        guard refused == 0 else { return }
        guard damaged == 0 else {
            // Left where it is: its readers get EIO and the damage stays visible in the bucket.
            logger.error("gc: \(damaged) block(s) in the pack \(key) do not match their SHA-256; the pack is kept")
            return
        }
        try await s3.deleteWithVersions(bucket: bucket, key: key, versions: versions)
    }
}
