import Foundation
import DocFSProvider
import GRDB

// Files open for writing on a replica: other replicas' versions and deletes of them wait for the
// writer's close (`applyIncoming` keeps them aside), which then decides: a new version based on
// the one the writer saw (the server takes it, or keeps it as a conflicted copy when another
// replica's came first), or, when nothing was written, the change kept aside is applied.
extension LocalStore {
    package func contentsOpenedForWriting(of identifier: ItemIdentifier) {
        guard let replica, let row = row(for: identifier) else { return }
        replica.writers.open(row)
        logger.debug("\(path(of: identifier)): open for writing; other replicas' changes to it wait for its close")
    }

    package func contentsClosedForWriting(of identifier: ItemIdentifier) {
        guard let replica, let row = row(for: identifier) else { return }
        var rows = replica.writers.close(row)
        guard !rows.isEmpty else { return }
        // A delete kept aside may have left folders above the file (not empty here): their
        // server state is fetched again too, children first.
        rows += state.withLock { tree -> [Int64] in
            var up: [Int64] = []
            var cursor = tree.records[row]?.parent
            while let current = cursor, current > Self.trashRow {
                up.append(current)
                cursor = tree.records[current]?.parent
            }
            return up
        }
        replica.writers.requestRefresh(rows)
    }

    /// Whether an incoming change of `row` must wait for its writer (noted, to apply at its close,
    /// and in `meta` in the same transaction: the anchor moves past the change, so a daemon that
    /// dies while the writer holds it fetches it again at its next start).
    func keepAsideForWriter(_ row: Int64, _ database: DatabaseQueue) throws(ProviderError) -> Bool {
        guard let writers = replica?.writers, writers.isHeld(row) else { return false }
        writers.keptAside(row)
        do {
            try database.inDatabase { db in try Self.noteRefetch([row], db) }
        } catch {
            throw ProviderError(.ioError, "note a change kept aside: \(error)")
        }
        logger.info("\(state.withLock { $0.path(of: row) }): another replica's change waits until this replica's writer closes the file")
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
        ((try? String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [heldBackKey])) ?? nil)?
            .split(separator: ",").compactMap { Int64($0) } ?? []
    }

    /// Rows whose changes were kept aside for a writer and not fetched again since (the engine
    /// fetches them at its start: no writer survives a restart).
    package func heldBackRows() -> [Int64] {
        guard replica != nil else { return [] }
        return (try? write { (database) throws(ProviderError) -> [Int64] in
            (try? database.inDatabase { db in Self.heldBack(db) }) ?? []
        }) ?? []
    }

    /// These rows' server state was applied again: forget them (but for a row whose newer change
    /// a writer, opened again meanwhile, keeps aside: that one is still to fetch after a crash).
    package func clearHeldBack(_ rows: [Int64]) {
        guard let writers = replica?.writers else { return }
        let rows = rows.filter { !writers.isKeptAside($0) }
        guard !rows.isEmpty else { return }
        try? write { (database) throws(ProviderError) in
            try? database.inDatabase { db in
                let left = Set(Self.heldBack(db)).subtracting(rows)
                try Schema.setMeta(db, Self.heldBackKey, left.sorted().map(String.init).joined(separator: ","))
            }
        }
    }

    /// The sync engine's handler for rows whose kept-aside changes should be fetched again.
    package func setHeldChangesHandler(_ handler: (@Sendable ([Int64]) -> Void)?) {
        replica?.writers.setRefresh(handler)
    }
}

// Items the server refused, set aside by the sync engine: `docfs sync --retry` asks for them.
extension LocalStore {
    package func retrySync(of identifier: ItemIdentifier) async throws(ProviderError) {
        guard let replica else { throw ProviderError(.unsupported, "this store has no remote to send changes to") }
        guard let row = row(for: identifier) else { throw ProviderError(.noSuchItem) }
        replica.requestRetry(row)
    }

    /// The sync engine's handler for `retrySync`.
    package func setRetryHandler(_ handler: (@Sendable (Int64) -> Void)?) {
        replica?.setRetry(handler)
    }
}

// The store's opt-in sides: a store made with `--remote` is a replica whose contents come on
// demand; a store of its own answers as one without a server (no sync state, nothing to pin).
extension LocalStore: ReplicaStatusProvider, OpenWritersProvider, OnDemandProvider {}
