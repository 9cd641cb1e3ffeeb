import Foundation

/// `docfs-scale replicas fanout`: one change at a time, each made on one client (in turn), and
/// the time until each of the others has it in its store; a warm-up change first (not counted),
/// which every client's first catch-up and connections are done by.
enum FanoutRun {
    struct Result {
        /// Per change: the time until every other client had it (nil: one never did in time).
        var everyClient: [Double?] = []
        /// Per change and client: the time until that client had it.
        var arrivals: [Double] = []
        /// Clients that did not have a change by its deadline, summed over the changes.
        var missed = 0
        var warmUpMissed = 0
    }

    static func run(_ clients: [HarnessClient], changes: Int, timeout: Double, watch: OrderWatch) async throws -> Result {
        var result = Result()
        result.warmUpMissed = try await one(clients, writer: clients[0], name: "warm-up.txt", timeout: timeout, watch: watch).missed
        // No other client reached at all: nothing to time (the report says why: offline clients).
        if result.warmUpMissed == clients.count - 1 { return result }
        for k in 0..<changes {
            let change = try await one(clients, writer: clients[k % clients.count], name: "fanout-\(k).txt", timeout: timeout, watch: watch)
            result.arrivals += change.arrivals
            result.missed += change.missed
            result.everyClient.append(change.missed == 0 ? change.arrivals.max() ?? 0 : nil)
        }
        return result
    }

    /// Makes one file on `writer` and waits until every other client has it, or `timeout`.
    private static func one(
        _ clients: [HarnessClient], writer: HarnessClient, name: String, timeout: Double, watch: OrderWatch
    ) async throws -> (arrivals: [Double], missed: Int) {
        let start = ContinuousClock.now
        let row = try await writer.write(name, Array("\(name) from client \(writer.index)\n".utf8))
        var waiting = clients.filter { $0.index != writer.index }
        var arrivals: [Double] = []
        var serverRow: Int64?
        var lastSweep = ContinuousClock.now
        while !waiting.isEmpty, elapsed(since: start) < timeout {
            try await Task.sleep(for: .milliseconds(5))
            if serverRow == nil { serverRow = writer.serverRow(row) }
            guard let id = serverRow else { continue }
            let now = elapsed(since: start)
            waiting.removeAll { client in
                guard client.has(id) else { return false }
                arrivals.append(now)
                return true
            }
            // The order checks go on meanwhile, a few times a second.
            if ContinuousClock.now - lastSweep > .milliseconds(250) {
                try await watch.readLog()
                watch.sweep(clients)
                lastSweep = .now
            }
        }
        return (arrivals, waiting.count)
    }
}
