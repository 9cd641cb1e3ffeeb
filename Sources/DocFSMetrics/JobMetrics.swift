import Foundation
import Prometheus

/// A one-shot command's figures (`docfs check`, `docfs remote gc`, `docfs remote check` with
/// `--metrics-file`) in Prometheus text, for node_exporter's textfile collector: the file holds
/// the last run's figures, so each is a gauge named `docfs_JOB_NAME`, labelled with the store.
///
/// Written whole or not at all (a temporary file renamed over the old one), because the
/// collector may read it at any moment.
package final class JobMetrics {
    package let job: String
    private let labels: [(String, String)]
    private let registry = PrometheusCollectorRegistry()
    private let started = Date()

    /// `job` is the metric names' middle word (`check`, `remote_gc`, `remote_check`).
    package init(job: String, store: String) {
        self.job = job
        labels = [("store", store)]
    }

    package func set(_ name: String, _ help: String, _ value: Int64) {
        gauge(name, help).set(value)
    }

    package func set(_ name: String, _ help: String, _ value: Double) {
        gauge(name, help).set(value)
    }

    /// The run's end: whether it succeeded (a failed run writes the file too, with what it
    /// knows, so an alert can fire on `docfs_JOB_success == 0`), when, and how long it took.
    package func finish(success: Bool) {
        let now = Date()
        set("success", "1 when the last run finished with nothing wrong, 0 when it failed or found problems", Int64(success ? 1 : 0))
        set("last_run_timestamp_seconds", "When the last run finished (Unix time)", now.timeIntervalSince1970)
        set("duration_seconds", "How long the last run took", now.timeIntervalSince(started))
    }

    package func text() -> String {
        String(decoding: registry.emitToBuffer(), as: UTF8.self)
    }

    /// Writes the text to `path` atomically: beside it first, then renamed over it.
    package func write(to path: String) throws {
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).\(getpid()).tmp")
        do {
            try Data(text().utf8).write(to: temporary)
            guard rename(temporary.path, url.path) == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: String(cString: strerror(errno))])
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
    }

    private func gauge(_ name: String, _ help: String) -> Gauge {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(namespace: "docfs", subsystem: job, metricName: name, helpText: help),
            labels: labels)
    }
}
