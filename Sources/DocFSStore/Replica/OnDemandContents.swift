import Synchronization

/// What a replica keeps in memory for contents on demand: the downloads in flight, the maker of
/// transfers the sync engine sets (nil while no engine runs: an evicted file then cannot be read), the
/// cache limit, when each file was last opened (least recently used goes first), the readers
/// holding each file open (never evicted), and the pinned items. A leaf lock, never held across I/O.
final class OnDemandContents: Sendable {
    struct State {
        var transfers: ContentTransferMaker?
        var downloads: [Int64: any ContentTransfer] = [:]
        /// Row → a counter at the last open (higher: more recent).
        var lastUse: [Int64: UInt64] = [:]
        var clock: UInt64 = 0
        var openReaders: [Int64: Int] = [:]
        var pins: Set<Int64> = []
        var limit: Int64?
        /// Bytes of contents here as last counted, plus downloads since (local writes are
        /// counted again at the next eviction pass).
        var localEstimate: Int64?
        var evictionScheduled = false
        /// Since the mount, for its metrics: contents downloaded and placed, files evicted.
        var downloadedFiles = 0
        var downloadedBytes: Int64 = 0
        var evictedFiles = 0
        var evictedBytes: Int64 = 0
    }

    let state: Mutex<State>

    init(pins: Set<Int64>) {
        state = Mutex(State(pins: pins))
    }

    /// The file was opened (for the least-recently-used order).
    func noteOpen(_ row: Int64) {
        state.withLock { s in
            s.clock += 1
            s.lastUse[row] = s.clock
        }
    }

    /// A reading handle is open on it until `noteClosed` (never evicted meanwhile).
    func noteReader(_ row: Int64) {
        state.withLock { s in s.openReaders[row, default: 0] += 1 }
    }

    /// A reading handle closed; true when it was the file's last and the contents here were over
    /// the limit at the last count (the file may be what held them there).
    func noteClosed(_ row: Int64) -> Bool {
        state.withLock { s in
            guard let n = s.openReaders[row] else { return false }
            if n > 1 { s.openReaders[row] = n - 1; return false }
            s.openReaders[row] = nil
            guard let limit = s.limit, let local = s.localEstimate else { return false }
            return local > limit
        }
    }
}
