import Foundation
import DocFSProvider

// Files open for writing on a replica: other replicas' versions and deletes of them wait for the
// writer's close (`applyIncoming` keeps them aside), which then decides: a new version based on
// the one the writer saw (the server takes it, or keeps it as a conflicted copy when another
// replica's came first), or, when nothing was written, the change kept aside is applied.
extension LocalStore {
    public func contentsOpenedForWriting(of identifier: ItemIdentifier) {
        guard let replica, let row = row(for: identifier) else { return }
        replica.writers.open(row)
        logger.debug("\(path(of: identifier)): open for writing; other replicas' changes to it wait for its close")
    }

    public func contentsClosedForWriting(of identifier: ItemIdentifier) {
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

    /// Whether an incoming change of `row` must wait for its writer (noted, to apply at its close).
    func keepAsideForWriter(_ row: Int64) -> Bool {
        guard let writers = replica?.writers, writers.isHeld(row) else { return false }
        writers.keptAside(row)
        logger.info("\(state.withLock { $0.path(of: row) }): another replica's change waits until this replica's writer closes the file")
        return true
    }

    /// The sync engine's handler for rows whose kept-aside changes should be fetched again.
    public func setHeldChangesHandler(_ handler: (@Sendable ([Int64]) -> Void)?) {
        replica?.writers.setRefresh(handler)
    }
}

// Items the server refused, set aside by the sync engine: `docfs sync --retry` asks for them.
extension LocalStore {
    public func retrySync(of identifier: ItemIdentifier) async throws(ProviderError) {
        guard let replica else { throw ProviderError(.unsupported, "this store has no remote to send changes to") }
        guard let row = row(for: identifier) else { throw ProviderError(.noSuchItem) }
        replica.requestRetry(row)
    }

    /// The sync engine's handler for `retrySync`.
    public func setRetryHandler(_ handler: (@Sendable (Int64) -> Void)?) {
        replica?.setRetry(handler)
    }
}
