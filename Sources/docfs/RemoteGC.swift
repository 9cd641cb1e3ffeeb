import ArgumentParser
import Foundation
import Logging
import DocFSMetrics
import DocFSReplica
import DocFSStore

/// `docfs remote gc STORE`: removes the bucket's objects no current version needs.
struct RemoteGC: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Remove objects no current version refers to, and trim the server's change log.",
        discussion: """
            A version stops being needed when a newer one replaces it or its file is deleted; its \
            object is removed once that is older than --keep-versions (30 days) and the grace period. Objects that no version \
            names (an upload whose change never reached the server) are removed once they are \
            older than the grace period too, so uploads in flight are safe. Any replica's store \
            names the server; it may be mounted meanwhile.
            """)

    @Argument(help: "A store that is a replica of the server (`docfs init --remote`).")
    var store: String

    @Option(help: ArgumentHelp("Spare what changed more recently than this (e.g. 30m, 1h, 7d; 0 for none).", valueName: "DURATION"))
    var grace = "1h"

    @Option(
        name: .customLong("keep-versions"),
        help: ArgumentHelp(
            "Keep versions that stopped being current for this long (`docfs versions` lists and restores them).", valueName: "DURATION"))
    var keepVersions = "30d"

    @Option(
        name: .customLong("keep-log"),
        help: ArgumentHelp("Trim change log entries older than this (a replica away for longer rebuilds from a full listing).", valueName: "DURATION")
    )
    var keepLog = "30d"

    @Flag(name: .customLong("dry-run"), help: "Count what would be removed; remove nothing.")
    var dryRun = false

    @Flag(
        help:
            "Print one JSON object (versions, versionBytes, leftovers, leftoverBytes, recentKept, abandonedUploads, logEntries, manifests, blocks, blockBytes, packsDeleted, packsRewritten, packBytes, damagedBlocks, dryRun)."
    )
    var json = false

    @OptionGroup var metricsFile: MetricsFileOption

    func validate() throws {
        guard Self.duration(grace) != nil else { throw ValidationError("--grace: not a duration: \(grace) (e.g. 0, 90s, 30m, 1h, 7d)") }
        guard Self.duration(keepVersions) != nil else { throw ValidationError("--keep-versions: not a duration: \(keepVersions) (e.g. 0, 1h, 30d)") }
        guard Self.duration(keepLog) != nil else { throw ValidationError("--keep-log: not a duration: \(keepLog) (e.g. 1h, 30d)") }
    }

    /// The server a replica's store names (gc and check), and its address for messages.
    static func configuration(of store: String) throws -> (ReplicaConfiguration, server: String) {
        let url = URL(fileURLWithPath: store)
        let found: RemoteLink?
        do { found = try LocalStore.remoteLink(at: url) } catch {
            throw UserFacingError("docfs: cannot read store \(store): \(error)")
        }
        guard let link = found else {
            throw UserFacingError("docfs: store \(store) is not a replica of a server (it has no --remote)")
        }
        do { return (try ReplicaConfiguration.resolve(link: link, store: url), link.postgres) } catch {
            throw UserFacingError("docfs: store \(store) is a replica of \(link.postgres): \(error)")
        }
    }

    func run() throws {
        let (configuration, server) = try Self.configuration(of: store)
        var logger = Logger(label: "docfs.gc")
        logger.logLevel = .warning
        let progress = ProgressLine()
        defer { progress.clear() }
        var steps = GarbageCollector(configuration: configuration, logger: logger)
        steps.progress = { step, r in
            progress.update("docfs remote gc: \(step); \(r.versions) old version(s), \(r.blocks) block(s), \(r.leftovers) left-over object(s) so far")
        }
        let collector = steps
        let grace = Self.duration(grace)!, keep = Self.duration(keepLog)!, versions = Self.duration(keepVersions)!, dryRun = self.dryRun
        let report: GarbageReport
        let metrics = metricsFile.start(job: "remote_gc", store: store)
        switch runBlocking({ try await collector.collect(grace: grace, keepVersions: versions, keepLog: keep, dryRun: dryRun) }) {
        case .success(let r): report = r
        case .failure(let error):
            try metricsFile.finish(metrics, success: false)
            throw UserFacingError("docfs: gc of \(server): \(error)")
        }
        progress.clear()
        if let metrics {
            Self.record(report, in: metrics)
            try metricsFile.finish(metrics, success: true)
        }
        if json {
            JSONOutput.print(report)
            return
        }
        let verb = dryRun ? "would remove" : "removed"
        print("\(verb) \(report.versions) old version(s) (\(Status.bytesText(report.versionBytes)))")
        print(
            "\(verb) \(report.packsDeleted) pack(s) no block is in, \(dryRun ? "would rewrite" : "rewrote") \(report.packsRewritten) mostly dead (\(Status.bytesText(report.packBytes)) freed)"
        )
        if !dryRun { print("removed \(report.blocks) block(s) no kept version names (\(Status.bytesText(report.blockBytes)))") }
        print("\(verb) \(report.leftovers) left-over object(s) (\(Status.bytesText(report.leftoverBytes)))")
        print("\(dryRun ? "would abort" : "aborted") \(report.abandonedUploads) multipart upload(s) never finished")
        if report.recentKept > 0 { print("kept \(report.recentKept) object(s) newer than the grace period (\(grace))") }
        if !dryRun {
            print("trimmed \(report.logEntries) change log entries older than \(keepLog)")
            print(
                "trimmed \(report.operations) applied operation id(s), \(report.versionRows) collected version row(s) and \(report.tombstones) deleted item(s) older than \(keepLog)"
            )
        }
        if !report.damagedBlocks.isEmpty {
            let named = report.damagedBlocks.filter(\.named)
            print(
                "\(report.damagedBlocks.count) block(s) marked damaged: \(named.count) named by kept versions (kept until their bytes are sent again; `docfs remote check` lists the files), \(report.damagedBlocks.count - named.count) named by none"
            )
            for block in named { print("damaged: block \(block.hash) in \(block.pack) at \(block.offset)") }
        }
        if report.expiredIntents > 0 { print("dropped \(report.expiredIntents) upload intent(s) of replicas that never committed their versions") }
    }

    /// The report as `docfs_remote_gc_*` gauges (`--metrics-file`; docs/USING.md lists them).
    static func record(_ r: GarbageReport, in metrics: JobMetrics) {
        metrics.set("dry_run", "1 when the last run only counted (--dry-run)", Int64(r.dryRun ? 1 : 0))
        metrics.set("versions_removed", "Objects of old versions removed", Int64(r.versions))
        metrics.set("version_bytes_removed", "Bytes of old versions' objects removed", r.versionBytes)
        metrics.set("leftovers_removed", "Objects no version names removed", Int64(r.leftovers))
        metrics.set("leftover_bytes_removed", "Bytes of objects no version names removed", r.leftoverBytes)
        metrics.set("recent_kept", "Objects spared as newer than the grace period", Int64(r.recentKept))
        metrics.set("abandoned_uploads_aborted", "Multipart uploads never finished, aborted", Int64(r.abandonedUploads))
        metrics.set("log_entries_trimmed", "Change log entries trimmed", Int64(r.logEntries))
        metrics.set("manifests_removed", "Manifests no kept version names, removed", Int64(r.manifests))
        metrics.set("blocks_removed", "Blocks no kept manifest names, removed", Int64(r.blocks))
        metrics.set("block_bytes_removed", "Bytes of those blocks", r.blockBytes)
        metrics.set("packs_deleted", "Packs with no live block, deleted", Int64(r.packsDeleted))
        metrics.set("packs_rewritten", "Mostly dead packs rewritten", Int64(r.packsRewritten))
        metrics.set("pack_bytes_freed", "Bytes freed in the bucket by deleting and rewriting packs", r.packBytes)
        metrics.set("damaged_blocks", "Blocks marked damaged when the last run ran", Int64(r.damagedBlocks.count))
        metrics.set(
            "damaged_blocks_named", "Damaged blocks a kept version still names (their files need the bytes again)",
            Int64(r.damagedBlocks.filter(\.named).count))
        metrics.set("expired_intents_dropped", "Upload intents of replicas that never committed, dropped", Int64(r.expiredIntents))
    }

    /// `0`, `90s`, `30m`, `1h`, `7d` (a bare number is seconds).
    static func duration(_ text: String) -> Duration? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let factor = units[last] {
            unit = factor
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, let n = Int64(digits), n >= 0, n <= Int64.max / unit / 1000 else { return nil }
        return .seconds(n * unit)
    }
}
