import ArgumentParser
import Foundation
import Logging
import Synchronization
import DocFSRemote
import DocFSReplica
import DocFSStore

/// `docfs-scale replicas fanout|writers`: N replicas of one tree in this process (`HarnessFleet`),
/// each a real store and the sync engine a mount runs, against a real server; `make bench-replicas
/// BENCH_REPLICAS=fanout|writers` runs it (docs/PERFORMANCE.md, "Replicas at scale"). Prints one
/// JSON object: the figures, and the checks of order (`OrderWatch`) the tests assert.
struct Replicas: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs N replica clients of one tree in this process against a server, and measures them.")

    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case fanout, writers
    }

    @Argument(
        help:
            "fanout: a change at a time on one client, timed until every client has it; writers: W clients writing at once, the server's operations per second."
    )
    var mode: Mode
    @Option(help: "Replica clients.", transform: count) var clients = 10
    @Option(help: "Clients writing at once (writers).", transform: count) var writers = 1
    @Option(help: "Changes timed (fanout).", transform: count) var changes = 10
    @Option(help: "How long the writers write, in seconds.") var seconds = 10.0
    @Option(help: "Files a writer makes before waiting for its engine to send them.", transform: count) var burst = 50
    @Option(help: "How long, in seconds, a change may take to reach every client (and the run to settle).") var timeout = 60.0
    @Option(help: "The tree's PostgreSQL, as `docfs init --remote` takes it (the first store's init and the harness's own reads of the change log).")
    var remote: String
    @Option(help: "Where the clients' function calls go (a pgbouncer in front of --remote); default --remote.")
    var calls: String?
    @Option(
        name: .customLong("remote-listen"),
        help: "Where each client LISTENs: a URL, or none (each reads the change log every second); default --remote.")
    var listen: String?
    @Option(help: "s3://BUCKET[/PREFIX]") var objects: String
    @Option(name: .customLong("s3-endpoint"), help: "http(s)://HOST[:PORT]") var s3Endpoint: String?
    @Option var region = "us-east-1"
    @Option(help: "Engines started at a time, each wave once the last has done its first pass.", transform: count)
    var wave = 50
    @Option(help: "Folder for the stores (default: a temporary one, removed afterwards).") var work: String?
    @Flag(help: "The engines' log at notice (default: critical only).") var verbose = false

    func validate() throws {
        guard clients >= 2 else { throw ValidationError("--clients must be at least 2") }
        guard writers >= 1, writers <= clients else { throw ValidationError("--writers must be between 1 and --clients") }
        guard wave >= 1 else { throw ValidationError("--wave must be at least 1") }
    }

    func run() throws {
        guard let direct = PostgresURL(remote) else { throw ValidationError("--remote is not a postgres:// URL") }
        guard let (bucket, prefix) = ReplicaConfiguration.parseObjects(objects) else {
            throw ValidationError("--objects must be s3://BUCKET[/PREFIX]")
        }
        let link = RemoteLink(
            postgres: direct.withoutPassword, bucket: bucket, prefix: prefix, endpoint: s3Endpoint, region: region, credentialsFile: nil)
        let bootstrap = try ReplicaConfiguration.resolve(link: link, store: nil)
        var engines = bootstrap
        if let calls {
            guard let url = PostgresURL(calls) else { throw ValidationError("--calls is not a postgres:// URL") }
            engines.postgres = url
            engines.listen = .url(direct)
        }
        if let listen {
            if listen == "none" {
                engines.listen = .none
            } else {
                guard let url = PostgresURL(listen) else { throw ValidationError("--remote-listen is not a postgres:// URL or none") }
                engines.listen = .url(url)
            }
        }
        let folder = work.map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory.appendingPathComponent("docfs-scale-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { if work == nil { try? FileManager.default.removeItem(at: folder) } }
        var logger = Logger(label: "docfs-scale")
        logger.logLevel = verbose ? .notice : .critical
        let report = try runBlocking { [self, engines, logger] in
            HarnessFigures.json(
                try await measure(folder: folder, link: link, bootstrap: bootstrap, engines: engines, direct: direct, logger: logger))
        }
        print(report)
    }

    static func describe(_ listen: ReplicaConfiguration.ListenTarget) -> String {
        switch listen {
        case .server: "server"
        case .none: "none"
        case .url(let url): url.withoutPassword
        }
    }

    private func measure(
        folder: URL, link: RemoteLink, bootstrap: ReplicaConfiguration, engines: ReplicaConfiguration, direct: PostgresURL,
        logger: Logger
    ) async throws -> [String: Any] {
        let baseline = HarnessFigures.residentKiB().now
        let began = ContinuousClock.now
        let fleet = try await HarnessFleet.make(
            count: clients, work: folder, link: link, bootstrap: bootstrap, engines: engines, logger: logger)
        let log = RemoteDatabase(url: direct, logger: logger, maximumConnections: 1)
        var report: [String: Any] = [
            "mode": mode.rawValue, "clients": clients, "unopened": fleet.unopened,
            "listen": Self.describe(engines.listen), "calls": engines.postgres.withoutPassword,
        ]
        if let failure = fleet.firstFailure { report["firstUnopened"] = failure }
        do {
            let watch = OrderWatch(log: log, after: try await log.latestPosition(), clients: clients)
            report["setupSeconds"] = elapsed(since: began)
            let starting = ContinuousClock.now
            await fleet.start(wave: wave, timeout: timeout)
            report["startSeconds"] = elapsed(since: starting)
            let all = fleet.clients
            switch mode {
            case .fanout:
                let result = try await FanoutRun.run(all, changes: changes, timeout: timeout, watch: watch)
                report["fanout"] = [
                    "changes": changes, "everyClient": HarnessFigures.summary(result.everyClient.compactMap { $0 }),
                    "perClient": HarnessFigures.summary(result.arrivals), "missed": result.missed,
                    "warmUpMissed": result.warmUpMissed, "changesNotEverywhere": result.everyClient.filter { $0 == nil }.count,
                ]
            case .writers:
                // The order checks run beside the writers, a few times a second.
                let running = Atomic<Bool>(true)
                let sweeper = Task {
                    while running.load(ordering: .relaxed) {
                        try? await watch.readLog()
                        watch.sweep(all)
                        try? await Task.sleep(for: .milliseconds(200))
                    }
                }
                let result = try await WritersRun.run(Array(all.prefix(writers)), seconds: seconds, burst: burst, timeout: timeout)
                running.store(false, ordering: .relaxed)
                await sweeper.value
                try await watch.readLog()
                report["writers"] = [
                    "writers": writers, "seconds": result.seconds, "files": result.files, "committed": watch.entries,
                    "operationsPerSecond": (Double(watch.entries) / result.seconds).rounded(), "unsent": result.unsent,
                ]
            }
            // Every client up to the log's end, checked as it goes.
            let settling = ContinuousClock.now
            try await watch.readLog()
            while watch.caughtUp(all, to: watch.latestRead) < all.count, elapsed(since: settling) < timeout {
                watch.sweep(all)
                try await Task.sleep(for: .milliseconds(100))
            }
            watch.sweep(all)
            let memory = HarnessFigures.residentKiB()
            report["order"] = [
                "creates": watch.creates.count, "skipped": watch.skipped.count, "wentBack": watch.wentBack.count,
                "notCaughtUp": all.count - watch.caughtUp(all, to: watch.latestRead), "missing": watch.missing(all),
                "examples": Array((watch.skipped + watch.wentBack).prefix(5)),
            ]
            report["offline"] = fleet.offline
            if let error = all.lazy.compactMap(\.lastError).first { report["firstError"] = error }
            report["memory"] = [
                "baselineKiB": baseline, "nowKiB": memory.now, "peakKiB": memory.peak,
                "perClientKiB": (memory.peak - baseline) / max(all.count, 1),
            ]
        } catch {
            await fleet.stop()
            await log.shutdown()
            throw error
        }
        let stopping = ContinuousClock.now
        await fleet.stop()
        await log.shutdown()
        report["stopSeconds"] = elapsed(since: stopping)
        report["runSeconds"] = elapsed(since: began)
        return report
    }
}
