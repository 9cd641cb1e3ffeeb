import DocFSProvider
import DocFSStore
import Synchronization

/// Files open for writing through the mount, by row, and the rows whose incoming changes were
/// kept aside while they were (another replica's version or delete of a file being written:
/// the writer's close decides, see `IncomingApply`). The store forwards the bridge's
/// opens and closes here (`OpenWriterWatch`); the sync engine fetches what a close releases
/// (`setRefresh`). One per store (`watching`), so it outlives a sync engine. A leaf lock.
package final class HeldWriters: OpenWriterWatch {
    private let state = Mutex<(writers: [Int64: Int], keptAside: Set<Int64>)>(([:], []))
    /// Asked to fetch these rows' server state again (set by the sync engine while it runs).
    private let refresh = Mutex<(@Sendable ([Int64]) -> Void)?>(nil)
    /// Weak: the store holds this watch.
    private weak let store: (any ReplicaStore)?

    /// The store's watch: made and handed to it the first time (the sync engine's init, before
    /// the mount answers), the same one after (a sync engine started again finds what the
    /// writers of the mount hold).
    package static func watching(_ store: any ReplicaStore) -> HeldWriters {
        let made = store.watchOpenWriters { HeldWriters(store: store) }
        return made as? HeldWriters ?? HeldWriters(store: store)
    }

    private init(store: any ReplicaStore) { self.store = store }

    package func opened(_ row: Int64) { state.withLock { $0.writers[row, default: 0] += 1 } }

    /// The last writer of `row` let go: the change kept aside for it is fetched again, with the
    /// folders above it, children first (a delete kept aside may have left them: not empty here).
    /// Nothing when nothing was kept aside, or another writer still holds it.
    package func closed(_ row: Int64) {
        let released = state.withLock { s -> Bool in
            guard let count = s.writers[row] else { return false }
            if count > 1 { s.writers[row] = count - 1; return false }
            s.writers[row] = nil
            return s.keptAside.remove(row) != nil
        }
        guard released else { return }
        requestRefresh([row] + (store?.folderRows(above: row) ?? []))
    }

    package func isHeld(_ row: Int64) -> Bool { state.withLock { $0.writers[row] != nil } }

    /// An incoming change of `row` is not applied while a writer holds it: noted, for its close.
    package func holdForWriter(_ row: Int64) -> Bool {
        state.withLock { s in
            guard s.writers[row] != nil else { return false }
            s.keptAside.insert(row)
            return true
        }
    }

    /// Whether a change of `row` waits for its writer's close now.
    package func isKeptAside(_ row: Int64) -> Bool { state.withLock { $0.keptAside.contains(row) } }

    /// A temporary row became permanent while held.
    package func renamed(_ old: Int64, to new: Int64) {
        state.withLock { s in
            if let count = s.writers.removeValue(forKey: old) { s.writers[new, default: 0] += count }
            if s.keptAside.remove(old) != nil { s.keptAside.insert(new) }
        }
    }

    /// These rows' server state was applied again: the store forgets them, but for a row whose
    /// newer change a writer, opened again meanwhile, keeps aside (still to fetch after a crash).
    package func clearFetched(_ rows: [Int64]) {
        let rows = rows.filter { !isKeptAside($0) }
        guard !rows.isEmpty else { return }
        store?.clearHeldBack(rows)
    }

    package func setRefresh(_ handler: (@Sendable ([Int64]) -> Void)?) { refresh.withLock { $0 = handler } }

    private func requestRefresh(_ rows: [Int64]) {
        guard !rows.isEmpty else { return }
        refresh.withLock { $0 }?(rows)
    }
}
