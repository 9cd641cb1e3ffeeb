#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import DocFSProvider

// The provider's side of a replica (its opt-ins: sync state, writers, contents on demand): a
// store made with `--remote` answers through its replica part (`StoreReplica`); a store of its
// own answers as one without a server (no sync state, nothing to pin, nothing to download).
extension LocalStore: ReplicaStatusProvider, OpenWritersProvider, OnDemandProvider {
    /// The server this store is a replica of; nil for a store of its own.
    package var remoteLink: RemoteLink? { replica?.remoteLink }

    /// Whether an identifier is a temporary one (a replica's item the server has not numbered yet).
    package static func isTemporary(_ identifier: ItemIdentifier) -> Bool {
        (row(for: identifier) ?? 0) >= temporaryRowBase
    }

    package func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {
        replica?.observeChanges(handler)
    }

    // MARK: Sync state

    /// `user.docfs.sync`: uploaded, pending, or error: REASON; nil for a store without a remote.
    package func syncState(of identifier: ItemIdentifier) -> String? {
        guard let replica, let row = row(for: identifier) else { return nil }
        return replica.syncState(ofRow: row)
    }

    /// The status JSON the sync engine reports (`docfs status`); nil without a remote.
    package func syncStatus() -> String? { replica?.state.statusJSON }

    package func conflict(of identifier: ItemIdentifier) -> String? {
        guard let replica, let row = row(for: identifier) else { return nil }
        return replica.conflict(ofRow: row)
    }

    package func retrySync(of identifier: ItemIdentifier) async throws(ProviderError) {
        guard let replica else { throw ProviderError(.unsupported, "this store has no remote to send changes to") }
        guard let row = row(for: identifier) else { throw ProviderError(.noSuchItem) }
        replica.retrySync(row: row)
    }

    // MARK: Files open for writing

    package func contentsOpenedForWriting(of identifier: ItemIdentifier) {
        guard let replica, let row = row(for: identifier) else { return }
        replica.contentsOpenedForWriting(row: row)
    }

    package func contentsClosedForWriting(of identifier: ItemIdentifier) {
        guard let replica, let row = row(for: identifier) else { return }
        replica.contentsClosedForWriting(row: row)
    }

    // MARK: Contents on demand

    package func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents {
        guard let onDemand = replica?.onDemandHandler else { return OpenedContents(fd: try openContents(of: identifier)) }
        return try onDemand.openContentsForReading(of: identifier)
    }

    package func contentsClosed(of identifier: ItemIdentifier) {
        replica?.onDemandHandler?.contentsClosed(of: identifier)
    }

    package func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int {
        guard let replica else {
            throw ProviderError(
                .unsupported, "\(path(of: identifier)) is in a store without a server: there is nowhere to download evicted contents from")
        }
        guard let onDemand = replica.onDemandHandler else { throw notSyncing(identifier) }
        return try await onDemand.evictContents(ofItemWithIdentifier: identifier)
    }

    package func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        guard let replica else {
            throw ProviderError(.unsupported, "\(path(of: identifier)) is in a store without a server: every file is here already")
        }
        guard let onDemand = replica.onDemandHandler else { throw notSyncing(identifier) }
        try await onDemand.setPinned(pinned, forItemIdentifier: identifier)
    }

    package func isPinned(_ identifier: ItemIdentifier) -> Bool {
        guard let replica, let row = row(for: identifier) else { return false }
        return replica.isPinnedRow(replica.currentRow(row))
    }

    /// The whole contents of a file not downloaded, waited for. Returns the path to open.
    func downloadedPath(of record: Record) throws(ProviderError) -> String {
        guard let onDemand = replica?.onDemandHandler else { throw notSyncing(record.item.identifier) }
        return try onDemand.downloadedPath(ofRow: record.row)
    }

    private func notSyncing(_ identifier: ItemIdentifier) -> ProviderError {
        ProviderError(
            .serverUnreachable,
            "the contents of \(path(of: identifier)) are on the server only, and this mount is not syncing (evicted files are read while the replica is mounted)",
            errno: EIO)
    }
}
