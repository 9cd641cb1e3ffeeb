import Foundation
import XCTest

/// A replica's `-o metrics` against the test servers: what was uploaded, downloaded and evicted
/// and the outbox show up as the Prometheus project's parser reads them.
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
}
