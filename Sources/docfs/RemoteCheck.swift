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

    func run() throws {
        let (configuration, server) = try RemoteGC.configuration(of: store)
        var logger = Logger(label: "docfs.check")
        logger.logLevel = .critical
        let checker = BlockChecker(configuration: configuration, logger: logger)
        let report: BlockCheckReport
        switch runBlocking({ try await checker.check() }) {
        case .success(let r): report = r
        case .failure(let error): throw UserFacingError("docfs: check of \(server): \(error)")
        }
        if json {
            JSONOutput.print(report)
        } else {
            print("checked \(report.blocks) block(s) in \(report.packs) pack(s) (\(Status.bytesText(report.bytes)))")
            for block in report.damaged {
                print("damaged: block \(block.hash) in \(block.pack) at \(block.offset) (\(block.length) bytes)\(block.named ? "" : ", named by no version")")
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
