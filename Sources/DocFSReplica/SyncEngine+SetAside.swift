import Foundation
import Logging
import Synchronization
import DocFSProvider
import DocFSRemote
import DocFSStore

// Items set aside: a change the server refused for a reason a retry will not mend waits in the
// outbox with the rest of its item's changes, in order, while the others go on (SyncEngine.setAside).
extension SyncEngine {
    func setItemAside(_ entry: OutboxEntry, _ reason: String, waitsOn: Int64? = nil) {
        let latest = store.outboxWaiting(rows: [entry.row])[entry.row]?.latest ?? entry.seq
        setAside[entry.row] = SetAside(reason: reason, latest: latest, waitsOn: waitsOn)
        let row = store.currentRow(entry.row)
        store.setSyncError(reason, row: row)
        let path = store.path(ofRow: row)
        progress.withLock { $0.failedItems += 1 }
        logger.error(
            "sync: \(path): the \(entry.kind.rawValue) is set aside: \(reason); the item's changes wait (a later change of it, or docfs sync --retry, tries again), the others go on"
        )
    }

    /// Lets set-aside items whose outbox has news, or that were asked for, try again; counts
    /// what stays set aside for the status.
    func releaseSetAside() {
        let retry = retryRequests.withLock { r -> Set<Int64> in
            defer { r.removeAll() }; return r
        }
        if !setAside.isEmpty {
            let waiting = store.outboxWaiting(rows: Set(setAside.keys))
            var released: [Int64] = []
            for (row, held) in setAside {
                guard let now = waiting[row] else { setAside[row] = nil; continue } // nothing left to send
                if now.latest > held.latest || retry.contains(row) || retry.contains(store.currentRow(row)) { released.append(row) }
            }
            while let row = released.popLast() {
                guard setAside.removeValue(forKey: row) != nil else { continue }
                store.setSyncError(nil, row: store.currentRow(row))
                logger.notice("sync: \(store.path(ofRow: store.currentRow(row))): trying its changes set aside again")
                released += setAside.filter { $0.value.waitsOn == row }.map(\.key)
            }
        }
        let held = setAside.isEmpty ? 0 : store.outboxWaiting(rows: Set(setAside.keys)).values.reduce(0) { $0 + $1.count }
        progress.withLock {
            $0.setAsideItems = setAside.count; $0.setAsideChanges = held
        }
    }
}
