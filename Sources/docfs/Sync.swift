import ArgumentParser
import Foundation
import DocFS
import Glibc

/// `docfs sync --retry PATH...`: a replica's items whose changes the server refused wait set
/// aside (`docfs status` counts them, `user.docfs.sync` says why); this tries them again, through
/// the mount (`user.docfs.sync` set to "retry"), once whatever made the server refuse is mended.
struct Sync: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Try again the changes of items a replica's server refused (set aside).",
        discussion: """
            A change the server refuses for a reason a retry will not mend (a rule or trigger of \
            its own) sets its item aside: its changes wait, in order, while the others go on. A \
            later change of the item tries them again by itself; --retry does it now.
            """)
    @Flag(help: "Try the items' changes set aside again.") var retry = false
    @Argument(help: "Paths inside a docfs mount of a replica.") var paths: [String]

    func validate() throws {
        guard retry else { throw ValidationError("nothing to do: give --retry (docfs status shows what is pending)") }
    }

    func run() throws {
        for path in paths {
            try CacheCommand.requireMounted(path)
            let value = Array("retry".utf8)
            if ExtendedAttributeCalls.set(path, "user.docfs.sync", value) != 0 {
                throw UserFacingError("docfs: cannot retry \(path): \(CacheCommand.explain(errno))")
            }
        }
    }
}
