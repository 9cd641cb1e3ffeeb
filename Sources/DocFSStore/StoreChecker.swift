#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

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
///
/// In the source the work is spread by role: `StoreChecker.swift` opens the store (refusing a
/// mounted one), recovers the journal and runs the checks; `StoreChecker+Rows.swift` checks the
/// item rows, `StoreChecker+ContentFiles.swift` the files in `contents/` and `staging/`,
/// `StoreChecker+Repair.swift` mends; the findings are a `StoreCheckReport`.
package enum StoreChecker {
    /// The folder at the root that receives items whose folder is gone.
    static let lostAndFound = "lost+found"

    /// Checks the store at `url` and, with `repair`, mends what it found and checks again.
    /// Throws `.noSuchItem`/`.notDirectory`/`.invalidArgument` when `url` is not a store,
    /// `.busy` when it is mounted (its lock is held), `.corruptFile` when SQLite cannot read it
    /// (or a repair is asked of a database SQLite finds damaged), `.ioError` when the repairs
    /// cannot be saved. Called by `docfs check`.
    /// `progress` is told each step as it starts (for `docfs check` on a terminal).
    package static func check(
        at url: URL, repair: Bool,
        progress: ((String) -> Void)? = nil
    ) throws(ProviderError) -> StoreCheckReport {
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
        var report = try examine(queue, path: path, progress: progress)
        if let journalProblem {
            report.problems.insert(journalProblem, at: 0)
            if journalRepair == nil { report.remaining.insert(journalProblem, at: 0) }
        }
        if let journalRepair { report.repairs.append(journalRepair) }
        guard repair, !report.remaining.isEmpty else { return report }
        let found = report.problems
        progress?("repairing \(report.remaining.count) problem(s)")
        let repairs = report.repairs + (try mend(queue, path: path, report.remaining))
        var after = try examine(queue, path: path, progress: progress.map { tell -> (String) -> Void in { tell("after the repairs: " + $0) } })
        after.problems = found
        after.repairs = repairs
        return after
    }

    // MARK: Looking

    /// The rows `--repair` works on, read in one go (examining holds only the slim `Index`).
    struct Snapshot {
        var records: [Int64: Record] = [:]
        /// Items that have stored extended attributes (rows of the `xattr` table).
        var attributeOwners: Set<Int64> = []
        /// The identifier sequence (`sqlite_sequence` for `item`).
        var sequence: Int64 = 0
    }

    /// SQLite's `quick_check`, the docfs tables and the format: `.corruptFile` when any fails.
    static func checkDatabase(_ db: Database, path: String) throws {
        let integrity = try String.fetchAll(db, sql: "PRAGMA quick_check")
        guard integrity == ["ok"] else {
            throw ProviderError(.corruptFile, "store \(path): SQLite integrity check failed: \(integrity.prefix(5).joined(separator: "; "))")
        }
        guard try db.tableExists("meta"), try db.tableExists("item") else {
            throw ProviderError(.corruptFile, "\(path) is not a docfs store: \(LocalStore.databaseName) has no docfs tables")
        }
        let format = try Schema.meta(db, "format")
        guard format == LocalStore.formatVersion else {
            throw ProviderError(.corruptFile, "store \(path) has format \(format ?? "none"); this docfs reads format \(LocalStore.formatVersion)")
        }
    }

    /// Reads every item row, the owners of stored attributes and the sequence, after SQLite's
    /// `quick_check` and the format check (`.corruptFile` when either fails).
    static func load(_ queue: DatabaseQueue, path: String) throws(ProviderError) -> Snapshot {
        do {
            return try queue.inDatabase { db -> Snapshot in
                try checkDatabase(db, path: path)
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
    struct Slim {
        var parent: Int64
        var kind: UInt8
        var hasContents = false
        /// A replica's file only on the server (downloaded on open): no content file is expected.
        var absent = false
    }

    /// The slim view of every item, the owners of stored attributes and the sequence.
    struct Index {
        var items: [Int64: Slim] = [:]
        var attributeOwners: [Int64] = []
        var sequence: Int64 = 0
    }

    /// Reads the slim index after SQLite's `quick_check` and the format check (`.corruptFile`
    /// when either fails).
    static func loadIndex(_ queue: DatabaseQueue, path: String) throws(ProviderError) -> Index {
        var index = Index()
        do {
            try queue.inDatabase { db in
                try checkDatabase(db, path: path)
                let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item") ?? 0
                index.items.reserveCapacity(count)
                // A name row (a hard link's further name) has no contents of its own: kind 255 here.
                let rows = try Row.fetchCursor(db, sql: "SELECT id, parent, CASE WHEN linkOf IS NULL THEN kind ELSE 255 END, absent FROM item")
                while let row = try rows.next() {
                    let parent: Int64? = row[1]
                    index.items[row[0]] = Slim(
                        parent: parent ?? -1, kind: UInt8(clamping: row[2] as Int),
                        absent: (row[3] as Int64? ?? 0) != 0)
                }
                if try db.tableExists("xattr") {
                    index.attributeOwners = try Int64.fetchAll(db, sql: "SELECT DISTINCT item FROM xattr")
                }
                index.sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'item'") ?? 0
            }
        } catch let error as ProviderError {
            throw error
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }
        return index
    }

    /// Every check, in the order the report lists what they find: the rows (`+Rows`), the
    /// content and staged files (`+ContentFiles`), then what refers to rows (attributes, the
    /// sequence). Bounded memory: only the slim index is held. `remaining` starts as everything found.
    static func examine(_ queue: DatabaseQueue, path: String, progress: ((String) -> Void)? = nil) throws(ProviderError) -> StoreCheckReport {
        progress?("reading the database (SQLite's quick_check)")
        var index = try loadIndex(queue, path: path)
        var report = StoreCheckReport()
        progress?("checking \(index.items.count) item(s)")
        try checkRows(queue, index, path: path, into: &report)
        progress?("checking the content files of \(index.items.count) item(s)")
        try checkContentFiles(queue, &index, path: path, into: &report)
        try checkLinks(queue, path: path, into: &report)
        progress?("checking staging/ and attributes")
        checkStaging(path: path, into: &report)
        checkReferences(index, into: &report)
        report.remaining = report.problems
        return report
    }

    /// `item <row> '<name>'`, as problems name an item.
    static func describe(_ row: Int64, _ name: String) -> String { "item \(row) '\(name)'" }

    /// `item <row> '<name>'`, as problems name an item.
    static func describe(_ record: Record) -> String { "item \(record.row) '\(record.item.filename)'" }
}

extension StoreCheckReport {
    /// Adds a problem found.
    mutating func found(_ kind: Kind, _ message: String) {
        problems.append(.init(kind: kind, message: message))
    }
}
