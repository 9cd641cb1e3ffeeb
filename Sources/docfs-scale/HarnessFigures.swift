import Foundation

/// Figures of a run: quantiles of latencies, this process's memory, the report as JSON.
enum HarnessFigures {
    /// The q-quantile (0...1) of sorted values, nearest rank; nil when there are none.
    static func quantile(_ sorted: [Double], _ q: Double) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// Median, p99 and max of `values` in seconds (rounded to ms).
    static func summary(_ values: [Double]) -> [String: Double] {
        let sorted = values.sorted()
        var out: [String: Double] = [:]
        for (name, q) in [("median", 0.5), ("p99", 0.99), ("max", 1.0)] {
            if let v = quantile(sorted, q) { out[name] = (v * 1000).rounded() / 1000 }
        }
        return out
    }

    /// This process's resident memory now and at its peak, in KiB (/proc/self/status).
    static func residentKiB() -> (now: Int, peak: Int) {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (-1, -1) }
        func field(_ name: String) -> Int {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return -1 }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    static func json(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Seconds since `start` on the monotonic clock.
func elapsed(since start: ContinuousClock.Instant) -> Double {
    let d = ContinuousClock.now - start
    return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// Runs `body` to its end from synchronous code (the command's `run`).
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = BlockingResult<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// The answer `runBlocking`'s task hands its waiting thread (set once, before the signal).
private final class BlockingResult<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
