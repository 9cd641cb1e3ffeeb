import Foundation
import Logging
import DocFSRemote

/// What `docfs remote check` found.
package struct BlockCheckReport: Sendable, Codable, Equatable {
    /// Packs read and blocks verified against their SHA-256 (and their bytes).
    package var packs = 0
    package var blocks = 0
    package var bytes: Int64 = 0
    /// Blocks found damaged by this check (marked now) and blocks found sound again (a pack mended).
    package var newlyDamaged = 0
    package var cleared = 0
    /// Every block marked damaged after the check, and the versions naming them.
    package var damaged: [DamagedBlock] = []
    package var versions: [DamagedVersion] = []
    /// Block rows no replica could have written (`ServerRowChecks`: a length of 0 or below, …),
    /// each with its pack and rule: not read, left as they are for the owner to mend.
    package var refused: [String] = []
    package var isClean: Bool { damaged.isEmpty && refused.isEmpty }
}

/// Reads every pack the server's blocks are in and checks every place of every block against
/// its SHA-256 (the owner's `docfs remote check`): a place whose bytes do not match, or whose
/// pack or range is gone, is confirmed damaged on the server (schema 16: dropped when its block
/// has another place, else flagged, so that the next upload of its bytes sends them and a
/// replica holding them sends them again); a flagged place found sound (a pack mended, a false
/// report) loses its flag and its reports. The answer lists the damaged places and the versions
/// (by path) whose blocks have no sound place.
package struct BlockChecker: Sendable {
    let configuration: ReplicaConfiguration
    let logger: Logger

    package init(configuration: ReplicaConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    package func check() async throws -> BlockCheckReport {
        try await configuration.withClients(logger: logger) { database, s3 in
            if let tree = try await database.treeID() {
                try await TreeMarker.check(tree: tree, configuration: configuration, objects: s3)
            }
            var report = BlockCheckReport()
            let marked = Set(try await database.damagedBlocks().map { "\($0.hash) \($0.pack)" })
            for pack in try await database.packUsage().keys.sorted() {
                // Rows no replica could have written are named and left out (their ranges would trap).
                let blocks = try await database.blocks(inPack: pack).filter { block in
                    guard let problem = ServerRowChecks.block(block, prefix: configuration.prefix) else { return true }
                    report.refused.append("\(pack): \(problem)")
                    logger.error("check: refused a block row of the pack \(pack): \(problem)")
                    return false
                }
                guard let end = blocks.map({ $0.offset + $0.length }).max() else { continue }
                report.packs += 1
                var bytes: [UInt8] = []
                do {
                    // The span its blocks use, as a range: a pack whose last blocks gc dropped (and
                    // did not rewrite: the rest is most of it) is longer than that.
                    bytes = try await s3.getObjectBytes(
                        bucket: configuration.bucket, key: pack, versionID: blocks[0].version,
                        range: 0...(end - 1), upTo: Int(end))
                } catch let error as S3Error where error.kind == .notFound || error.kind == .invalidRange {
                    logger.error("check: the pack \(pack) is \(error.kind == .notFound ? "gone from the bucket" : "empty")")
                }
                for block in blocks {
                    report.blocks += 1
                    report.bytes += block.length
                    let range = Int(block.offset)..<Int(block.offset + block.length)
                    let sound =
                        range.upperBound <= bytes.count
                        && bytes.withUnsafeBytes({ BlockHash.of(UnsafeRawBufferPointer(rebasing: $0[range])) }) == block.hash
                    let wasMarked = marked.contains("\(block.hash) \(pack)")
                    if sound {
                        // A place a reader reported (or a false report) read sound here: cleared.
                        if wasMarked {
                            try await database.clearDamage(hash: block.hash, pack: pack)
                            report.cleared += 1
                        }
                    } else if try await database.confirmDamagedPlace(hash: block.hash, pack: pack), !wasMarked {
                        // Confirmed where it was read (a place gc moved meanwhile is not): dropped
                        // when the block has another place, else kept flagged until one comes.
                        report.newlyDamaged += 1
                    }
                }
            }
            report.damaged = try await database.damagedBlocks()
            report.versions = try await database.damagedVersions()
            if !report.damaged.isEmpty {
                logger.error("check: \(report.damaged.count) damaged block(s), named by \(report.versions.count) version(s)")
            }
            return report
        }
    }
}
