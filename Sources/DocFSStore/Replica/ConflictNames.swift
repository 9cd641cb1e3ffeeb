import Foundation

/// Names and operation ids of conflicted copies.
package enum ConflictNames {
    /// "NAME (conflicted copy from HOST YYYY-MM-DD).EXT" (the extension stays last, so the copy
    /// keeps its type); trimmed to fit 255 bytes.
    package static func copy(of name: String, host: String, date: Date) -> String {
        var base = name
        var ext = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            base = String(name[..<dot])
            ext = String(name[dot...])
        }
        let day = Calendar.current.dateComponents([.year, .month, .day], from: date)
        let stamp = String(format: "%04d-%02d-%02d", day.year ?? 1970, day.month ?? 1, day.day ?? 1)
        let suffix = " (conflicted copy from \(host) \(stamp))" + ext
        while (base + suffix).utf8.count > 255, !base.isEmpty { base.removeLast() }
        return base + suffix
    }

    /// The conflicted copy's create gets an operation id of its own, derived from the content
    /// change's, so that resending the change after a crash creates the copy once.
    package static func copyOperation(_ id: UUID) -> UUID {
        var bytes = id.uuid
        bytes.0 ^= 0xC0
        bytes.1 ^= 0x97
        return UUID(uuid: bytes)
    }
}

extension ConflictNames {
    /// This machine's name, for conflicted copies.
    package static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "another replica" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()
}
