import ArgumentParser
import DocFSMetrics

/// `--metrics-file PATH` of the one-shot commands an operator runs from a timer (`docfs check`,
/// `docfs remote gc`, `docfs remote check`): the run's figures as Prometheus text for
/// node_exporter's textfile collector, written also when the run fails.
struct MetricsFileOption: ParsableArguments {
    @Option(
        name: .customLong("metrics-file"),
        help: ArgumentHelp(
            "Also write the run's figures as Prometheus text to PATH (for node_exporter's textfile collector; docs/USING.md lists the names).",
            valueName: "PATH"))
    var path: String?

    /// Where the run records its figures (nil without --metrics-file).
    func start(job: String, store: String) -> JobMetrics? {
        path.map { _ in JobMetrics(job: job, store: store) }
    }

    /// Ends the run's figures and writes them; a file that cannot be written fails the command.
    func finish(_ metrics: JobMetrics?, success: Bool) throws {
        guard let metrics, let path else { return }
        metrics.finish(success: success)
        do { try metrics.write(to: path) } catch {
            throw UserFacingError("docfs: --metrics-file \(path): \(error.localizedDescription)")
        }
    }
}
