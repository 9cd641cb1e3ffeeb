#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import DocFSProvider
import GRDB

// The checks of the files beside the database: every file item has its content file with the
// recorded size, every content file belongs to a file item, nothing is left in staging/.
extension StoreChecker {
    /// Counts the content files and notes `sizeMismatch`, `orphanContents` and `missingContents`:
    /// the directory is read as it goes and sizes are looked up in batches, so memory stays
    /// bounded. A store without `contents/` has none; another failure to list it is thrown.
    static func checkContentFiles(
        _ queue: DatabaseQueue, _ index: inout Index, path: String,
        into report: inout StoreCheckReport
    ) throws(ProviderError) {
        let fileKind = ItemKind.file.rawValue
        let contentsPath = path + "/" + LocalStore.contentsName
        var orphanNames: [String] = []
        var sizeChecks: [(row: Int64, size: Int64)] = []
        func checkSizes(_ checks: inout [(row: Int64, size: Int64)]) throws(ProviderError) {
            guard !checks.isEmpty else { return }
            let batch = checks
            checks.removeAll(keepingCapacity: true)
            var found = report
            do {
                try queue.inDatabase { db in
                    let statement = try db.cachedStatement(sql: "SELECT name, size FROM item WHERE id = ?")
                    for (row, size) in batch {
                        guard let stored = try Row.fetchOne(statement, arguments: [row]) else { continue }
                        let recorded: Int64 = stored[1]
                        if recorded != size {
                            found.found(.sizeMismatch, "\(describe(row, stored[0])) records \(recorded) bytes; its content file has \(size)")
                        }
                    }
                }
            } catch {
                throw ProviderError(.corruptFile, "store \(path): \(error)")
            }
            report = found
        }
        if let dir = opendir(contentsPath) {
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                if name == "." || name == ".." { continue }
                let status = try? fileStatus(contentsPath + "/" + name).get()
                if let row = Int64(name), String(row) == name, index.items[row]?.kind == fileKind, status?.kind == .file {
                    index.items[row]!.hasContents = true
                    // An evicted file's old copy (a crash between eviction and removal): the next download replaces it.
                    if index.items[row]!.absent { continue }
                    report.contentFiles += 1
                    report.contentBytes += status?.size ?? 0
                    sizeChecks.append((row, status?.size ?? 0))
                    if sizeChecks.count >= 10_000 { try checkSizes(&sizeChecks) }
                } else {
                    orphanNames.append(name)
                }
            }
        } else if errno != ENOENT {
            throw ProviderError.posix(errno, "read \(contentsPath)")
        }
        try checkSizes(&sizeChecks)
        try checkSegments(queue, &index, path: path, into: &report)
        for name in orphanNames.sorted() {
            report.found(.orphanContents, "contents/\(name) belongs to no file item")
        }
        let missing = index.items.filter { $0.value.kind == fileKind && !$0.value.hasContents && !$0.value.absent }.keys.sorted()
        guard !missing.isEmpty else { return }
        var found = report
        do {
            try queue.inDatabase { db in
                for row in missing {
                    let name = try String.fetchOne(db, sql: "SELECT name FROM item WHERE id = ?", arguments: [row]) ?? "?"
                    found.found(.missingContents, "\(describe(row, name)) has no content file (contents/\(row))")
                }
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(error)")
        }
        report = found
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
