#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

/// What `docfs check STORE [--repair]` found in a store that is not mounted, and what it mended.
public struct StoreCheckReport: Sendable {
    public enum Kind: String, Sendable {
        case database           // SQLite's own integrity check failed (not repairable here)
        case missingRoot        // the root or trash row is missing or not a folder
        case missingParent      // an item's parent row does not exist
        case parentNotFolder    // an item's parent is a file or a symbolic link
        case unreachable        // an item is not below the root or the trash (a cycle)
        case invalidName        // empty, `.`/`..`, `/` or NUL inside, longer than 255 bytes
        case duplicateName      // two items with the same name in one folder
        case missingContents    // a file item without its content file
        case sizeMismatch       // a file item whose size is not its content file's
        case orphanContents     // a content file that belongs to no file item
        case stagedLeftover     // a file left in staging/ by an interrupted copy
        case danglingAttribute  // a stored extended attribute of an item that does not exist
        case danglingLink       // a symbolic link item without a target
        case sequence           // the identifier sequence is behind the largest identifier
        case journal            // the journal holds changes that cannot be applied (set aside by a repair)
    }

    public struct Problem: Sendable, CustomStringConvertible {
        public var kind: Kind
        public var message: String
        public var description: String { "\(kind.rawValue): \(message)" }
    }

    /// Problems found (before any repair).
    public var problems: [Problem] = []
    /// What `--repair` did, one line each.
    public var repairs: [String] = []
    /// Problems still there at the end (after a repair: what could not be mended).
    public var remaining: [Problem] = []

    public var folders = 0
    public var files = 0
    public var symlinks = 0
    /// FIFOs and sockets.
    public var special = 0
    public var contentFiles = 0
    public var contentBytes: Int64 = 0

    /// The store is consistent now (nothing was wrong, or everything was mended).
    public var isConsistent: Bool { remaining.isEmpty }

    public var summary: String {
        "\(folders + files + symlinks) items (\(folders) folders with root and trash, \(files) files, \(symlinks) symbolic links), "
            + "\(contentFiles) content files, \(contentBytes) bytes"
    }
}

/// Verifies (and with `repair`, mends) a store that no mount has open: every item's parent
/// exists and is a folder and leads to the root or the trash, names are valid and unique per
/// folder, every file item has its content file with the recorded size, every content file
/// belongs to a file item, nothing is left in staging/, no attribute or sequence is dangling.
///
/// Repairs: items whose parent is missing (or not a folder, or a cycle) move to `/lost+found`;
/// bad or duplicate names get `item-<id>` or a numbered name; sizes follow the content files;
/// file items without contents, links without targets and attributes of missing items are
/// removed; orphan content files and staged leftovers are deleted. All row changes are one
/// transaction, committed before any file is deleted.
public enum StoreChecker {
    static let lostAndFound = "lost+found"

    public static func check(at url: URL, repair: Bool) throws(ProviderError) -> StoreCheckReport {
        let path = url.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ProviderError(.noSuchItem, "store \(path) does not exist")
        }
        guard isDirectory.boolValue else { throw ProviderError(.notDirectory, "store \(path) is not a directory") }
        let databasePath = path + "/" + LocalStore.databaseName
        guard FileManager.default.fileExists(atPath: databasePath) else {
            throw ProviderError(.invalidArgument, "\(path) is not a docfs store (no \(LocalStore.databaseName))")
        }

