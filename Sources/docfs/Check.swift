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

    func run() throws {
        let report: StoreCheckReport
        do {
            report = try StoreChecker.check(at: URL(fileURLWithPath: store), repair: repair)
        } catch {
            throw UserFacingError("docfs: cannot check store \(store): \(error.reason.isEmpty ? "\(error)" : error.reason)")
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
