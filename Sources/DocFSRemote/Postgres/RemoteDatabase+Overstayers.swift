import Foundation
import PostgresNIO

// A call held up past its deadline, or refused for a lock it waited for too long, may be waiting
// on a replica session that lifted its own timeouts and sits in an open transaction. The server
// decides which sessions overstayed their role's limits and ends them (`docfs_end_overstayers`,
// schema 19); this client only asks, at most once per `overstayCheckInterval`, and never waits
// for the answer on the call's path.
extension RemoteDatabase {
    static let overstayCheckInterval: Duration = .seconds(5)

    /// lock_not_available (a lock not had within `lock_timeout`) or query_canceled (a statement
    /// past `statement_timeout`), also inside a transaction's error.
    static func isHeldUp(_ error: any Error) -> Bool {
        switch error {
        case let e as PostgresTransactionError:
            guard let inner = e.closureError ?? e.beginError ?? e.commitError else { return false }
            return isHeldUp(inner)
        case let e as PSQLError:
            let state = e.serverInfo?[.sqlState] ?? ""
            return state == "55P03" || state == "57014"
        default:
            return false
        }
    }

    /// Asks the server, in the background, to end overstaying replica sessions. A server before
    /// schema 19 has no such function: the refusal is only logged at debug.
    func endOverstayersSoon() {
        let now = ContinuousClock.now
        let due = lastOverstayCheck.withLock { last -> Bool in
            if let last, now - last < Self.overstayCheckInterval { return false }
            last = now
            return true
        }
        guard due else { return }
        let (client, logger, timeout) = (self.client, self.logger, self.operationTimeout)
        Task {
            do {
                let ended = try await withDeadline(timeout, timedOut: { RemoteError.unreachable("no answer within \(timeout)") }) {
                    var ended = 0
                    for try await (n) in try await client.query("SELECT docfs_end_overstayers()", logger: logger).decode(Int.self) {
                        ended = n
                    }
                    return ended
                }
                if ended > 0 {
                    logger.warning("the server ended \(ended) replica session(s) that held a transaction past their role's limits")
                }
            } catch {
                logger.debug("could not ask the server to end overstaying sessions: \(error)")
            }
        }
    }
}
