#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DocFSProvider

// The checks of the files beside the database: every file item has its content file with the
// recorded size, every content file belongs to a file item, nothing is left in staging/.
extension StoreChecker {
    /// Counts the content files and notes `sizeMismatch`, `orphanContents` and `missingContents`.
    /// A store without `contents/` has none; another failure to list it is thrown.
    static func checkContentFiles(_ records: [Int64: Record], path: String, into report: inout StoreCheckReport) throws(ProviderError) {
        func problem(_ kind: StoreCheckReport.Kind, _ message: String) { report.found(kind, message) }
        let contentsPath = path + "/" + LocalStore.contentsName
        var contentNames: [String] = []
        do { contentNames = try directoryEntries(contentsPath) } catch {
            if error.errno != ENOENT { throw error }
        }
        var present = Set<Int64>()
        for name in contentNames.sorted() {
            let filePath = contentsPath + "/" + name
            let status = try? fileStatus(filePath).get()
            if let row = Int64(name), String(row) == name, let record = records[row], record.item.kind == .file,
               status?.kind == .file {
                present.insert(row)
                report.contentFiles += 1
                report.contentBytes += status?.size ?? 0
                if let size = status?.size, size != record.item.documentSize {
                    problem(.sizeMismatch, "\(describe(record)) records \(record.item.documentSize) bytes; its content file has \(size)")
                }
            } else {
                problem(.orphanContents, "contents/\(name) belongs to no file item")
            }
        }
        for row in records.keys.sorted() where records[row]!.item.kind == .file && !present.contains(row) {
            problem(.missingContents, "\(describe(records[row]!)) has no content file (contents/\(row))")
        }
    }

    /// `stagedLeftover` for what an interrupted copy left in `staging/`.
    static func checkStaging(path: String, into report: inout StoreCheckReport) {
        let stagingPath = path + "/" + LocalStore.stagingName
        // Empty folders there are the bridge's reusable import slots, not leftovers.
        let staged = ((try? directoryEntries(stagingPath)) ?? []).filter { holdsData(stagingPath + "/" + $0) }
        for name in staged.sorted() {
            report.found(.stagedLeftover, "staging/\(name) was left by an interrupted copy")
        }
    }

    /// A non-empty file or a symbolic link, or a folder with one somewhere inside. Empty files
    /// and folders are the bridge's ready-made staging files and reusable import slots: no one's
    /// data (the next mount clears them anyway).
    static func holdsData(_ path: String) -> Bool {
        guard case .success(let status) = fileStatus(path) else { return false }
        if status.kind == .file { return status.size > 0 }
        guard status.kind == .directory else { return true }
        return ((try? directoryEntries(path)) ?? []).contains { holdsData(path + "/" + $0) }
    }
}
