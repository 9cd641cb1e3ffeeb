import Foundation
import Logging
import Synchronization
import DocFSProvider
import DocFSRemote
import DocFSStore

// What the engine reports: `docfs status` (user.docfs.status) and one log line per new error.
extension SyncEngine {
    // MARK: Status

    func noteIdle() {
        progress.withLock { p in
            p.oldestPendingNs = nil
            if p.online { p.state = "idle"; p.lastSyncAt = Date() }
        }
    }

    func report(_ failure: ServerExchangeError) {
        let changed = progress.withLock { p -> Bool in
            let changed = p.lastError != failure.message
            p.lastError = failure.message
            p.lastErrorAt = Date()
            p.online = failure.reachedServer
            p.state = failure.stalls ? "stalled" : "offline"
            return changed
        }
        if changed {
            logger.error(
                "sync: \(failure.message)\(failure.stalls ? " (retrying every minute; local work goes on)" : " (retrying with backoff; local work goes on)")"
            )
        }
    }

    package func statusJSON() -> String { SyncStatus.encoded(status()) }

    package func status() -> SyncStatus {
        // Read together: a chunk leaves the outbox and is counted under this lock (`send`).
        let (counts, snapshot) = progress.withLock { (store.outboxCounts, $0) }
        let now = Date()
        var status = SyncStatus(
            online: snapshot.online, pending: counts.pending, pendingBytes: counts.pendingBytes,
            lastError: snapshot.lastError,
            lastErrorAt: snapshot.lastErrorAt.map { $0.formatted(.iso8601) },
            state: counts.pending <= snapshot.setAsideChanges && snapshot.online ? "idle" : snapshot.state,
            uploadedBytes: snapshot.uploadedBytes, uploadRate: snapshot.rate(at: now), sent: snapshot.sent,
            oldestPendingSeconds: counts.pending == 0 ? nil : snapshot.oldestPendingNs.map { max(0, now.timeIntervalSince1970 - Double($0) / 1e9) },
            failedItems: snapshot.failedItems,
            remote: "\(configuration.postgres) + s3://\(configuration.bucket)/\(configuration.prefix) at \(configuration.endpoint.hostHeader)"
                + Self.listenNote(configuration.listen) + (configuration.read.map { ", reads from \($0.withoutPassword)" } ?? ""))
        let positions = incoming.positions.withLock { $0 }
        let conflicts = store.conflictSummary
        status.incoming = Self.incomingCount(
            latest: positions.latest, anchor: positions.anchor,
            deferred: incoming.deferredCount.load(ordering: .relaxed),
            held: heldChanges.withLock { $0.count })
        status.anchor = positions.anchor
        status.conflicts = conflicts.count
        status.recentConflicts = conflicts.recent
        let cache = onDemand.cacheFigures
        status.cacheLimit = cache.limit
        status.cachedBytes = cache.local
        status.downloading = cache.downloading
        status.setAside = snapshot.setAsideItems
        status.setAsideChanges = min(snapshot.setAsideChanges, counts.pending)
        status.restore = incoming.restoreReport.withLock { $0 }
        status.refusedIncoming = incoming.setAsideCount.load(ordering: .relaxed)
        if status.lastError == nil, let error = follower.lastError.withLock({ $0 }) { status.lastError = error }
        status.lastSyncAt = snapshot.lastSyncAt.map { $0.formatted(.iso8601) }
        return status
    }

    /// Where the mount listens, when not on the server's URL (`--remote-listen`).
    static func listenNote(_ target: ReplicaConfiguration.ListenTarget) -> String {
        switch target {
        case .server: ""
        case .url(let url): ", LISTEN on \(url)"
        case .none: ", no LISTEN (the change log read every second)"
        }
    }

    /// Changes to come for `docfs status`: the log's positions past the anchor, plus items
    /// deferred and changes held. Saturating: a position near Int64.max (a hand-written row)
    /// shows as a large count, never traps the daemon.
    static func incomingCount(latest: Int64, anchor: Int64, deferred: Int, held: Int) -> Int64 {
        let (gap, over) = latest.subtractingReportingOverflow(anchor)
        var total = over ? Int64.max : max(0, gap)
        for extra in [Int64(deferred), Int64(held)] {
            let (sum, overflow) = total.addingReportingOverflow(extra)
            total = overflow ? Int64.max : sum
        }
        return total
    }
}

/// The engine's counters for `docfs status`.
struct SyncProgress: Sendable {
    var online = true
    var state = "idle"
    /// Cleared by the next chunk sent without an error.
    var lastError: String?
    var lastErrorAt: Date?
    var sent = 0
    var uploadedBytes: Int64 = 0
    var failedItems = 0
    /// Items set aside and their changes waiting in the outbox (not counted as sendable).
    var setAsideItems = 0
    var setAsideChanges = 0
    var oldestPendingNs: Int64?
    /// The last time the outbox was found empty with the server answering (caught up).
    var lastSyncAt: Date?
    /// (time, uploadedBytes) samples for the rate over the last seconds.
    var samples: [(Double, Int64)] = []

    mutating func noteUploaded(_ bytes: Int64) {
        uploadedBytes += bytes
        let now = Date().timeIntervalSince1970
        samples.append((now, uploadedBytes))
        samples.removeAll { now - $0.0 > 5 }
    }

    func rate(at date: Date) -> Double {
        let now = date.timeIntervalSince1970
        guard let first = samples.first(where: { now - $0.0 <= 5 }), let last = samples.last, last.0 > first.0 else { return 0 }
        return Double(last.1 - first.1) / (last.0 - first.0)
    }
}
