#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import DocFSProvider
import GRDB

// The checks of `segments/` (small files' bytes, `ContentSegments`): every entry up to the end
// of each segment is readable, and a file item without a content file has its bytes there.
extension StoreChecker {
    /// The newest readable entry of each row in `segments/`, and the unreadable tails.
    static func segmentEntries(path: String) throws(ProviderError) -> (lengths: [Int64: Int], damages: [ContentSegments.Damage]) {
        let (entries, damages) = try ContentSegments.verify(directory: path + "/" + LocalStore.segmentsName)
        var newest: [Int64: ContentSegments.Location] = [:]
        for (row, location) in entries where (newest[row]?.sequence ?? 0) <= location.sequence { newest[row] = location }
        return (newest.mapValues(\.length), damages)
    }

    /// Notes `segment` for each unreadable tail, and marks the file items without a content file
    /// whose bytes a segment holds (`sizeMismatch` when their lengths differ).
    static func checkSegments(
        _ queue: DatabaseQueue, _ index: inout Index, path: String,
        into report: inout StoreCheckReport
    ) throws(ProviderError) {
        let (lengths, damages) = try segmentEntries(path: path)
        for damage in damages {
            report.found(
                .segment, "segments/\(damage.segment) is unreadable after offset \(damage.offset) (\(damage.reason)); \(damage.size) byte(s) there")
        }
        let fileKind = ItemKind.file.rawValue
        var found = report
        do {
            try queue.inDatabase { db in
                let statement = try db.cachedStatement(sql: "SELECT name, size FROM item WHERE id = ?")
                for (row, length) in lengths.sorted(by: { $0.key < $1.key }) {
                    guard let slim = index.items[row], slim.kind == fileKind, !slim.hasContents, !slim.absent,
                        let stored = try Row.fetchOne(statement, arguments: [row])
                    else { continue }
                    index.items[row]!.hasContents = true
                    found.segmentFiles += 1
                    found.contentBytes += Int64(length)
                    let recorded: Int64 = stored[1]
                    if recorded != Int64(length) {
                        found.found(.sizeMismatch, "\(describe(row, stored[0])) records \(recorded) bytes; its segment entry has \(length)")
                    }
                }
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(error)")
        }
        report = found
    }

    /// Cuts each segment at its first unreadable entry, as the next mount would; one line each.
    static func cutSegments(path: String) throws(ProviderError) -> [String] {
        let directory = path + "/" + LocalStore.segmentsName
        var done: [String] = []
        for damage in try ContentSegments.verify(directory: directory).damages {
            if truncate(directory + "/" + String(damage.segment), off_t(damage.offset)) != 0 {
                throw .posix(errno, "cut segments/\(damage.segment)")
            }
            done.append("cut segments/\(damage.segment) at offset \(damage.offset) (\(damage.size) unreadable byte(s) removed)")
        }
        return done
    }
}
