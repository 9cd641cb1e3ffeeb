import DocFSProvider

// The checks of the item rows: the root and the trash, every item's parent (exists, is a folder,
// leads to the top), names (valid, unique per folder), symbolic-link targets; and what refers to
// rows: stored attributes and the identifier sequence.
extension StoreChecker {
    /// Root and trash, then every item in row order: counts the kinds and notes `missingRoot`,
    /// `missingParent`, `parentNotFolder`, `unreachable`, `invalidName`, `duplicateName` and
    /// `danglingLink`.
    static func checkRows(_ records: [Int64: Record], into report: inout StoreCheckReport) {
        func problem(_ kind: StoreCheckReport.Kind, _ message: String) { report.found(kind, message) }
        for (row, name) in [(LocalStore.rootRow, "root"), (LocalStore.trashRow, "trash")] {
            if records[row]?.item.isFolder != true || records[row]?.parent != nil {
                problem(.missingRoot, "the \(name) folder (item \(row)) is missing or damaged")
            }
        }
        var names: [Int64: Set<NameKey>] = [:]
        for row in records.keys.sorted() {
            let record = records[row]!
            switch record.item.kind {
            case .folder: report.folders += 1
            case .file: report.files += 1
            case .symlink: report.symlinks += 1
            case .fifo, .socket: report.special += 1
            }
            if row == LocalStore.rootRow || row == LocalStore.trashRow { continue }
            guard let parent = record.parent else {
                problem(.missingParent, "\(describe(record)) has no parent")
                continue
            }
            guard let parentRecord = records[parent] else {
                problem(.missingParent, "\(describe(record)): its parent (item \(parent)) does not exist")
                continue
            }
            guard parentRecord.item.isFolder else {
                problem(.parentNotFolder, "\(describe(record)): its parent \(describe(parentRecord)) is not a folder")
                continue
            }
            if !reachesTop(row, records) {
                problem(.unreachable, "\(describe(record)) is not below the root or the trash (its parents form a cycle)")
                continue
            }
            do throws(ProviderError) { try ItemNames.validate(record.item.filename) } catch {
                problem(.invalidName, "\(describe(record)): \(error.reason)")
            }
            if !names[parent, default: []].insert(NameKey(record.item.filename)).inserted {
                problem(.duplicateName, "\(describe(record)): another item in folder \(parent) has the same name")
            }
            if record.item.kind == .symlink, (record.item.symlinkTargetPath ?? "").isEmpty {
                problem(.danglingLink, "\(describe(record)) is a symbolic link without a target")
            }
        }
    }

    /// `danglingAttribute` for attributes of items that do not exist, `sequence` when the
    /// identifier sequence is behind the largest identifier (a new item would reuse one).
    static func checkReferences(_ snapshot: Snapshot, into report: inout StoreCheckReport) {
        let records = snapshot.records
        for owner in snapshot.attributeOwners.sorted() where records[owner] == nil {
            report.found(.danglingAttribute, "extended attributes are stored for item \(owner), which does not exist")
        }
        let largest = records.keys.max() ?? 0
        if snapshot.sequence < largest, largest > LocalStore.trashRow {
            report.found(.sequence, "the identifier sequence (\(snapshot.sequence)) is behind the largest identifier (\(largest))")
        }
    }

    /// True when walking up from `row` reaches the root or the trash.
    static func reachesTop(_ row: Int64, _ records: [Int64: Record]) -> Bool {
        var cursor: Int64? = row
        var seen = Set<Int64>()
        while let current = cursor {
            if current == LocalStore.rootRow || current == LocalStore.trashRow { return true }
            guard seen.insert(current).inserted, let record = records[current] else { return false }
            cursor = record.parent
        }
        return false
    }
}
