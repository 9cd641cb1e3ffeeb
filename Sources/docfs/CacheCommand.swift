import ArgumentParser
import Foundation
import DocFS
import Glibc

/// What `docfs pin`, `evict` and `sync` share: the attribute names, the mount check, errno in words.
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
