import XCTest
import DocFSBridge
@testable import DocFSMetrics

/// The metrics address rules and what a scrape hands the registry (no mount, no socket but one
/// on 127.0.0.1 with a port the kernel picks).
final class MetricsTests: XCTestCase {
    func testAddressesAreLoopbackUnlessPublic() throws {
        XCTAssertEqual(try MetricsAddress.parse("9100", public: false), MetricsAddress(host: "127.0.0.1", port: 9100))
        XCTAssertEqual(try MetricsAddress.parse("localhost:9100", public: false), MetricsAddress(host: "127.0.0.1", port: 9100))
        XCTAssertEqual(try MetricsAddress.parse("127.0.0.5:1", public: false), MetricsAddress(host: "127.0.0.5", port: 1))
        XCTAssertEqual(try MetricsAddress.parse("[::1]:9100", public: false), MetricsAddress(host: "::1", port: 9100))
        for refused in ["0.0.0.0:9100", ":9100", "192.168.1.5:9100", "[::]:9100", "example.org:9100"] {
            XCTAssertThrowsError(try MetricsAddress.parse(refused, public: false), refused) { error in
                XCTAssert("\(error)".contains("metrics_public"), "\(error)")
            }
        }
        XCTAssertEqual(try MetricsAddress.parse(":9100", public: true), MetricsAddress(host: "0.0.0.0", port: 9100))
        XCTAssertEqual(try MetricsAddress.parse("0.0.0.0:9100", public: true).host, "0.0.0.0")
        for malformed in ["", "x", "127.0.0.1:", "127.0.0.1:70000", "[::1]9100"] {
            XCTAssertThrowsError(try MetricsAddress.parse(malformed, public: true), malformed)
        }
    }

    /// Requests counted by the bridge reach the histogram in their buckets, summing to their
    /// time, and a second scrape adds only what is new.
    func testRequestsAreReplayedIntoTheHistogramExactly() throws {
        let stats = RequestStats()
        // 3 getattrs in the first bucket (≤ 10 µs) and 2 reads in the 1 ms bucket.
        for _ in 0..<3 { stats.record(.getattr, since: RequestStats.now()) }
        let slow = RequestStats.now() - 700_000
        stats.record(.read, since: slow)
        stats.record(.read, since: slow)
        stats.bytesRead(4096)
        stats.refused(op: "create", rule: "typeNotAllowed", errno: "EPERM")
        let metrics = MountMetrics(build: [("version", "test")])
        metrics.attach(MetricsSources(requests: stats))
        var text = String(decoding: metrics.scrape(), as: UTF8.self)
        XCTAssert(text.contains(#"docfs_fuse_requests_total{op="getattr"} 3"#), text)
        XCTAssert(text.contains(#"docfs_fuse_requests_total{op="read"} 2"#), text)
        XCTAssert(text.contains(#"docfs_fuse_request_duration_seconds_count{op="read"} 2"#), text)
        XCTAssert(text.contains(#"docfs_fuse_request_duration_seconds_bucket{op="read",le="0.0005"} 0"#), text)
        XCTAssert(text.contains(#"docfs_fuse_request_duration_seconds_bucket{op="read",le="0.001"} 2"#), text)
        XCTAssert(text.contains(#"docfs_fuse_read_bytes_total 4096"#), text)
        XCTAssert(text.contains(#"docfs_refusals_total{op="create",rule="typeNotAllowed",errno="EPERM"} 1"#), text)
        XCTAssert(text.contains(#"docfs_build_info{version="test"} 1"#), text)
        XCTAssertFalse(text.contains(#"op="mkdir""#), "operations never asked for stay out")
        let readSum = try XCTUnwrap(Self.value(of: #"docfs_fuse_request_duration_seconds_sum{op="read"}"#, in: text))
        let figures = stats.operations().first { $0.op == .read }!
        XCTAssertEqual(readSum, Double(figures.nanoseconds.reduce(0, +)) / 1e9, accuracy: 1e-9)

        stats.record(.read, since: RequestStats.now())
        text = String(decoding: metrics.scrape(), as: UTF8.self)
        XCTAssert(text.contains(#"docfs_fuse_requests_total{op="read"} 3"#), text)
        XCTAssert(text.contains(#"docfs_fuse_request_duration_seconds_count{op="read"} 3"#), text)
        XCTAssert(text.contains(#"docfs_fuse_requests_total{op="getattr"} 3"#), text)
    }

    /// The request path's written-out constants match the bucket bounds and the operations.
    func testBucketsOnTheRequestPathMatchTheBounds() {
        XCTAssertEqual(RequestStats.slots, RequestStats.bucketBounds.count + 1)
        XCTAssertEqual(RequestStats.operationCount, FuseOp.allCases.count)
        XCTAssertEqual(RequestStats.slot(0), 0)
        for (i, bound) in RequestStats.bucketBounds.enumerated() {
            XCTAssertEqual(RequestStats.slot(bound), i, "\(bound) ns")
            XCTAssertEqual(RequestStats.slot(bound + 1), i + 1, "\(bound + 1) ns")
        }
        XCTAssertEqual(RequestStats.slot(.max), RequestStats.slots - 1)
    }

    /// Observations replayed for one bucket stay inside it whatever the count and time say.
    func testReplayStaysInsideItsBucket() {
        XCTAssertEqual(RequestStats.bucketBounds.sorted(), RequestStats.bucketBounds)
        let metrics = MountMetrics(build: [])
        let histogram = metrics.registry.makeDurationHistogram(
            name: "replay_check", labels: [], buckets: [.nanoseconds(10_000), .nanoseconds(50_000)])
        // 3 requests said to take 3 ns in all, in the second bucket: clamped to its lower edge.
        MountMetrics.replay(count: 3, nanos: 3, slot: 1, into: histogram)
        let text = metrics.registry.emitToString()
        XCTAssert(text.contains(#"replay_check_bucket{le="1e-05"} 0"#) || text.contains(#"replay_check_bucket{le="0.00001"} 0"#), text)
        XCTAssert(text.contains("replay_check_count 3"), text)
    }

    static func value(of series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
    }
}
