import DocFSProvider
import GRDB

// The checks and repairs of hard links: every name row names an item that exists, is not a
// folder and is no name row itself (`danglingName`); every item counts its names (`linkCount`:
// its own plus its name rows).
extension StoreChecker {
    static func checkLinks(_ queue: DatabaseQueue, path: String, into report: inout StoreCheckReport) throws(ProviderError) {
        var found = report
        do {
            try queue.inDatabase { db in
                let dangling = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT n.id, n.name, n.linkOf FROM item n LEFT JOIN item t ON t.id = n.linkOf
                        WHERE n.linkOf IS NOT NULL AND (t.id IS NULL OR t.kind = 1 OR t.linkOf IS NOT NULL) ORDER BY n.id
                        """)
                while let row = try dangling.next() {
                    let named: Int64 = row[2]
                    found.found(.danglingName, "\(describe(row[0], row[1])) is a name of item \(named), which does not exist or cannot have names")
                }
                let counts = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT t.id, t.name, t.links, (SELECT COUNT(*) FROM item n WHERE n.linkOf = t.id) FROM item t
                        WHERE t.linkOf IS NULL AND t.kind != 1 AND (t.links != 1 OR EXISTS (SELECT 1 FROM item n WHERE n.linkOf = t.id))
                        ORDER BY t.id
                        """)
                while let row = try counts.next() {
                    let recorded: Int64 = row[2]
                    let names: Int64 = row[3]
                    if recorded != names + 1 {
                        found.found(.linkCount, "\(describe(row[0], row[1])) records \(recorded) name(s); it has \(names + 1)")
                    }
                }
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(path): \(LocalStore.databaseName) is not a readable docfs database: \(error)")
        }
        report = found
    }

    /// `--repair`: name rows of no item (or of a folder, or of a name) go; every item's count
    /// becomes its names. Works on the loaded records; returns one line per repair.
    static func mendLinks(_ records: inout [Int64: Record], saving: inout [Int64: Record], deleting: inout Set<Int64>) -> [String] {
        var done: [String] = []
        var names: [Int64: Int] = [:]
        for row in records.keys.sorted() {
            guard let record = records[row], let named = record.linkOf else { continue }
            guard let target = records[named], !target.item.isFolder, target.linkOf == nil else {
                records[row] = nil
                deleting.insert(row)
                done.append("removed \(describe(record)): a name of item \(named), which does not exist or cannot have names")
                continue
            }
            names[named, default: 0] += 1
        }
        for row in records.keys.sorted() {
            guard var record = records[row], record.linkOf == nil, !record.item.isFolder else { continue }
            let count = 1 + (names[row] ?? 0)
            if record.item.linkCount == count { continue }
            done.append("set the name count of \(describe(record)) to \(count) (was \(record.item.linkCount))")
            record.item.linkCount = count
            record.item.itemVersion.metadataVersion += 1
            records[row] = record
            saving[row] = record
        }
        return done
    }
}
