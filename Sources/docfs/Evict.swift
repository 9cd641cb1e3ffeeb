import ArgumentParser
import Foundation
import DocFS
import Glibc

/// `docfs evict PATH...`: drops a replica's downloaded contents the server has, through the
/// mount (`user.docfs.evict`).
struct Evict: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drop the downloaded contents of files a replica's server has; they download again when opened.",
        discussion: """
            A folder evicts every file below it that can be; files whose contents are not on the \
            server yet, or are open, stay (the mount's log names them). `ls -l` still shows their \
            sizes; `du` shows what is here.
            """)
    @Argument(help: "Paths inside a docfs mount of a replica.") var paths: [String]

    func run() throws {
        for path in paths {
            try CacheCommand.requireMounted(path)
            let value = Array("now".utf8)
            if ExtendedAttributeCalls.set(path, CacheCommand.evictAttribute, value) != 0 {
                throw UserFacingError("docfs: cannot evict \(path): \(CacheCommand.explain(errno))")
            }
        }
    }
}
