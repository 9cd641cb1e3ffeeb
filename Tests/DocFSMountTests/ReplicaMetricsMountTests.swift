import Foundation
import XCTest

/// A replica's `-o metrics` against the test servers: what was uploaded, downloaded and evicted
/// and the outbox show up as the Prometheus project's parser reads them; and the long remote
/// commands' progress on a terminal.
final class ReplicaMetricsMountTests: ReplicaTestCase {
    func testReplicaFiguresMoveWithUploadsDownloadsAndEvictions() throws {
        let r = try makeRemote(mount: false)
        let python = try MetricsScrape.parserPython(dir: r.fx.dir)
        try r.fx.mount(extra: ["-o", "metrics=127.0.0.1:0", "--cache-size", "64M"])
        let port = try MetricsScrape.port(of: r.fx)
        let payload = testBytes(400_000, seed: 4141)
        try r.fx.writeSource("big.bin", payload)
        XCTAssertEqual(r.fx.sh("cp src/big.bin mnt/").status, 0)
        try r.waitUntilUploaded()
        XCTAssertEqual(r.fx.docfs(["evict", r.fx.m("big.bin")]).status, 0)
        XCTAssertEqual(r.fx.sh("cmp src/big.bin mnt/big.bin").status, 0, "read back: downloaded again")

        // The engine notes it is caught up within its next round (every few seconds at most).
        var scrape = try MetricsScrape.fetch(python, port: port, dir: r.fx.dir)
        let deadline = Date().addingTimeInterval(30)
        while scrape.samples["docfs_replica_last_sync_timestamp_seconds"] == nil, Date() < deadline {
            usleep(200_000)
            scrape = try MetricsScrape.fetch(python, port: port, dir: r.fx.dir)
        }
        XCTAssertEqual(scrape.total("docfs_replica_online"), 1, "\(scrape.samples)")
        XCTAssertEqual(scrape.total("docfs_replica_outbox_entries"), 0)
        XCTAssertEqual(scrape.total("docfs_replica_outbox_bytes"), 0)
        XCTAssertGreaterThanOrEqual(scrape.total("docfs_replica_uploaded_bytes_total"), Double(payload.count))
        XCTAssertGreaterThanOrEqual(scrape.total("docfs_replica_changes_sent_total"), 1)
        XCTAssertGreaterThanOrEqual(scrape.total("docfs_replica_downloaded_bytes_total"), Double(payload.count))
        XCTAssertEqual(scrape.total("docfs_replica_downloaded_files_total"), 1)
        XCTAssertEqual(scrape.total("docfs_replica_cache_evicted_files_total"), 1)
        XCTAssertEqual(scrape.total("docfs_replica_cache_limit_bytes"), Double(64 << 20))
        XCTAssertEqual(scrape.total("docfs_replica_set_aside_items"), 0)
        XCTAssertEqual(scrape.total("docfs_replica_conflicts_total"), 0)
        XCTAssertEqual(scrape.types["docfs_replica_uploaded_bytes"], "counter")
        let lastSync = try XCTUnwrap(
            scrape.samples["docfs_replica_last_sync_timestamp_seconds"]?.first?.value, "caught up: \(scrape.samples.keys.sorted())")
        XCTAssertEqual(lastSync, Date().timeIntervalSince1970, accuracy: 120)
        XCTAssertGreaterThanOrEqual(scrape.total("docfs_store_content_bytes"), Double(payload.count))
    }

