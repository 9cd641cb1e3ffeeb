import Foundation
import Synchronization

/// A token bucket for bytes: `docfs mount --upload-limit` / `--download-limit`. Every transfer
/// of the mount takes its bytes from one bucket, so the limit holds for all of them together;
/// the bucket holds a quarter of a second of bytes, so a burst after a pause stays short.
package final class RateLimit: Sendable {
    package let bytesPerSecond: Int64
    let capacity: Double
    private struct Bucket { var tokens: Double; var refilled: ContinuousClock.Instant }
    private let bucket: Mutex<Bucket>
    let now: @Sendable () -> ContinuousClock.Instant
    let sleep: @Sendable (Duration) async throws -> Void

    /// `now` and `sleep`: the clock (the tests give one that only moves when slept on).
    package init(
        bytesPerSecond: Int64, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        capacity = max(Double(self.bytesPerSecond) / 4, 64 * 1024)
        self.now = now
        self.sleep = sleep
        bucket = Mutex(Bucket(tokens: capacity, refilled: now()))
    }

    /// Takes `count` bytes, waiting as long as the rate asks (a count above the bucket's size
    /// is taken in pieces).
    package func take(_ count: Int) async throws {
        var left = Double(count)
        while left > 0 {
            let wait = bucket.withLock { b -> Duration? in
                let t = now()
                let elapsed = t - b.refilled
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                b.tokens = min(capacity, b.tokens + seconds * Double(bytesPerSecond))
                b.refilled = t
                let piece = min(left, capacity)
                if b.tokens >= piece {
                    b.tokens -= piece
                    left -= piece
                    return nil
                }
                return .nanoseconds(Int64((piece - b.tokens) / Double(bytesPerSecond) * 1e9) + 1)
            }
            if let wait { try await sleep(wait) }
        }
    }

    /// "10M", "512k", "1G", "250000" (bytes per second; k, M, G are powers of 1024).
    package static func parse(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20, "g": 1 << 30, "G": 1 << 30]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = digits.last, let factor = units[last] { unit = factor; digits = digits.dropLast() }
        guard let n = Int64(digits), n > 0, n <= Int64.max / unit else { return nil }
        return n * unit
    }
}
