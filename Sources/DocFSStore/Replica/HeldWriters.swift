import Synchronization

/// Files open for writing through the mount, by row, and the rows whose incoming changes were
/// kept aside while they were (another replica's version or delete of a file being written:
/// the writer's close decides, see `LocalStore.applyIncoming`). A leaf lock.
final class HeldWriters: Sendable {
    private let state = Mutex<(writers: [Int64: Int], heldBack: Set<Int64>)>(([:], []))
    /// Asked to fetch these rows' server state again (set by the sync engine).
    private let refresh = Mutex<(@Sendable ([Int64]) -> Void)?>(nil)

    func open(_ row: Int64) { state.withLock { $0.writers[row, default: 0] += 1 } }

    /// The last writer of `row` let go: the rows kept aside for it, to apply now (empty when
    /// nothing was, or another writer still holds it).
    func close(_ row: Int64) -> [Int64] {
        state.withLock { s -> [Int64] in
            guard let count = s.writers[row] else { return [] }
            if count > 1 { s.writers[row] = count - 1; return [] }
            s.writers[row] = nil
            guard s.heldBack.remove(row) != nil else { return [] }
            return [row]
        }
    }

    func isHeld(_ row: Int64) -> Bool { state.withLock { $0.writers[row] != nil } }

    /// An incoming change of `row` was not applied because a writer holds it.
    func keptAside(_ row: Int64) { state.withLock { _ = $0.heldBack.insert(row) } }

    /// Whether a change of `row` waits for its writer's close now.
    func isKeptAside(_ row: Int64) -> Bool { state.withLock { $0.heldBack.contains(row) } }

    /// A temporary row became permanent while held.
    func rename(_ old: Int64, to new: Int64) {
        state.withLock { s in
            if let count = s.writers.removeValue(forKey: old) { s.writers[new, default: 0] += count }
            if s.heldBack.remove(old) != nil { s.heldBack.insert(new) }
        }
    }

    func setRefresh(_ handler: (@Sendable ([Int64]) -> Void)?) { refresh.withLock { $0 = handler } }
    func requestRefresh(_ rows: [Int64]) {
        guard !rows.isEmpty else { return }
        refresh.withLock { $0 }?(rows)
    }
}