    /// `docfs init --remote` of a tree on the server and `docfs remote gc` draw their progress on a
    /// terminal, and print only their results when piped.
    func testInitRemoteAndGCShowProgressOnATerminalOnly() throws {
        let r = try makeRemote()
        XCTAssertEqual(r.fx.sh("mkdir -p mnt/a/b && for i in 1 2 3 4 5; do echo $i > mnt/a/b/f$i.txt; done").status, 0)
        try r.waitUntilUploaded()
        let env = r.awsEnvironment(secret: r.servers.secretKey)

        let onTerminal = runOnTerminal(r.fx.bin, ["init", r.fx.dir + "/second"] + r.remoteArguments, dir: r.fx.dir, env: env)
        XCTAssertEqual(onTerminal.status, 0, "\(onTerminal)")
        XCTAssert(onTerminal.terminal.contains("taking the server's tree:") && onTerminal.terminal.contains("\r\u{1B}[K"), "\(onTerminal)")
        XCTAssert(onTerminal.terminal.contains("is a replica of"), "the result still follows: \(onTerminal)")
        let piped = r.fx.docfs(["init", r.fx.dir + "/third"] + r.remoteArguments, env: env)
        XCTAssertEqual(piped.status, 0, "\(piped)")
        XCTAssertFalse(piped.stderr.contains("taking the server's tree") || piped.stderr.contains("\u{1B}"), "nothing extra when piped: \(piped)")
        XCTAssert(piped.stderr.contains("2 folder(s), 5 file(s)"), "\(piped)")

        let gc = runOnTerminal(r.fx.bin, ["remote", "gc", r.fx.store, "--grace", "0"], dir: r.fx.dir, env: env)
        XCTAssertEqual(gc.status, 0, "\(gc)")
        XCTAssert(gc.terminal.contains("docfs remote gc: "), "\(gc)")
        XCTAssert(gc.stdout.contains("old version(s)"), "\(gc)")
        let gcPiped = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0"], env: env)
        XCTAssertEqual(gcPiped.status, 0, "\(gcPiped)")
        XCTAssertEqual(gcPiped.stderr, "", "nothing extra when piped")
    }

