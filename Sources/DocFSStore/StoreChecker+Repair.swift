#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// The repairs of `docfs check --repair`.
extension StoreChecker {
    /// Mends `problems` in one transaction, then removes files: recreates a missing root or
    /// trash; removes file items without contents and links without targets; sets sizes from
    /// the content files; moves items whose folder is gone (or not a folder, or a cycle) to
    /// `/lost+found`; renames invalid and duplicate names; removes attributes of missing items;
    /// advances the identifier sequence. After the rows are committed: removes orphan content
    /// files, staged leftovers and the contents of removed rows. Returns one line per repair.
    /// Throws `.corruptFile` for a database SQLite finds damaged (not mended here) and `.ioError`
    /// when the transaction fails.
    static func mend(_ queue: DatabaseQueue, path: String, _ problems: [StoreCheckReport.Problem]) throws(ProviderError) -> [String] {
        if let fatal = problems.first(where: { $0.kind == .database }) {
            throw ProviderError(.corruptFile, "cannot repair: \(fatal.message)")
        }
        var snapshot = try load(queue, path: path)
        var records = snapshot.records
        var done: [String] = []
        var saving: [Int64: Record] = [:]
        var deleting = Set<Int64>()
        var filesToRemove: [String] = []
        let now = Date()
        var nextRow = max(snapshot.sequence, records.keys.max() ?? LocalStore.trashRow) + 1

        // Root and trash.
        for (row, name) in [(LocalStore.rootRow, "/"), (LocalStore.trashRow, LocalStore.trashName)]
        where records[row]?.item.isFolder != true || records[row]?.parent != nil {
            let caps = Capabilities.all.subtracting([.allowsRenaming, .allowsReparenting, .allowsDeleting, .allowsTrashing])
            var record = Record(
                row: row, parent: nil,
                item: Item(
                    identifier: LocalStore.identifier(forRow: row), parentIdentifier: .rootContainer, filename: name, kind: .folder,
                    contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now, capabilities: caps))
            if let old = records[row], old.item.kind == .file {
                filesToRemove.append(path + "/" + LocalStore.contentsName + "/" + String(row))
            }
            record.item.posixPermissions = 0o755
            records[row] = record
            saving[row] = record
            done.append("recreated the \(row == LocalStore.rootRow ? "root" : "trash") folder (item \(row))")
        }

        // Segments are cut at their first unreadable entry first, so that what they hold is read.
        if problems.contains(where: { $0.kind == .segment }) { done += try cutSegments(path: path) }
        let segmentLengths = try segmentEntries(path: path).lengths

        // Dangling rows: file items without contents, links without targets.
        let contentsPath = path + "/" + LocalStore.contentsName
        for row in records.keys.sorted() where row > LocalStore.trashRow {
            let record = records[row]!
            if record.linkOf != nil { continue } // a name: its item has the contents
            switch record.item.kind {
            case .file where !record.item.isDownloaded:
                break // a replica's file on the server only: no content file to check
            case .file:
                let status = try? fileStatus(contentsPath + "/" + String(row)).get()
                if status?.kind != .file, let length = segmentLengths[row] {
                    // A small file kept in a segment: its size follows the entry's.
                    if Int64(length) != record.item.documentSize {
                        var fixed = record
                        fixed.item.documentSize = Int64(length)
                        fixed.item.itemVersion.contentVersion += 1
                        fixed.item.itemVersion.metadataVersion += 1
                        records[row] = fixed
                        saving[row] = fixed
                        done.append(
                            "set the size of item \(row) '\(record.item.filename)' to its segment entry's \(length) bytes (was \(record.item.documentSize))"
                        )
                    }
                } else if status?.kind != .file {
                    records[row] = nil
                    deleting.insert(row)
                    done.append("removed item \(row) '\(record.item.filename)': its contents are gone")
                } else if let size = status?.size, size != record.item.documentSize {
                    var fixed = record
                    fixed.item.documentSize = size
                    fixed.item.itemVersion.contentVersion += 1
                    fixed.item.itemVersion.metadataVersion += 1
                    records[row] = fixed
                    saving[row] = fixed
                    done.append(
                        "set the size of item \(row) '\(record.item.filename)' to its content file's \(size) bytes (was \(record.item.documentSize))")
                }
            case .symlink where (record.item.symlinkTargetPath ?? "").isEmpty:
                records[row] = nil
                deleting.insert(row)
                done.append("removed item \(row) '\(record.item.filename)': a symbolic link without a target")
            default: break
            }
        }

        // Hard links: names of no item go, every item counts its names.
        done += mendLinks(&records, saving: &saving, deleting: &deleting)

        // Items not below the root or the trash go to /lost+found.
        var lostRow: Int64?
        func lostAndFoundRow() -> Int64 {
            if let lostRow { return lostRow }
            if let existing = records.values.first(where: {
                $0.parent == LocalStore.rootRow && $0.item.isFolder && $0.item.filename == lostAndFound
            }) {
                lostRow = existing.row
                return existing.row
            }
            var name = lostAndFound
            var counter = 2
            while records.values.contains(where: { $0.parent == LocalStore.rootRow && NameKey($0.item.filename) == NameKey(name) }) {
                name = "\(lostAndFound) \(counter)"
                counter += 1
            }
            let row = nextRow
            nextRow += 1
            var record = Record(
                row: row, parent: LocalStore.rootRow,
                item: Item(
                    identifier: LocalStore.identifier(forRow: row), parentIdentifier: .rootContainer, filename: name, kind: .folder,
                    contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now, capabilities: .all))
            record.item.posixPermissions = 0o755
            records[row] = record
            saving[row] = record
            lostRow = row
            done.append("created /\(name) (item \(row)) for items whose folder is gone")
            return row
        }
        for row in records.keys.sorted() where row > LocalStore.trashRow {
            guard let record = records[row] else { continue }
            let parentOK = record.parent.flatMap { records[$0] }?.item.isFolder == true
            if parentOK && reachesTop(row, records) { continue }
            let target = lostAndFoundRow()
            var moved = record
            moved.parent = target
            moved.item.parentIdentifier = LocalStore.identifier(forRow: target)
            moved.item.itemVersion.metadataVersion += 1
            records[row] = moved
            saving[row] = moved
            done.append(
                "moved item \(row) '\(record.item.filename)' (its folder \(record.parent.map(String.init) ?? "none") is gone or not a folder) to /\(records[target]!.item.filename)"
            )
        }

        // Names: invalid ones and duplicates get a fresh name in their folder.
        var used: [Int64: Set<NameKey>] = [:]
        for row in records.keys.sorted() where row > LocalStore.trashRow {
            guard var record = records[row], let parent = record.parent else { continue }
            var valid = true
            do throws(ProviderError) { try ItemNames.validate(record.item.filename) } catch { valid = false }
            var name = valid ? record.item.filename : "item-\(row)"
            if used[parent, default: []].contains(NameKey(name)) {
                let base = valid ? String(name.utf8.prefix(200)) ?? "item-\(row)" : name
                var counter = 2
                repeat { name = "\(base) \(counter)"; counter += 1 } while used[parent, default: []].contains(NameKey(name))
            }
            used[parent, default: []].insert(NameKey(name))
            if name.utf8.elementsEqual(record.item.filename.utf8) { continue }
            done.append(
                "renamed item \(row) '\(record.item.filename)' to '\(name)' (\(valid ? "its name was taken in its folder" : "its name was not valid"))"
            )
            record.item.filename = name
            record.item.itemVersion.metadataVersion += 1
            records[row] = record
            saving[row] = record
        }

        let danglingAttributes = snapshot.attributeOwners.filter { records[$0] == nil && !deleting.contains($0) }
        do {
            try queue.inDatabase { db in
                try db.inTransaction {
                    for row in deleting.sorted() { try Schema.delete(db, row) }
                    for owner in danglingAttributes.sorted() {
                        try db.execute(sql: "DELETE FROM xattr WHERE item = ?", arguments: [owner])
                    }
                    // Renames may swap names between siblings: park them first so the unique index holds.
                    for record in saving.values where record.row > LocalStore.trashRow {
                        try db.execute(sql: "UPDATE item SET name = ? WHERE id = ?", arguments: ["\u{1}docfs-check-\(record.row)", record.row])
                    }
                    for row in saving.keys.sorted() { try Schema.upsert(db, saving[row]!) }
                    let largest = records.keys.max() ?? LocalStore.trashRow
                    let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
                    if sequence < largest {
                        try db.execute(sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'item'", arguments: [largest])
                        if db.changesCount == 0 {
                            try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('item', ?)", arguments: [largest])
                        }
                    }
                    return .commit
                }
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw ProviderError(.ioError, "store \(path): could not save the repairs: \(error)")
        }
        if !danglingAttributes.isEmpty {
            done.append("removed the extended attributes of \(danglingAttributes.count) item(s) that do not exist")
        }
        if snapshot.sequence < (records.keys.max() ?? 0) && (records.keys.max() ?? 0) > LocalStore.trashRow {
            done.append("advanced the identifier sequence to \(records.keys.max()!)")
        }
        snapshot.records = records

        // Files, after the rows are committed: orphan content files, staged leftovers, and the
        // contents of the rows just removed.
        for row in deleting { filesToRemove.append(contentsPath + "/" + String(row)) }
        let fileRows = Set(records.values.filter { $0.item.kind == .file && $0.linkOf == nil }.map(\.row))
        for name in (try? directoryEntries(contentsPath)) ?? [] {
            if let row = Int64(name), String(row) == name, fileRows.contains(row) { continue }
            let filePath = contentsPath + "/" + name
            if !filesToRemove.contains(filePath) { filesToRemove.append(filePath) }
            done.append("removed contents/\(name), which belonged to no file item")
        }
        let stagingPath = path + "/" + LocalStore.stagingName
        for name in (try? directoryEntries(stagingPath)) ?? [] where holdsData(stagingPath + "/" + name) {
            filesToRemove.append(stagingPath + "/" + name)
            done.append("removed staging/\(name)")
        }
        for file in filesToRemove { removeTree(file) }
        try? sysFsync(path: contentsPath, directory: true)
        try? sysFsync(path: stagingPath, directory: true)
        return done
    }

    /// True when walking up from `row` reaches the root or the trash (over the loaded records).
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
