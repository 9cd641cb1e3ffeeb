import ArgumentParser
import Foundation
import DocFSStore

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Verify (and with --repair, mend) a store that is not mounted.",
        discussion: """
            Checks that every item's parent exists and is a folder, names are valid and unique per \
            folder, every file item has its content file with the recorded size, every content file \
            belongs to a file item, and nothing is left in staging/.

            --repair moves items whose folder is gone to /lost+found, fixes sizes, removes dangling \
            rows and attributes, orphan content files and staged leftovers, and says what it did.

            Exit status 0 only when the store is consistent (after the repair, with --repair). \
            A store that a mount holds is refused. --json prints one object instead of lines \
            (see README, "Output for scripts").
            """)

    @Argument(help: "The store directory (made with `docfs init`).")
    var store: String

    @Flag(help: "Mend what can be mended.")
    var repair = false

    @Flag(help: "Print one JSON object instead of lines (fields: see README, \"Output for scripts\").")
    var json = false

    @OptionGroup var metricsFile: MetricsFileOption

    func run() throws {
        let report: StoreCheckReport
        let progress = ProgressLine()
        defer { progress.clear() }
        let metrics = metricsFile.start(job: "check", store: store)
        do {
            report = try StoreChecker.check(at: URL(fileURLWithPath: store), repair: repair) { step in
                progress.update("docfs check: \(step)", force: true)
            }
            progress.clear()
        } catch {
            try metricsFile.finish(metrics, success: false)
            throw UserFacingError("docfs: cannot check store \(store): \(error.reason.isEmpty ? "\(error)" : error.reason)")
        }
        if let metrics {
            metrics.set("problems", "Problems the last run found", Int64(report.problems.count))
            metrics.set("repairs", "What the last run mended (with --repair)", Int64(report.repairs.count))
            metrics.set("remaining_problems", "Problems left after the last run", Int64(report.remaining.count))
            metrics.set("folders", "Folders in the store", Int64(report.folders))
            metrics.set("files", "Files in the store", Int64(report.files))
            metrics.set("symlinks", "Symbolic links in the store", Int64(report.symlinks))
            metrics.set("content_files", "Content files in the store", Int64(report.contentFiles))
            metrics.set("content_bytes", "Bytes of the store's content files", report.contentBytes)
            try metricsFile.finish(metrics, success: report.isConsistent)
        }
        if json {
            JSONOutput.print(CheckJSON(store: store, repair: repair, report: report))
            if !report.isConsistent { throw ExitCode(1) }
            return
        }
        for problem in report.problems { print("problem: \(problem)") }
        for line in report.repairs { print("repaired: \(line)") }
        if report.isConsistent {
            print("store \(store) is consistent: \(report.summary)")
            return
        }
        for problem in report.remaining where repair { print("not repaired: \(problem)") }
        let advice = repair ? "" : " (run `docfs check --repair \(store)`; mounting it also cleans leftovers)"
        throw UserFacingError("docfs: store \(store) has \(report.remaining.count) problem(s)\(advice)")
    }
}

/// `docfs check --json`.
struct CheckJSON: Encodable {
    struct Problem: Encodable {
        var kind: String
        var message: String
    }
    struct Counts: Encodable {
        var folders: Int
        var files: Int
        var symlinks: Int
        var contentFiles: Int
        var contentBytes: Int64
    }
    var store: String
    var repair: Bool
    var consistent: Bool
    var problems: [Problem]
    var repairs: [String]
    var remaining: [Problem]
    var counts: Counts

    init(store: String, repair: Bool, report: StoreCheckReport) {
        self.store = store
        self.repair = repair
        consistent = report.isConsistent
        problems = report.problems.map { Problem(kind: $0.kind.rawValue, message: $0.message) }
        repairs = report.repairs
        remaining = report.remaining.map { Problem(kind: $0.kind.rawValue, message: $0.message) }
        counts = Counts(
            folders: report.folders, files: report.files, symlinks: report.symlinks,
            contentFiles: report.contentFiles, contentBytes: report.contentBytes)
    }
}