    /// `docfs remote setup` (run again on a tree: it upgrades and grants again) and `docfs
    /// versions restore` draw their steps on a terminal, and print only their results when piped.
    func testSetupAndRestoreShowProgressOnATerminalOnly() throws {
        let r = try makeRemote()
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let setupArguments = [
            "remote", "setup", "--remote", r.databaseURL, "--objects", "s3://\(r.bucket)/\(r.prefix)",
            "--s3-endpoint", r.servers.s3Endpoint,
        ]
        let setup = runOnTerminal(r.fx.bin, setupArguments, dir: r.fx.dir, env: env)
        XCTAssertEqual(setup.status, 0, "\(setup)")
        XCTAssert(setup.terminal.contains("docfs remote setup: ") && setup.terminal.contains("\r\u{1B}[K"), "\(setup)")
        XCTAssert(setup.stdout.contains("is set up"), "\(setup)")
        let setupPiped = r.fx.docfs(setupArguments, env: env)
        XCTAssertEqual(setupPiped.status, 0, "\(setupPiped)")
        XCTAssertEqual(setupPiped.stderr, "", "nothing extra when piped")

        for text in ["first", "second"] {
            XCTAssertEqual(r.fx.sh("printf '\(text)' > mnt/notes.txt").status, 0)
            try r.waitUntilUploaded()
        }
        let listing = r.fx.docfs(["versions", "--json", r.fx.m("notes.txt")], env: env)
        let versions = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: Data(listing.stdout.utf8)) as? [String: Any])?["versions"] as? [[String: Any]], "\(listing)")
        let first = try XCTUnwrap(versions.first { ($0["size"] as? Int) == 5 }?["number"] as? Int, "\(versions)")
        let restore = runOnTerminal(r.fx.bin, ["versions", "restore", r.fx.m("notes.txt"), String(first), "--as", "v1.txt"], dir: r.fx.dir, env: env)
        XCTAssertEqual(restore.status, 0, "\(restore)")
        XCTAssert(restore.terminal.contains("fetching version \(first)") && restore.terminal.contains("\r\u{1B}[K"), "\(restore)")
        XCTAssertEqual(try String(contentsOfFile: r.fx.m("v1.txt"), encoding: .utf8), "first")
        let restorePiped = r.fx.docfs(["versions", "restore", r.fx.m("notes.txt"), String(first), "--as", "v1 again.txt"], env: env)
        XCTAssertEqual(restorePiped.status, 0, "\(restorePiped)")
        XCTAssertEqual(restorePiped.stderr, "", "nothing extra when piped")
        XCTAssert(restorePiped.stdout.contains("restored to"), "\(restorePiped)")
    }

    /// `docfs remote gc --metrics-file` and `docfs remote check --metrics-file`: the figures their
    /// `--json` prints, as gauges node_exporter's textfile collector reads (prometheus_client's
    /// parser here); a damaged block shows as `docfs_remote_check_success 0`.
    func testGCAndCheckWriteTheirFiguresForTheTextfileCollector() throws {
        let r = try makeRemote()
        let python = try MetricsScrape.parserPython(dir: r.fx.dir)
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        for text in ["one", "two two"] {
            XCTAssertEqual(r.fx.sh("printf '\(text)' > mnt/notes.txt").status, 0)
            try r.waitUntilUploaded()
        }
        let gcFile = r.fx.dir + "/gc.prom"
        let gc = r.fx.docfs(["remote", "gc", r.fx.store, "--grace", "0", "--keep-versions", "0", "--json", "--metrics-file", gcFile], env: env)
        XCTAssertEqual(gc.status, 0, "\(gc)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(gc.stdout.utf8)) as? [String: Any], gc.stdout)
        let gcFigures = try MetricsScrape.read(python, file: gcFile, dir: r.fx.dir)
        XCTAssertEqual(gcFigures.total("docfs_remote_gc_success"), 1, "\(gcFigures.samples)")
        XCTAssertEqual(gcFigures.total("docfs_remote_gc_versions_removed"), Double(report["versions"] as? Int ?? -1))
        XCTAssertEqual(gcFigures.total("docfs_remote_gc_blocks_removed"), Double(report["blocks"] as? Int ?? -1))
        XCTAssertEqual(gcFigures.total("docfs_remote_gc_pack_bytes_freed"), Double(report["packBytes"] as? Int ?? -1))
        XCTAssertEqual(gcFigures.samples["docfs_remote_gc_success"]?.first?.labels["store"], r.fx.store)

        let checkFile = r.fx.dir + "/check.prom"
        let check = r.fx.docfs(["remote", "check", r.fx.store, "--metrics-file", checkFile], env: env)
        XCTAssertEqual(check.status, 0, "\(check)")
        var checkFigures = try MetricsScrape.read(python, file: checkFile, dir: r.fx.dir)
        XCTAssertEqual(checkFigures.total("docfs_remote_check_success"), 1, "\(checkFigures.samples)")
        XCTAssertGreaterThanOrEqual(checkFigures.total("docfs_remote_check_blocks"), 1)
        XCTAssertEqual(checkFigures.total("docfs_remote_check_damaged_blocks"), 0)

        // The packs left (the current version's), overwritten with zeros in the bucket.
        let packs = try r.objects().filter { $0.key.hasPrefix("\(r.prefix)/packs/") }
        XCTAssertFalse(packs.isEmpty)
        for pack in packs { _ = try r.servers.s3check(["zero", r.bucket, pack.key]) }
        let damaged = r.fx.docfs(["remote", "check", r.fx.store, "--metrics-file", checkFile], env: env)
        XCTAssertEqual(damaged.status, 1, "\(damaged)")
        checkFigures = try MetricsScrape.read(python, file: checkFile, dir: r.fx.dir)
        XCTAssertEqual(checkFigures.total("docfs_remote_check_success"), 0)
        XCTAssertGreaterThanOrEqual(checkFigures.total("docfs_remote_check_damaged_blocks"), 1)
        XCTAssertGreaterThanOrEqual(checkFigures.total("docfs_remote_check_affected_versions"), 1)
    }
}
