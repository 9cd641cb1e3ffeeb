import Foundation
import DocFSProvider
import GRDB

/// What watches a replica's files open for writing: DocFSReplica's `HeldWriters`, which decides
/// what a writer holds back and what its close releases. The store only forwards the bridge's
/// opens and closes to it, by row; it is handed to the store once (`watchOpenWriters`) before the
/// mount answers, and stays across sync engine restarts.
package protocol OpenWriterWatch: AnyObject, Sendable {
    /// A writer opened the file `row`.
    func opened(_ row: Int64)
    /// A writer of the file `row` let go.
    func closed(_ row: Int64)
    /// Whether an incoming change of `row` waits for its writer (if so, it is noted kept aside).
    func holdForWriter(_ row: Int64) -> Bool
    /// A temporary row became permanent while held.
    func renamed(_ old: Int64, to new: Int64)
}

/// A writer's close over a version that is no longer the item's: another replica's arrived
/// while it wrote (`LocalStore.modifyContents`). The item keeps the newer version; the writer's
/// bytes become a conflicted copy beside it.
package struct WriterConflict: Sendable {
    /// The item, which keeps the newer version.
    package var row: Int64
    package var name: String
    package var path: String
    /// The version the writer began at, and the one that came first.
    package var base: UInt64
    package var current: UInt64
}

/// Decides a writer's conflicted copy: DocFSReplica's `WriterConflicts`, the home of conflicts
/// (the incoming ones are its `ConflictedCopy`). The store asks it the copy's name, makes the
/// copy (a unique name in the item's folder), and tells it what it made.
package protocol WriterConflictHandler: AnyObject, Sendable {
    /// The name the copy of the item asks for.
    func copyName(for conflict: WriterConflict) -> String
    /// The copy is made: `copyRow`, named `place`.
    func kept(_ conflict: WriterConflict, asCopy copyRow: Int64, named place: String)
}

// Files open for writing on a replica: other replicas' versions and deletes of them wait for the
// writer's close (`IncomingApply` keeps them aside through `holdForWriter`), which then decides: a new version based on
// the one the writer saw (the server takes it, or keeps it as a conflicted copy when another
// replica's came first), or, when nothing was written, the change kept aside is applied.
extension StoreReplica {
    /// The watch of this replica's writers: `make`'s the first time, the same one after.
    package func watchOpenWriters(_ make: () -> any OpenWriterWatch) -> (any OpenWriterWatch)? {
        state.writerWatch.withLock { watch in
            if let watch { return watch }
            let made = make()
            watch = made
            return made
        }
    }

    func contentsOpenedForWriting(row: Int64) {
        guard let writers = state.writers else { return }
        writers.opened(row)
        logger.debug("\(tree.path(of: row)): open for writing; other replicas' changes to it wait for its close")
    }

    func contentsClosedForWriting(row: Int64) {
        state.writers?.closed(row)
    }

    /// The folders above `row`, nearest first, up to (not including) the root and the trash.
    package func folderRows(above row: Int64) -> [Int64] {
        tree.reading { tree -> [Int64] in
            var up: [Int64] = []
            var cursor = tree.records[row]?.parent
            while let current = cursor, current > Self.trashRow {
                up.append(current)
                cursor = tree.records[current]?.parent
            }
            return up
        }
    }

    /// Whether an incoming change of `row` must wait for its writer (noted, to apply at its close,
    /// and in `meta` in the same transaction: the anchor moves past the change, so a daemon that
    /// dies while the writer holds it fetches it again at its next start).
    func keepAsideForWriter(_ row: Int64, _ database: DatabaseQueue) throws(ProviderError) -> Bool {
        guard let writers = state.writers, writers.holdForWriter(row) else { return false }
        do {
            try database.inDatabase { db in try Self.noteRefetch([row], db) }
        } catch {
            throw ProviderError(.ioError, "note a change kept aside: \(error)")
        }
        logger.info("\(tree.path(of: row)): another replica's change waits until this replica's writer closes the file")
        return true
    }

    /// Rows whose server state is to be fetched again: a change kept aside for a writer, or the
    /// item of a change the server decided otherwise about (the key's name is from the first).
    static let heldBackKey = "held-back"

    static func noteRefetch(_ rows: [Int64], _ db: Database) throws {
        var noted = Set(heldBack(db))
        let before = noted.count
        noted.formUnion(rows)
        if noted.count != before { try Schema.setMeta(db, heldBackKey, noted.sorted().map(String.init).joined(separator: ",")) }
    }

    static func heldBack(_ db: Database) -> [Int64] {
        ((try? Schema.meta(db, heldBackKey)) ?? nil)?
            .split(separator: ",").compactMap { Int64($0) } ?? []
    }

    /// Rows whose changes were kept aside for a writer and not fetched again since (the engine
    /// fetches them at its start: no writer survives a restart).
    package func heldBackRows() -> [Int64] {
        (try? write { (database) throws(ProviderError) -> [Int64] in
            (try? database.inDatabase { db in Self.heldBack(db) }) ?? []
        }) ?? []
    }

    /// These rows' server state was applied again: they leave the `held-back` list (which rows
    /// may, `HeldWriters.clearFetched` decides).
    package func clearHeldBack(_ rows: [Int64]) {
        guard !rows.isEmpty else { return }
        try? write { (database) throws(ProviderError) in
            try? database.inDatabase { db in
                let left = Set(Self.heldBack(db)).subtracting(rows)
                try Schema.setMeta(db, Self.heldBackKey, left.sorted().map(String.init).joined(separator: ","))
            }
        }
    }
}

extension StoreReplica {
    /// What decides a writer's conflicted copy; set when the engine starts, kept after it stops.
    package func setWriterConflicts(_ handler: any WriterConflictHandler) { state.writerConflicts.withLock { $0 = handler } }
    var writerConflicts: (any WriterConflictHandler)? { state.writerConflicts.withLock { $0 } }
}

// Items the server refused, set aside by the sync engine: `docfs sync --retry` asks for them.
extension StoreReplica {
    func retrySync(row: Int64) { state.requestRetry(row) }

    /// The sync engine's handler for `retrySync`.
    package func setRetryHandler(_ handler: (@Sendable (Int64) -> Void)?) {
        state.setRetry(handler)
    }
}
