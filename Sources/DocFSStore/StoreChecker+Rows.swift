import DocFSProvider
import GRDB

// The checks of the item rows: the root and the trash, every item's parent (exists, is a folder,
// leads to the top), names (valid, unique per folder), symbolic-link targets; and what refers to
// rows: stored attributes and the identifier sequence.
extension StoreChecker {
    /// Root and trash, then every item in (parent, name) order, streamed from SQLite: counts the
    /// kinds and notes `missingRoot`, `missingParent`, `parentNotFolder`, `unreachable`,
    /// `invalidName`, `duplicateName` and `danglingLink`.
    static func checkRows(_ queue: DatabaseQueue, _ index: Index, path: String, into report: inout StoreCheckReport) throws(ProviderError) {
        let items = index.items
        let folderKind = ItemKind.folder.rawValue
        for (row, name) in [(LocalStore.rootRow, "root"), (LocalStore.trashRow, "trash")] {
            if items[row]?.kind != folderKind || items[row]?.parent != -1 {
                report.found(.missingRoot, "the \(name) folder (item \(row)) is missing or damaged")
            }
        }
        // Rows whose way up reaches the root or the trash, learnt as the walks go.
        var reaching = Set<Int64>([LocalStore.rootRow, LocalStore.trashRow])
        func reachesTop(_ row: Int64) -> Bool {
            var path: [Int64] = []
            var cursor = row
            while !reaching.contains(cursor) {
                // No real tree is 4,096 deep (a path has at most 4,096 bytes): deeper is a cycle.
                guard let item = items[cursor], item.parent >= 0, path.count < 4096 else { return false }
                path.append(cursor)
                cursor = item.parent
            }
            reaching.formUnion(path)
            return true
        }
        // Duplicates are neighbours in (parent, name) order, and the walk holds one row at a time.
        var previous: (parent: Int64, name: String)?
        var found = report
        do {
            try queue.inDatabase { db in
                let rows = try Row.fetchCursor(db, sql: "SELECT id, parent, name, kind, symlinkTarget, linkOf FROM item ORDER BY parent, name")
                while let next = try rows.next() {
                    let row: Int64 = next[0]
                    let parentValue: Int64? = next[1]
                    let name: String = next[2]
                    let kind = UInt8(clamping: next[3] as Int)
                    if (next[5] as Int64?) != nil {
                        found.names += 1
                    } else {
                        switch ItemKind(rawValue: kind) ?? .file {
                        case .folder: found.folders += 1
                        case .file: found.files += 1
                        case .symlink: found.symlinks += 1
                        case .fifo, .socket, .characterDevice, .blockDevice: found.special += 1
                        }
                    }
                    if row == LocalStore.rootRow || row == LocalStore.trashRow { continue }
                    guard let parent = parentValue else {
                        found.found(.missingParent, "\(describe(row, name)) has no parent")
                        continue
                    }
                    guard let parentItem = items[parent] else {
                        found.found(.missingParent, "\(describe(row, name)): its parent (item \(parent)) does not exist")
                        continue
                    }
                    guard parentItem.kind == folderKind else {
                        found.found(.parentNotFolder, "\(describe(row, name)): its parent (item \(parent)) is not a folder")
                        continue
                    }
                    if !reachesTop(row) {
                        found.found(.unreachable, "\(describe(row, name)) is not below the root or the trash (its parents form a cycle)")
                        continue
                    }
                    do throws(ProviderError) { try ItemNames.validate(name) } catch {
                        found.found(.invalidName, "\(describe(row, name)): \(error.reason)")
                    }
                    if let previous, previous.parent == parent, previous.name.utf8.elementsEqual(name.utf8) {
                        found.found(.duplicateName, "\(describe(row, name)): another item in folder \(parent) has the same name")
                    }
                    previous = (parent, name)
                    if kind == ItemKind.symlink.rawValue, ((next[4] as String?) ?? "").isEmpty {
                        found.found(.danglingLink, "\(describe(row, name)) is a symbolic link without a target")
                    }
                }
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }
        report = found
    }

    /// `danglingAttribute` for attributes of items that do not exist, `sequence` when the
    /// identifier sequence is behind the largest identifier (a new item would reuse one).
    static func checkReferences(_ index: Index, into report: inout StoreCheckReport) {
        for owner in index.attributeOwners.sorted() where index.items[owner] == nil {
            report.found(.danglingAttribute, "extended attributes are stored for item \(owner), which does not exist")
        }
        let largest = index.items.keys.max() ?? 0
        if index.sequence < largest, largest > LocalStore.trashRow {
            report.found(.sequence, "the identifier sequence (\(index.sequence)) is behind the largest identifier (\(largest))")
        }
    }
}
