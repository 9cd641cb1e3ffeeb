import Foundation
import DocFSProvider
import DocFSStore

// Downloads of files not here: one per row and content version, room made under the limit
// first; a finished one is placed only when its size is right and the item still wants it.
extension ContentsOnDemand {
    package func downloadedPath(ofRow row: Int64) throws(ProviderError) -> String {
        guard let file = store.onDemandFile(row: row) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(row)'")
        }
        // Placed since the caller looked.
        if file.isDownloaded { return store.onDemandContentPath(row: row) }
        let download = try startDownload(file)
        try download.arrival.waitForAll()
        var st = stat()
        return stat(download.path, &st) == 0 ? download.path : store.onDemandContentPath(row: row)
    }

    /// The download of a file's current contents: the one in flight, or a new one.
    func startDownload(_ file: OnDemandFile) throws(ProviderError) -> any ContentTransfer {
        let version = file.contentVersion
        let existing = state.withLock { d -> ((any ContentTransfer)?, ContentTransferMaker?) in
            if let running = d.downloads[file.row], running.contentVersion == version { return (running, d.transfers) }
            return (nil, d.transfers)
        }
        if let running = existing.0 { return running }
        let where_ = store.path(ofRow: file.row)
        guard let key = file.remoteKey else {
            throw ProviderError(.ioError, "the contents of \(where_) are not here and the server's object for them is not known", errno: EIO)
        }
        guard let makeTransfer = existing.1 else {
            throw ProviderError(
                .serverUnreachable,
                "the contents of \(where_) are on the server only, and this mount is not syncing (evicted files are read while the replica is mounted)",
                errno: EIO)
        }
        makeRoom(for: file.size)
        let path = try store.newDownloadFile(row: file.row)
        let download = makeTransfer(
            ContentTransferRequest(row: file.row, key: key, contentVersion: version, size: file.size, path: path),
            { [self] download, failure in finishDownload(download, failure: failure) })
        let chosen = state.withLock { d -> any ContentTransfer in
            if let running = d.downloads[file.row], running.contentVersion == version { return running }
            d.downloads[file.row] = download
            return download
        }
        guard chosen === download else { _ = unlink(path); return chosen }
        download.start()
        return download
    }

    /// A download ended: its file goes into contents/ (if the item still wants that version),
    /// the item reads as downloaded, and the readers waiting on it go on.
    func finishDownload(_ download: any ContentTransfer, failure: String?) {
        let where_ = store.path(ofRow: download.row)
        var problem = failure
        if problem == nil {
            var st = stat()
            if stat(download.path, &st) != 0 {
                problem = String(cString: strerror(errno))
            } else if Int64(st.st_size) != download.size {
                problem = "the server's object has \(st.st_size) bytes where \(download.size) were expected"
            }
        }
        var placed = false
        if problem == nil {
            do throws(ProviderError) {
                placed = try store.placeDownloadedContents(
                    row: download.row, from: download.path,
                    contentVersion: download.contentVersion, key: download.key)
            } catch {
                problem = error.reason
            }
        }
        state.withLock { d in
            if d.downloads[download.row] === download { d.downloads[download.row] = nil }
            if placed, let local = d.localEstimate { d.localEstimate = local + download.size }
            if placed { d.downloadedFiles += 1; d.downloadedBytes += download.size }
        }
        if let problem {
            logger.error("download \(where_): \(problem); reads of it fail with EIO until a download succeeds")
            download.arrival.finish(ProviderError(.serverUnreachable, "download \(where_): \(problem)", errno: EIO))
        } else {
            download.arrival.finish(nil)
        }
        if !placed { _ = unlink(download.path) }
        if placed {
            store.noteContentsPlaced(row: download.row)
            scheduleEviction()
        }
    }
}
