import Foundation
import DocFSProvider

/// Names and operation ids of conflicted copies, chosen on the replica's side: the store is
/// handed `copyNamer` (`ReplicaStoreHooks.conflictCopyNames`, `WriterConflicts`) for a writer's conflicted copy.
package enum ConflictNames {
    /// "NAME (conflicted copy from HOST YYYY-MM-DD).EXT" (the extension stays last, so the copy
    /// keeps its type); cut to 255 bytes whole, extension included (`ItemNames.fitted`): a
    /// longer name is one the server refuses.
    package static func copy(of name: String, host: String, date: Date) -> String {
        let (base, ext) = ItemNames.split(name)
        let day = Calendar.current.dateComponents([.year, .month, .day], from: date)
        let stamp = String(format: "%04d-%02d-%02d", day.year ?? 1970, day.month ?? 1, day.day ?? 1)
        return ItemNames.fitted(base: base, marker: " (conflicted copy from \(host) \(stamp))", ext: ext)
    }

    /// Names a conflicted copy made here now, on this machine.
    package static let copyNamer: @Sendable (String) -> String = { name in
        copy(of: name, host: hostName, date: Date())
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