        // The store's lock: a mounted store is never checked (its state is in the daemon's memory).
        let lockPath = path + "/" + LocalStore.lockName
        let lockFD = sysOpen(lockPath, O_RDWR | O_CLOEXEC)
        if lockFD < 0 && errno != ENOENT { throw ProviderError.posix(errno, "store \(path): cannot open \(LocalStore.lockName)") }
        defer { if lockFD >= 0 { sysClose(lockFD) } }
        if lockFD >= 0, flock(lockFD, LOCK_EX | LOCK_NB) != 0 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = pread(lockFD, &buffer, buffer.count, 0)
            let holder = count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) : "unknown"
            throw ProviderError(.busy, "store \(path) is mounted (docfs pid \(holder)); unmount it before checking it")
        }

        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: databasePath, configuration: Configuration())
        } catch {
            throw ProviderError(.corruptFile, "store \(path): cannot open \(LocalStore.databaseName): \(error)")
        }
        defer { try? queue.close() }

        // Changes a crashed mount left in its journal were accepted: apply them first, as the next
        // mount would. Only changes that cannot be applied are a problem.
        var journalProblem: StoreCheckReport.Problem?
        var journalRepair: String?
        if FileManager.default.fileExists(atPath: path + "/" + StoreJournal.fileName) {
            do throws(ProviderError) {
                _ = try StoreJournal.recover(storePath: path, database: queue)
            } catch {
                journalProblem = .init(kind: .journal, message: error.reason)
                if repair, let aside = StoreJournal.setAside(storePath: path) {
                    journalRepair = "set the journal aside as \(aside); its changes are not applied"
                }
            }
        }

        do { try LocalStore.migrateIfNeeded(queue, path: path, logger: nil) } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(error)")
        }
        var report = try examine(queue, path: path)
        if let journalProblem {
            report.problems.insert(journalProblem, at: 0)
            if journalRepair == nil { report.remaining.insert(journalProblem, at: 0) }
        }
        if let journalRepair { report.repairs.append(journalRepair) }
        guard repair, !report.remaining.isEmpty else { return report }
        let found = report.problems
        let repairs = report.repairs + (try mend(queue, path: path, report.remaining))
        var after = try examine(queue, path: path)
        after.problems = found
        after.repairs = repairs
        return after
    }

    // MARK: Looking

    private struct Snapshot {
        var records: [Int64: Record] = [:]
        var attributeOwners: Set<Int64> = []
        var sequence: Int64 = 0
    }

    private static func load(_ queue: DatabaseQueue, path: String) throws(ProviderError) -> Snapshot {
        do {
            return try queue.inDatabase { db -> Snapshot in
                let integrity = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard integrity == ["ok"] else {
                    throw ProviderError(.corruptFile, "store \(path): SQLite integrity check failed: \(integrity.prefix(5).joined(separator: "; "))")
                }
                guard try db.tableExists("meta"), try db.tableExists("item") else {
                    throw ProviderError(.corruptFile, "\(path) is not a docfs store: \(LocalStore.databaseName) has no docfs tables")
                }
                let format = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'format'")
                guard format == LocalStore.formatVersion else {
                    throw ProviderError(.corruptFile, "store \(path) has format \(format ?? "none"); this docfs reads format \(LocalStore.formatVersion)")
                }
                var snapshot = Snapshot()
                let rows = try Row.fetchCursor(db, sql: "SELECT \(Schema.columns) FROM item")
                while let row = try rows.next() {
                    let record = Schema.record(from: row)
                    snapshot.records[record.row] = record
                }
                if try db.tableExists("xattr") {
                    snapshot.attributeOwners = Set(try Int64.fetchAll(db, sql: "SELECT DISTINCT item FROM xattr"))
                }
                snapshot.sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
                return snapshot
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }
    }

    /// What examining keeps of each item: its parent and kind (about 40 bytes an item, where a
    /// whole record is about a kilobyte), so a store of millions of items is checked in tens of
    /// megabytes. Names, sizes and link targets are checked in streamed passes over SQLite.
    private struct Slim {
        var parent: Int64
        var kind: UInt8
        var hasContents = false
    }

    private static func examine(_ queue: DatabaseQueue, path: String) throws(ProviderError) -> StoreCheckReport {
        var report = StoreCheckReport()
        func problem(_ kind: StoreCheckReport.Kind, _ message: String) {
            report.problems.append(.init(kind: kind, message: message))
        }
        func describe(_ row: Int64, _ name: String) -> String { "item \(row) '\(name)'" }
        let folderKind = ItemKind.folder.rawValue
        let fileKind = ItemKind.file.rawValue
        var items: [Int64: Slim] = [:]
        var sequence: Int64 = 0
        var attributeOwners: [Int64] = []
        let contentsPath = path + "/" + LocalStore.contentsName
        do {
            try queue.inDatabase { db in
                let integrity = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard integrity == ["ok"] else {
                    throw ProviderError(.corruptFile, "store \(path): SQLite integrity check failed: \(integrity.prefix(5).joined(separator: "; "))")
                }
                guard try db.tableExists("meta"), try db.tableExists("item") else {
                    throw ProviderError(.corruptFile, "\(path) is not a docfs store: \(LocalStore.databaseName) has no docfs tables")
                }
                let format = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'format'")
                guard format == LocalStore.formatVersion else {
                    throw ProviderError(.corruptFile, "store \(path) has format \(format ?? "none"); this docfs reads format \(LocalStore.formatVersion)")
                }
                let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? 0
                items.reserveCapacity(count)
                let rows = try Row.fetchCursor(db, sql: "SELECT id, parent, kind FROM item")
                while let row = try rows.next() {
                    let parent: Int64? = row[1]
                    items[row[0]] = Slim(parent: parent ?? -1, kind: UInt8(clamping: row[2] as Int))
                }
                if try db.tableExists("xattr") {
                    attributeOwners = try Int64.fetchAll(db, sql: "SELECT DISTINCT item FROM xattr")
                }
                sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }

        for (row, name) in [(LocalStore.rootRow, "root"), (LocalStore.trashRow, "trash")] {
            if items[row]?.kind != folderKind || items[row]?.parent != -1 {
                problem(.missingRoot, "the \(name) folder (item \(row)) is missing or damaged")
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
        // Items in (parent, name) order: duplicates are neighbours, and the walk holds one row at a time.
        var previous: (parent: Int64, name: String)?
        do {
            try queue.inDatabase { db in
                let rows = try Row.fetchCursor(db, sql: "SELECT id, parent, name, kind, symlinkTarget FROM item ORDER BY parent, name")
                while let found = try rows.next() {
                    let row: Int64 = found[0]
                    let parentValue: Int64? = found[1]
                    let name: String = found[2]
                    let kind = UInt8(clamping: found[3] as Int)
                    switch ItemKind(rawValue: kind) ?? .file {
                    case .folder: report.folders += 1
                    case .file: report.files += 1
                    case .symlink: report.symlinks += 1
                    case .fifo, .socket: report.special += 1
                    }
                    if row == LocalStore.rootRow || row == LocalStore.trashRow { continue }
                    guard let parent = parentValue else {
                        problem(.missingParent, "\(describe(row, name)) has no parent")
                        continue
                    }
                    guard let parentItem = items[parent] else {
                        problem(.missingParent, "\(describe(row, name)): its parent (item \(parent)) does not exist")
                        continue
                    }
                    guard parentItem.kind == folderKind else {
                        problem(.parentNotFolder, "\(describe(row, name)): its parent (item \(parent)) is not a folder")
                        continue
                    }
                    if !reachesTop(row) {
                        problem(.unreachable, "\(describe(row, name)) is not below the root or the trash (its parents form a cycle)")
                        continue
                    }
                    do throws(ProviderError) { try ItemNames.validate(name) } catch {
                        problem(.invalidName, "\(describe(row, name)): \(error.reason)")
                    }
                    if let previous, previous.parent == parent, previous.name.utf8.elementsEqual(name.utf8) {
                        problem(.duplicateName, "\(describe(row, name)): another item in folder \(parent) has the same name")
                    }
                    previous = (parent, name)
                    if kind == ItemKind.symlink.rawValue, ((found[4] as String?) ?? "").isEmpty {
                        problem(.danglingLink, "\(describe(row, name)) is a symbolic link without a target")
                    }
                }
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }

        // Content files against file items: the directory read as it goes, sizes looked up one by one.
        var orphanNames: [String] = []
        var sizeChecks: [(row: Int64, size: Int64)] = []
        func checkSizes(_ checks: inout [(row: Int64, size: Int64)]) throws(ProviderError) {
            guard !checks.isEmpty else { return }
            let batch = checks
            checks.removeAll(keepingCapacity: true)
            do {
                try queue.inDatabase { db in
                    let statement = try db.cachedStatement(sql: "SELECT name, size FROM item WHERE id = ?")
                    for (row, size) in batch {
                        guard let found = try Row.fetchOne(statement, arguments: [row]) else { continue }
                        let recorded: Int64 = found[1]
                        if recorded != size {
                            problem(.sizeMismatch, "\(describe(row, found[0])) records \(recorded) bytes; its content file has \(size)")
                        }
                    }
                }
            } catch {
                throw ProviderError(.corruptFile, "store \(path): \(error)")
            }
        }
        if let dir = opendir(contentsPath) {
            defer { closedir(dir) }
            while let entry = readdir(dir) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                if name == "." || name == ".." { continue }
                let status = try? fileStatus(contentsPath + "/" + name).get()
                if let row = Int64(name), String(row) == name, items[row]?.kind == fileKind, status?.kind == .file {
                    items[row]!.hasContents = true
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
        for name in orphanNames.sorted() {
            problem(.orphanContents, "contents/\(name) belongs to no file item")
        }
        let missing = items.filter { $0.value.kind == fileKind && !$0.value.hasContents }.keys.sorted()
        if !missing.isEmpty {
            do {
                try queue.inDatabase { db in
                    for row in missing {
                        let name = try String.fetchOne(db, sql: "SELECT name FROM item WHERE id = ?", arguments: [row]) ?? "?"
                        problem(.missingContents, "\(describe(row, name)) has no content file (contents/\(row))")
                    }
                }
            } catch {
                throw ProviderError(.corruptFile, "store \(path): \(error)")
            }
        }

        let stagingPath = path + "/" + LocalStore.stagingName
        // Empty folders there are the bridge's reusable import slots, not leftovers.
        let staged = ((try? directoryEntries(stagingPath)) ?? []).filter { holdsData(stagingPath + "/" + $0) }
        for name in staged.sorted() {
            problem(.stagedLeftover, "staging/\(name) was left by an interrupted copy")
        }
        for owner in attributeOwners.sorted() where items[owner] == nil {
            problem(.danglingAttribute, "extended attributes are stored for item \(owner), which does not exist")
        }
        let largest = items.keys.max() ?? 0
        if sequence < largest, largest > LocalStore.trashRow {
            problem(.sequence, "the identifier sequence (\(sequence)) is behind the largest identifier (\(largest))")
        }
        report.remaining = report.problems
        return report
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

    /// True when walking up from `row` reaches the root or the trash.
    private static func reachesTop(_ row: Int64, _ records: [Int64: Record]) -> Bool {
        var cursor: Int64? = row
        var seen = Set<Int64>()
        while let current = cursor {
            if current == LocalStore.rootRow || current == LocalStore.trashRow { return true }
            guard seen.insert(current).inserted, let record = records[current] else { return false }
            cursor = record.parent
        }
        return false
    }

    // MARK: Mending

    private static func mend(_ queue: DatabaseQueue, path: String, _ problems: [StoreCheckReport.Problem]) throws(ProviderError) -> [String] {
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
            var record = Record(row: row, parent: nil, item: Item(
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

        // Dangling rows: file items without contents, links without targets.
        let contentsPath = path + "/" + LocalStore.contentsName
        for row in records.keys.sorted() where row > LocalStore.trashRow {
            let record = records[row]!
            switch record.item.kind {
            case .file:
                let status = try? fileStatus(contentsPath + "/" + String(row)).get()
                if status?.kind != .file {
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
                    done.append("set the size of item \(row) '\(record.item.filename)' to its content file's \(size) bytes (was \(record.item.documentSize))")
                }
            case .symlink where (record.item.symlinkTargetPath ?? "").isEmpty:
                records[row] = nil
                deleting.insert(row)
                done.append("removed item \(row) '\(record.item.filename)': a symbolic link without a target")
            default: break
            }
        }

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
            var record = Record(row: row, parent: LocalStore.rootRow, item: Item(
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
            done.append("moved item \(row) '\(record.item.filename)' (its folder \(record.parent.map(String.init) ?? "none") is gone or not a folder) to /\(records[target]!.item.filename)")
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
            done.append("renamed item \(row) '\(record.item.filename)' to '\(name)' (\(valid ? "its name was taken in its folder" : "its name was not valid"))")
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
        let fileRows = Set(records.values.filter { $0.item.kind == .file }.map(\.row))
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
}
