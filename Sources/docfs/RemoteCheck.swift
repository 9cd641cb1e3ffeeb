import ArgumentParser
import Foundation
import Logging
import DocFSReplica
import DocFSStore

/// `docfs remote check STORE`: reads every pack and verifies every block (the owner's).
struct RemoteCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Verify every block in the bucket against its SHA-256, and mark what is damaged.",
        discussion: """
            Reads every pack the server's blocks are in. A block whose bytes do not match its hash, \
            or whose pack is gone, is marked damaged on the server: the next upload of those bytes \
            sends them, and a replica that holds a file naming it sends it again. Lists the damaged \
            blocks and the files and versions that name them. Exit status 0 when every block is \
            sound, 1 when some are damaged. Any replica's store names the server (the owner's role).
            """)

    @Argument(help: "A store that is a replica of the server (`docfs init --remote`).")
    var store: String

    @Flag(help: "Print one JSON object (packs, blocks, bytes, newlyDamaged, cleared, damaged, versions).")
    var json = false

    @OptionGroup var metricsFile: MetricsFileOption

    func run() throws {
        let (configuration, server) = try RemoteGC.configuration(of: store)
        var logger = Logger(label: "docfs.check")
        logger.logLevel = .critical
        let checker = BlockChecker(configuration: configuration, logger: logger)
        let report: BlockCheckReport
        let metrics = metricsFile.start(job: "remote_check", store: store)
        switch runBlocking({ try await checker.check() }) {
        case .success(let r): report = r
        case .failure(let error):
            try metricsFile.finish(metrics, success: false)
            throw UserFacingError("docfs: check of \(server): \(error)")
        }
        if let metrics {
            metrics.set("packs", "Packs read", Int64(report.packs))
            metrics.set("blocks", "Blocks verified against their SHA-256", Int64(report.blocks))
            metrics.set("bytes", "Bytes read", report.bytes)
            metrics.set("newly_damaged_blocks", "Blocks the last run found damaged and marked", Int64(report.newlyDamaged))
            metrics.set("cleared_blocks", "Blocks marked damaged before and found sound", Int64(report.cleared))
            metrics.set("damaged_blocks", "Blocks marked damaged after the last run", Int64(report.damaged.count))
            metrics.set("affected_versions", "Versions that name a damaged block", Int64(report.versions.count))
            metrics.set("refused_rows", "Block rows no replica could have written, left for the owner", Int64(report.refused.count))
            try metricsFile.finish(metrics, success: report.isClean)
        }
        if json {
            JSONOutput.print(report)
        } else {
            print("checked \(report.blocks) block(s) in \(report.packs) pack(s) (\(Status.bytesText(report.bytes)))")
            for block in report.damaged {
                print(
                    "damaged: block \(block.hash) in \(block.pack) at \(block.offset) (\(block.length) bytes)\(block.named ? "" : ", named by no version")"
                )
            }
            for version in report.versions {
                let state = version.current ? "current" : version.deleted ? "deleted file" : "older version"
                print("affected: \(version.path) version \(version.contentVersion) (\(state), \(version.damagedBlocks) damaged block(s))")
            }
            for refused in report.refused { print("refused block row: \(refused)") }
            if report.cleared > 0 { print("\(report.cleared) block(s) marked damaged before are sound now") }
            if report.isClean { print("every block is sound") }
        }
        if !report.isClean { throw ExitCode(1) }
    }
}
