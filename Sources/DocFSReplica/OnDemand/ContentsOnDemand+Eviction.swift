import Dispatch
import Foundation
import DocFSProvider
import DocFSStore

// Eviction: which files can go (downloaded, not empty, allowed, on the server with nothing
// waiting, not downloading, not open, not pinned), in which order (least recently opened first,
// stopping once enough went), and when (a limit set, before a download, after an upload, a
// download or a close; `docfs evict`).
extension ContentsOnDemand {
    /// Why a file cannot be evicted now (nil: it can). Called under the store's writer lock.
    func evictionBlocker(_ file: OnDemandFile) -> String? {
        guard file.isFile, file.isDownloaded else { return "not downloaded" }
        if file.size == 0 { return "empty" }
        if !file.allowsEvicting { return "its capabilities do not allow evicting (allowsEvicting)" }
        if file.remoteKey == nil || file.waiting { return "its contents are not on the server yet" }
        let busy = state.withLock { d -> String? in
            if d.downloads[file.row] != nil { return "it is being downloaded" }
            if (d.openReaders[file.row] ?? 0) > 0 { return "it is open" }
            return nil
        }
        if let busy { return busy }
        if isPinnedRow(file.row) { return "it is pinned (docfs pin --remove lets it go)" }
        return nil
    }

    /// Evicts these files where they can be, in one pass; the others with why not.
    private func evict(
        _ rows: [Int64], pass: any OnDemandPassing, stopAt enough: Int64? = nil
    )
        throws(ProviderError) -> (evicted: Int, bytes: Int64, kept: [(row: Int64, reason: String)])
    {
        let result = try pass.evict(rows, stopAt: enough) { file in evictionBlocker(file) }
        // Not here any more: its next open stamps it again.
        state.withLock { d in
            for row in result.evicted { d.lastUse[row] = nil }
            d.evictedFiles += result.evicted.count
            d.evictedBytes += result.bytes
        }
        return (result.evicted.count, result.bytes, result.kept)
    }

    package func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int {
        guard let row = store.onDemandRow(of: identifier), let found = store.onDemandFile(row: row) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        let where_ = store.path(ofRow: row)
        let result = try store.onDemandPass { (pass) throws(ProviderError) -> (evicted: Int, bytes: Int64, kept: [(row: Int64, reason: String)]) in
            let rows = found.isFolder ? try pass.filesBelow(row, downloaded: true) : [row]
            return try evict(rows, pass: pass)
        }
        state.withLock { d in
            if let local = d.localEstimate { d.localEstimate = max(0, local - result.bytes) }
        }
        if !found.isFolder, let reason = result.kept.first?.reason, reason != "not downloaded" {
            throw ProviderError(.busy, "\(where_) is kept: \(reason)")
        }
        let held = result.kept.filter { $0.reason != "not downloaded" && $0.reason != "empty" }
        if !held.isEmpty {
            logger.notice(
                "evict \(where_): \(result.evicted) file(s) evicted, \(held.count) kept (e.g. \(store.path(ofRow: held[0].row)): \(held[0].reason))")
        }
        return result.evicted
    }

    /// Soon, off the caller's thread: evicts down to the limit (a pass counts the contents here).
    func scheduleEviction() {
        let due = state.withLock { d -> Bool in
            guard d.limit != nil, !d.evictionScheduled else { return false }
            d.evictionScheduled = true
            return true
        }
        guard due else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            state.withLock { $0.evictionScheduled = false }
            evictToLimit(reserving: 0)
        }
    }

    /// Before a download of `size` bytes: room for it under the limit, if eviction can make it.
    func makeRoom(for size: Int64) {
        let needed = state.withLock { d -> Bool in
            guard let limit = d.limit else { return false }
            guard let local = d.localEstimate else { return true }
            return local + size > limit
        }
        if needed { evictToLimit(reserving: size) }
    }

    /// Counts the contents here and evicts files the server has, least recently opened first,
    /// until they and `reserving` bytes fit under the limit.
    func evictToLimit(reserving: Int64) {
        guard let limit = state.withLock({ $0.limit }) else { return }
        do throws(ProviderError) {
            try store.onDemandPass { (pass) throws(ProviderError) in
                let (local, candidates) = try pass.contentsHere(limit: limit, reserving: reserving)
                var estimate = local
                if local + reserving > limit, !candidates.isEmpty {
                    var stamps = state.withLock { $0.lastUse }
                    if stamps.count > 4096 + 2 * candidates.count {
                        // Stamps of files deleted since they were opened, dropped now and then
                        // (the store's lock and this one are never held together).
                        let gone = stamps.keys.filter { row in store.onDemandFile(row: row) == nil }
                        for row in gone { stamps[row] = nil }
                        state.withLock { d in for row in gone { d.lastUse[row] = nil } }
                    }
                    let order = candidates.sorted { (stamps[$0] ?? 0, $0) < (stamps[$1] ?? 0, $1) }
                    let result = try evict(order, pass: pass, stopAt: local + reserving - limit)
                    estimate -= result.bytes
                    if estimate + reserving > limit {
                        logger.notice(
                            "cache: \(estimate) bytes of contents here, over the limit of \(limit): the rest is not on the server yet, open or pinned"
                        )
                    }
                }
                state.withLock { $0.localEstimate = estimate }
            }
        } catch {
            logger.warning("cache: eviction stopped: \(error.reason)")
        }
    }
}
