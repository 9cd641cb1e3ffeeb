import Foundation
import Prometheus
import Synchronization
import DocFSBridge
import DocFSReplica

/// What a mount's metrics are read from at each scrape (set once the mount is live).
package struct MetricsSources: Sendable {
    package var requests: RequestStats?
    /// Items and their contents' bytes (nil: a provider without a store).
    package var store: (@Sendable () -> (items: Int, contentBytes: Int64)?)?
    /// A replica's sync (nil: a store of its own).
    package var sync: (@Sendable () -> SyncStatus?)?
    package var transfers: (@Sendable () -> (downloadedFiles: Int, downloadedBytes: Int64, evictedFiles: Int, evictedBytes: Int64))?
    package init(requests: RequestStats? = nil) { self.requests = requests }
}

/// A mount's metrics in a swift-prometheus registry, brought up to date at each scrape.
///
/// Nothing on a FUSE request's path touches the registry: requests are counted by the bridge's
/// atomics (`RequestStats`) and handed over here when scraped, as counter increments and as
/// histogram observations that land in the same buckets and add up to the same time.
package final class MountMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    private let state = Mutex<State>(State())
    /// Labels of `docfs_build_info` (version, commit, libfuse, schema).
    private let build: [(String, String)]

    private struct State {
        var sources: MetricsSources?
        /// Totals already handed to the registry, by series.
        var handed: [String: Int64] = [:]
        /// [op][bucket] counts and nanoseconds already replayed into the histograms.
        var replayed: [[(count: UInt64, nanos: UInt64)]] = []
    }

    package init(build: [(String, String)]) {
        self.build = build
    }

    package func attach(_ sources: MetricsSources) {
        state.withLock { $0.sources = sources }
    }

    /// The registry as Prometheus text, after reading every source. Scrapes take turns.
    package func scrape() -> [UInt8] {
        state.withLock { state in
            gauge(
                "build_info", "docfs's version, the commit it was built from, the libfuse it runs with and the server schema it speaks (always 1)",
                build
            ).set(Int64(1))
            if let sources = state.sources {
                collect(sources, into: &state)
            }
        }
        return registry.emitToBuffer()
    }

    // MARK: Collection

    private func collect(_ sources: MetricsSources, into state: inout State) {
        if let requests = sources.requests { collectRequests(requests, into: &state) }
        if let figures = sources.store?() {
            gauge("items", "Items in the store, root and trash included").set(Int64(figures.items))
            gauge("store_content_bytes", "Bytes of every file's contents in the store (a replica's evicted files included)").set(figures.contentBytes)
        }
        guard let status = sources.sync?() else { return }
        gauge("replica_online", "1 when the last request to the server got an answer, 0 while it is unreachable").set(Int64(status.online ? 1 : 0))
        gauge("replica_outbox_entries", "Changes not on the server yet (set-aside ones included)").set(Int64(status.pending))
        gauge("replica_outbox_bytes", "Bytes of contents still to upload").set(status.pendingBytes)
        gauge("replica_outbox_oldest_age_seconds", "How long the oldest pending change has waited (0 when none)").set(
            status.oldestPendingSeconds ?? 0)
        gauge("replica_set_aside_items", "Items whose change the server refused for a reason a retry will not mend").set(Int64(status.setAside))
        gauge("replica_set_aside_changes", "Changes of set-aside items waiting in the outbox").set(Int64(status.setAsideChanges))
        gauge("replica_refused_items", "Items whose change the server refused (user.docfs.sync says why)").set(Int64(status.failedItems))
        gauge("replica_incoming_changes", "Changes other replicas made that this one has not applied yet").set(status.incoming)
        gauge("replica_downloads_in_flight", "Downloads of contents in progress").set(Int64(status.downloading))
        if let at = status.lastSyncAt, let date = try? Date(at, strategy: .iso8601) {
            gauge("replica_last_sync_timestamp_seconds", "When the replica last had sent everything with the server answering (Unix time)").set(
                date.timeIntervalSince1970)
        }
        if let limit = status.cacheLimit {
            gauge("replica_cache_limit_bytes", "The --cache-size limit for downloaded contents").set(limit)
        }
        if let here = status.cachedBytes {
            gauge("replica_cache_bytes", "Bytes of contents here as last counted (with --cache-size)").set(here)
        }
        advance("replica_uploaded_bytes", "Bytes uploaded to the bucket since the mount", to: status.uploadedBytes, in: &state)
        advance("replica_changes_sent", "Changes sent to the server since the mount", to: Int64(status.sent), in: &state)
        advance("replica_conflicts", "Conflicts with other replicas since the mount", to: Int64(status.conflicts), in: &state)
        if let t = sources.transfers?() {
            advance("replica_downloaded_bytes", "Bytes of contents downloaded and placed since the mount", to: t.downloadedBytes, in: &state)
            advance("replica_downloaded_files", "Files downloaded since the mount", to: Int64(t.downloadedFiles), in: &state)
            advance(
                "replica_cache_evicted_files", "Files whose downloaded contents were evicted since the mount", to: Int64(t.evictedFiles), in: &state)
            advance("replica_cache_evicted_bytes", "Bytes of contents evicted since the mount", to: t.evictedBytes, in: &state)
        }
    }

    private static let durationBuckets = RequestStats.bucketBounds.map { Duration.nanoseconds(Int64($0)) }

    private func collectRequests(_ stats: RequestStats, into state: inout State) {
        let slots = RequestStats.bucketBounds.count + 1
        if state.replayed.isEmpty {
            state.replayed = FuseOp.allCases.map { _ in Array(repeating: (0, 0), count: slots) }
        }
        for figures in stats.operations() {
            let op = figures.op.rawValue
            let labels = [("op", figures.op.name)]
            let total = figures.counts.reduce(0, +)
            // Operations never asked for stay out of the text (there are thirty of them).
            guard total > 0 else { continue }
            advance("fuse_requests", "FUSE requests answered, by operation", labels, to: Int64(total), in: &state)
            let histogram = registry.makeDurationHistogram(
                descriptor: MetricNameDescriptor(
                    namespace: "docfs", metricName: "fuse_request_duration", unitName: "seconds",
                    helpText: "Time a FUSE thread spent on a request, by operation"),
                labels: labels, buckets: Self.durationBuckets)
            for slot in 0..<slots {
                let before = state.replayed[op][slot]
                let count = figures.counts[slot] &- before.count
                let nanos = figures.nanoseconds[slot] &- before.nanos
                guard count > 0, count < UInt64(Int64.max), nanos < UInt64(Int64.max) else { continue }
                state.replayed[op][slot] = (figures.counts[slot], figures.nanoseconds[slot])
                Self.replay(count: count, nanos: nanos, slot: slot, into: histogram)
            }
        }
        advance("fuse_read_bytes", "Bytes read through the mount", to: Int64(clamping: stats.totalBytesRead), in: &state)
        advance("fuse_written_bytes", "Bytes written through the mount", to: Int64(clamping: stats.totalBytesWritten), in: &state)
        for (refusal, count) in stats.refusals {
            advance(
                "refusals", "Operations refused or failed, by operation, rule (the provider's error code) and errno",
                [("op", refusal.op), ("rule", refusal.rule), ("errno", refusal.errno)], to: Int64(clamping: count), in: &state)
        }
    }

    /// `count` requests that took `nanos` in all, each within bucket `slot`, as observations of
    /// the histogram: they land in that bucket and their sum is `nanos` (the mean, with the
    /// remainder spread one nanosecond at a time). Clamped to the bucket should a request have
    /// been counted between the reads of its time and its count.
    static func replay(count: UInt64, nanos: UInt64, slot: Int, into histogram: DurationHistogram) {
        let bounds = RequestStats.bucketBounds
        let low = slot == 0 ? 0 : bounds[slot - 1] + 1
        let high = slot < bounds.count ? bounds[slot] : UInt64(Int64.max)
        let mean = nanos / count
        let extra = nanos % count
        for i in 0..<count {
            let value = min(max(mean + (i < extra ? 1 : 0), low), high)
            histogram.record(.nanoseconds(Int64(value)))
        }
    }

    // MARK: The registry

    private func descriptor(_ name: String, _ help: String, unit: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "docfs", metricName: name, unitName: unit, helpText: help)
    }

    private func gauge(_ name: String, _ help: String, _ labels: [(String, String)] = []) -> Gauge {
        registry.makeGauge(descriptor: descriptor(name, help, unit: ""), labels: labels)
    }

    /// Brings the counter `docfs_NAME_total` up to `total` (the registry's counters only go up by
    /// increments; the sources keep totals).
    private func advance(_ name: String, _ help: String, _ labels: [(String, String)] = [], to total: Int64, in state: inout State) {
        let key = name + labels.map { "|\($0.0)=\($0.1)" }.joined()
        let delta = total - state.handed[key, default: 0]
        let counter = registry.makeCounter(descriptor: descriptor(name, help, unit: "total"), labels: labels)
        guard delta > 0 else { return }
        state.handed[key] = total
        counter.increment(by: delta)
    }
}
