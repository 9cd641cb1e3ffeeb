import XCTest
import Synchronization
@testable import DocFSRemote

/// The token bucket behind --upload-limit / --download-limit, on a clock that moves only when
/// slept on: how long a transfer waits is computed, not measured.
final class RateLimitTests: XCTestCase {
    final class FakeClock: Sendable {
        let state = Mutex((now: ContinuousClock.now, slept: Duration.zero))
        func now() -> ContinuousClock.Instant { state.withLock { $0.now } }
        func sleep(_ d: Duration) {
            state.withLock {
                $0.now += d; $0.slept += d
            }
        }
        var slept: Double { state.withLock { Double($0.slept.components.seconds) + Double($0.slept.components.attoseconds) / 1e18 } }
    }

    func testBytesGoAtTheRateAfterOneShortBurst() async throws {
        let clock = FakeClock()
        let limit = RateLimit(bytesPerSecond: 1 << 20, now: { clock.now() }, sleep: { clock.sleep($0) })
        // The bucket holds a quarter second: 256 KiB go at once, the rest at 1 MiB/s.
        try await limit.take(256 << 10)
        XCTAssertEqual(clock.slept, 0)
        for _ in 0..<40 { try await limit.take(256 << 10) } // 10 MiB more
        XCTAssertEqual(clock.slept, 10, accuracy: 0.01)
        // A piece larger than the bucket is taken in parts, at the same rate.
        try await limit.take(2 << 20)
        XCTAssertEqual(clock.slept, 12, accuracy: 0.01)
    }

    func testTimeWithoutTransfersRefillsOnlyTheBucket() async throws {
        let clock = FakeClock()
        let limit = RateLimit(bytesPerSecond: 1 << 20, now: { clock.now() }, sleep: { clock.sleep($0) })
        try await limit.take(1 << 20)
        let before = clock.slept
        clock.state.withLock { $0.now += .seconds(60) } // idle for a minute
        try await limit.take(1 << 20)
        XCTAssertEqual(clock.slept - before, 0.75, accuracy: 0.01, "a quarter second's burst, not a minute's")
    }

    func testRatesAreParsedAsTheCommandLineGivesThem() {
        XCTAssertEqual(RateLimit.parse("10M"), 10 << 20)
        XCTAssertEqual(RateLimit.parse("512k"), 512 << 10)
        XCTAssertEqual(RateLimit.parse("1G"), 1 << 30)
        XCTAssertEqual(RateLimit.parse("250000"), 250_000)
        for bad in ["", "0", "-1M", "10X", "M", "1.5M"] { XCTAssertNil(RateLimit.parse(bad), bad) }
    }
}
