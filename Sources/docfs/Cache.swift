import ArgumentParser
import Foundation
import CFuse
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
                rc = lremovexattr(path, CacheCommand.pinnedAttribute) == 0 || errno == ENODATA ? 0 : -1
            } else {
                let value = Array("yes".utf8)
                rc = lsetxattr(path, CacheCommand.pinnedAttribute, value, value.count, 0)
            }
            if rc != 0 {
                throw UserFacingError("docfs: cannot \(remove ? "unpin" : "pin") \(path): \(CacheCommand.explain(errno))")
            }
        }
    }
}

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
            if lsetxattr(path, CacheCommand.evictAttribute, value, value.count, 0) != 0 {
                throw UserFacingError("docfs: cannot evict \(path): \(CacheCommand.explain(errno))")
            }
        }
    }
}

enum CacheCommand {
    static let pinnedAttribute = "user.docfs.pinned"
    static let evictAttribute = "user.docfs.evict"

    static func requireMounted(_ path: String) throws {
        guard Info.attribute(path, "user.docfs.identifier") != nil else {
            if access(path, F_OK) != 0 { throw UserFacingError("docfs: \(path): \(String(cString: strerror(errno)))") }
            throw UserFacingError("docfs: \(path) is not inside a docfs mount")
        }
    }

    static func explain(_ err: Int32) -> String {
        switch err {
        case EOPNOTSUPP: return "the mount is not of a replica (its store has no server)"
        case EBUSY: return "its contents are not on the server yet, or it is open (see the mount's log)"
        case EIO: return "the server could not be reached (see the mount's log)"
        default: return String(cString: strerror(err))
        }
    }

    /// "64M", "10G", "512K", "1T" (powers of 1024) or a number of bytes.
    static func parseSize(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text.uppercased()
        if digits.hasSuffix("IB") { digits.removeLast(2) } else if digits.hasSuffix("B") { digits.removeLast() }
        var factor: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            factor = unit
            digits.removeLast()
        }
        guard let number = Double(digits), number >= 0, number.isFinite else { return nil }
        let bytes = number * Double(factor)
        guard bytes < 9e18 else { return nil }
        return Int64(bytes)
    }
}
