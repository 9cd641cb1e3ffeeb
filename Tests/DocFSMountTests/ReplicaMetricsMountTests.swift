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
        let lastSync = try XCTUnwrap(scrape.samples["docfs_replica_last_sync_timestamp_seconds"]?.first?.value, "caught up: \(scrape.samples.keys.sorted())")
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
}
