import ArgumentParser
import Foundation
import DocFS
import Glibc

/// `docfs pin PATH...` and `docfs evict PATH...`: a replica's contents on demand, through the
/// mount (the `user.docfs.pinned` and `user.docfs.evict` attributes), so the mount's permission
/// checks and its log apply.
struct Pin: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep files, or everything below folders, downloaded in a replica's mount.",
        discussion: """
            Downloads what is not here yet before it returns; pinned files are never evicted \
            (not even over --cache-size). --remove lets them be evicted again.
            """)
    @Argument(help: "Paths inside a docfs mount of a replica.") var paths: [String]
    @Flag(help: "Unpin instead.") var remove = false

    func run() throws {
        for path in paths {
            try CacheCommand.requireMounted(path)
            let rc: Int32
            if remove {
                rc = ExtendedAttributeCalls.remove(path, CacheCommand.pinnedAttribute) == 0 || errno == ENODATA ? 0 : -1
            } else {
                let value = Array("yes".utf8)
                rc = ExtendedAttributeCalls.set(path, CacheCommand.pinnedAttribute, value)
            }
            if rc != 0 {
                throw UserFacingError("docfs: cannot \(remove ? "unpin" : "pin") \(path): \(CacheCommand.explain(errno))")
            }
        }
    }
}
