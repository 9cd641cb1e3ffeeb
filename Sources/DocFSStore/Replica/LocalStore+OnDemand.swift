#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import DocFSProvider
import GRDB

// A replica's contents on demand: files other replicas made arrive as metadata (`absent`), and
// are downloaded when first opened; downloaded files the server has are evicted, least recently
// opened first, to keep the contents under `--cache-size`; pinned items stay downloaded.
extension LocalStore {
    /// Set by the sync engine while it runs: without it, an evicted file cannot be read (EIO).
    package func setContentTransfers(_ maker: ContentTransferMaker?) {
        replica?.onDemand.state.withLock { $0.transfers = maker }
    }

    /// `docfs mount --cache-size`: nil for no limit.
    package func setCacheLimit(_ bytes: Int64?) {
        replica?.onDemand.state.withLock { $0.limit = bytes }
        scheduleEviction()
    }

    /// For `docfs status`: the limit (nil: none), the bytes of contents here as last counted (nil:
    /// not counted yet, no limit), downloads in flight.
    package var cacheFigures: (limit: Int64?, local: Int64?, downloading: Int) {
        replica?.onDemand.state.withLock { ($0.limit, $0.localEstimate, $0.downloads.count) } ?? (nil, nil, 0)
    }

    /// For metrics: since the mount, contents downloaded (files, bytes) and evicted (files, bytes).
    package var transferFigures: (downloadedFiles: Int, downloadedBytes: Int64, evictedFiles: Int, evictedBytes: Int64) {
        replica?.onDemand.state.withLock {
            (downloadedFiles: $0.downloadedFiles, downloadedBytes: $0.downloadedBytes, evictedFiles: $0.evictedFiles, evictedBytes: $0.evictedBytes)
        } ?? (downloadedFiles: 0, downloadedBytes: 0, evictedFiles: 0, evictedBytes: 0)
    }

    // MARK: Opening

    package func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents {
        guard let onDemand = replica?.onDemand, let row = row(for: identifier) else {
            return OpenedContents(fd: try openContents(of: identifier))
        }
        let current = currentRow(row)
        let record = state.withLock { $0.record(current) }
        guard let record, record.item.kind == .file, !record.item.isDownloaded else {
            let fd = try openContents(of: identifier)
            onDemand.noteReader(current)
            return OpenedContents(fd: fd)
        }
        let download = try startDownload(record)
        let fd = sysOpen(download.path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            // Finished meanwhile: the file is in contents/ now.
            let fd = try openContents(of: identifier)
            onDemand.noteReader(current)
            return OpenedContents(fd: fd)
        }
        onDemand.noteOpen(current)
        onDemand.noteReader(current)
        return OpenedContents(fd: fd, arrival: download.arrival)
    }

    package func contentsClosed(of identifier: ItemIdentifier) {
        guard let onDemand = replica?.onDemand, let row = row(for: identifier) else { return }
        // A file open while a download made room could not go then: it can now.
        if onDemand.noteClosed(currentRow(row)) { scheduleEviction() }
    }

    /// The whole contents of a file not downloaded: waits for its download (a program opening
    /// it for writing copies all of it). Returns the path to open.
    func downloadedPath(of record: Record) throws(ProviderError) -> String {
        let download = try startDownload(record)
        try download.arrival.waitForAll()
        var st = stat()
        return stat(download.path, &st) == 0 ? download.path : contentPath(record.row)
    }

    /// The download of a file's current contents: the one in flight, or a new one.
    func startDownload(_ record: Record) throws(ProviderError) -> any ContentTransfer {
        guard let onDemand = replica?.onDemand else { throw ProviderError(.ioError, "\(path(of: record.item.identifier)) has no contents here") }
        let version = record.item.itemVersion.contentVersion
        let existing = onDemand.state.withLock { d -> ((any ContentTransfer)?, ContentTransferMaker?) in
            if let running = d.downloads[record.row], running.contentVersion == version { return (running, d.transfers) }
            return (nil, d.transfers)
        }
        if let running = existing.0 { return running }
        let where_ = path(of: record.item.identifier)
        guard let key = record.remoteKey else {
            throw ProviderError(.ioError, "the contents of \(where_) are not here and the server's object for them is not known", errno: EIO)
        }
        guard let makeTransfer = existing.1 else {
            throw ProviderError(.serverUnreachable, "the contents of \(where_) are on the server only, and this mount is not syncing (evicted files are read while the replica is mounted)", errno: EIO)
        }
        makeRoom(for: record.item.documentSize)
        let path = stagingPath + "/download-\(record.row)-\(UUID().uuidString)"
        let fd = sysOpen(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ProviderError.posix(errno, "make a file to download \(where_) into") }
        sysClose(fd)
        let download = makeTransfer(ContentTransferRequest(row: record.row, key: key, contentVersion: version, size: record.item.documentSize,
                                                    path: path),
                                    { [self] download, failure in finishDownload(download, failure: failure) })
        let chosen = onDemand.state.withLock { d -> any ContentTransfer in
            if let running = d.downloads[record.row], running.contentVersion == version { return running }
            d.downloads[record.row] = download
            return download
        }
        guard chosen === download else { _ = sysUnlink(path); return chosen }
        download.start()
        return download
    }

    /// A download ended: its file goes into contents/ (if the item still wants that version),
    /// the item reads as downloaded, and the readers waiting on it go on.
    private func finishDownload(_ download: any ContentTransfer, failure: String?) {
        let identifier = Self.identifier(forRow: download.row)
        let where_ = path(of: identifier)
        var problem = failure
        if problem == nil {
            switch fileStatus(download.path) {
            case .success(let status) where status.size != download.size:
                problem = "the server's object has \(status.size) bytes where \(download.size) were expected"
            case .failure(let error): problem = "\(error.reason)"
            default: break
            }
        }
        var placed = false
        if problem == nil {
            do throws(ProviderError) {
                placed = try write { (database) throws(ProviderError) -> Bool in
                    guard var record = state.withLock({ $0.record(download.row) }), record.item.kind == .file, !record.item.isDownloaded,
                          record.item.itemVersion.contentVersion == download.contentVersion, record.remoteKey == download.key else {
                        return false  // changed meanwhile: this version is no one's now
                    }
                    try sysRename(download.path, contentPath(download.row), "move the downloaded contents of \(record.item.filename) into the store")
                    record.item.isDownloaded = true
                    try commit(database, saving: [record], replicated: false, "note \(record.item.filename) downloaded")
                    state.withLock { $0.replaceKeepingCounts(record) }
                    return true
                }
            } catch {
                problem = error.reason
            }
        }
        replica?.onDemand.state.withLock { d in
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
        if !placed { _ = sysUnlink(download.path) }
        if placed {
            replica?.notify([.modified(identifier)])
            scheduleEviction()
        }
    }

    // MARK: What was uploaded

    /// After completed entries: each file whose contents went up and did not change since keeps
    /// the object's key, which makes it evictable.
    func noteUploadedContents(_ completions: [OutboxCompletion]) throws(ProviderError) {
        let keyed = completions.compactMap { c -> (row: Int64, key: String, version: UInt64)? in
            guard let key = c.contentKey, let version = c.entry.details.contentVersion else { return nil }
            return (c.permanentRow ?? currentRow(c.entry.row), key, version)
        }
        guard !keyed.isEmpty else { return }
        try write { (database) throws(ProviderError) in
            var saving: [Record] = []
            for (row, key, version) in keyed {
                guard var record = state.withLock({ $0.record(row) }), record.item.kind == .file,
                      record.item.itemVersion.contentVersion == version, record.remoteKey != key else { continue }
                record.remoteKey = key
                saving.append(record)
            }
            guard !saving.isEmpty else { return }
            try commit(database, saving: saving, replicated: false, "note the uploaded contents of \(saving.count) file(s)")
            state.withLock { tree in for record in saving { tree.replaceKeepingCounts(record) } }
        }
        scheduleEviction()
    }

    // MARK: Eviction

    /// Why a file cannot be evicted now (nil: it can).
    private func evictionBlocker(_ record: Record, pending: Set<Int64>) -> String? {
        guard record.item.kind == .file, record.item.isDownloaded else { return "not downloaded" }
        if record.item.documentSize == 0 { return "empty" }
        if !record.item.capabilities.contains(.allowsEvicting) { return "its capabilities do not allow evicting (allowsEvicting)" }
        if record.remoteKey == nil || pending.contains(record.row) { return "its contents are not on the server yet" }
        guard let onDemand = replica?.onDemand else { return "not a replica" }
        let busy = onDemand.state.withLock { d -> String? in
            if d.downloads[record.row] != nil { return "it is being downloaded" }
            if (d.openReaders[record.row] ?? 0) > 0 { return "it is open" }
            return nil
        }
        if let busy { return busy }
        if isPinnedRow(record.row) { return "it is pinned (docfs pin --remove lets it go)" }
        return nil
    }

    /// Evicts these files where they can be; returns how many were, and the others with why not.
    /// Call under the writer lock.
    private func evictRows(_ rows: [Int64], database: DatabaseQueue, stopAt enough: Int64? = nil)
        throws(ProviderError) -> (evicted: Int, bytes: Int64, kept: [(row: Int64, reason: String)]) {
        let pending = try pendingRows(database)
        var bytes: Int64 = 0
        var kept: [(row: Int64, reason: String)] = []
        var evicting: [Record] = []
        for row in rows {
            if let enough, bytes >= enough { break }
            guard var record = state.withLock({ $0.record(row) }) else { continue }
            if let reason = evictionBlocker(record, pending: pending) {
                kept.append((row, reason))
                continue
            }
            record.item.isDownloaded = false
            evicting.append(record)
            bytes += record.item.documentSize
        }
        guard !evicting.isEmpty else { return (0, 0, kept) }
        // One journal entry for them all; the files go once it is in.
        try commit(database, saving: evicting, replicated: false, "evict the contents of \(evicting.count) file(s)")
        state.withLock { tree in
            for record in evicting {
                tree.replaceKeepingCounts(record)
                tree.dirty.remove(record.row)
            }
        }
        // Open descriptors (none: checked above, or a reader racing in) keep the old inode.
        for record in evicting { _ = sysUnlink(contentPath(record.row)) }
        // Not here any more: its next open stamps it again.
        replica?.onDemand.state.withLock { d in for record in evicting { d.lastUse[record.row] = nil } }
        replica?.notify(evicting.map { .modified($0.item.identifier) })
        return (evicting.count, bytes, kept)
    }

    package func evictContents(ofItemWithIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Int {
        guard replica != nil else { throw ProviderError(.unsupported, "\(path(of: identifier)) is in a store without a server: there is nowhere to download evicted contents from") }
        let row = currentRow(try itemRow(identifier))
        let found = try item(for: identifier)
        let where_ = path(of: identifier)
        let result = try write { (database) throws(ProviderError) -> (evicted: Int, bytes: Int64, kept: [(row: Int64, reason: String)]) in
            let rows = found.isFolder ? try filesBelow(row, downloaded: true, database: database) : [row]
            return try evictRows(rows, database: database)
        }
        replica?.onDemand.state.withLock { d in
            if let local = d.localEstimate { d.localEstimate = max(0, local - result.bytes) }
            d.evictedFiles += result.evicted
            d.evictedBytes += result.bytes
        }
        if !found.isFolder, let reason = result.kept.first?.reason, reason != "not downloaded" {
            throw ProviderError(.busy, "\(where_) is kept: \(reason)")
        }
        let held = result.kept.filter { $0.reason != "not downloaded" && $0.reason != "empty" }
        if !held.isEmpty {
            logger.notice("evict \(where_): \(result.evicted) file(s) evicted, \(held.count) kept (e.g. \(path(of: Self.identifier(forRow: held[0].row))): \(held[0].reason))")
        }
        return result.evicted
    }

    /// The files below a folder that are (or are not) downloaded. Call under the writer lock.
    private func filesBelow(_ folder: Int64, downloaded: Bool, database: DatabaseQueue) throws(ProviderError) -> [Int64] {
        try flushJournal(database)
        do {
            return try database.inDatabase { db in
                try Int64.fetchAll(db, sql: """
                    WITH RECURSIVE below(id) AS (SELECT ? UNION ALL SELECT item.id FROM item JOIN below ON item.parent = below.id AND item.kind = 1)
                    SELECT item.id FROM item JOIN below ON item.parent = below.id WHERE item.kind = 0 AND item.absent = ?
                    """, arguments: [folder, downloaded ? 0 : 1])
            }
        } catch {
            throw ProviderError(.ioError, "list the files below \(path(of: Self.identifier(forRow: folder))): \(error)")
        }
    }

    /// Soon, off the caller's thread: evicts down to the limit (a pass counts the contents here).
    func scheduleEviction() {
        guard let onDemand = replica?.onDemand else { return }
        let due = onDemand.state.withLock { d -> Bool in
            guard d.limit != nil, !d.evictionScheduled else { return false }
            d.evictionScheduled = true
            return true
        }
        guard due else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            onDemand.state.withLock { $0.evictionScheduled = false }
            evictToLimit(reserving: 0)
        }
    }

    /// Before a download of `size` bytes: room for it under the limit, if eviction can make it.
    func makeRoom(for size: Int64) {
        guard let onDemand = replica?.onDemand else { return }
        let needed = onDemand.state.withLock { d -> Bool in
            guard let limit = d.limit else { return false }
            guard let local = d.localEstimate else { return true }
            return local + size > limit
        }
        if needed { evictToLimit(reserving: size) }
    }

    /// Counts the contents here and evicts files the server has, least recently opened first,
    /// until they and `reserving` bytes fit under the limit.
    func evictToLimit(reserving: Int64) {
        guard let onDemand = replica?.onDemand, let limit = onDemand.state.withLock({ $0.limit }) else { return }
        do throws(ProviderError) {
            try write { (database) throws(ProviderError) in
                try flushJournal(database)
                let (local, candidates): (Int64, [Int64])
                do {
                    (local, candidates) = try database.inDatabase { db in
                        let local = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM item WHERE kind = 0 AND absent = 0") ?? 0
                        guard local + reserving > limit else { return (local, []) }
                        let rows = try Int64.fetchAll(db, sql: """
                            SELECT id FROM item WHERE kind = 0 AND absent = 0 AND size > 0 AND remoteKey IS NOT NULL
                            AND id NOT IN (SELECT row FROM outbox)
                            """)
                        return (local, rows)
                    }
                } catch {
                    throw ProviderError(.ioError, "count the contents here: \(error)")
                }
                var estimate = local
                if local + reserving > limit, !candidates.isEmpty {
                    var stamps = onDemand.state.withLock { $0.lastUse }
                    if stamps.count > 4096 + 2 * candidates.count {
                        // Stamps of files deleted since they were opened, dropped now and then
                        // (the two locks are never held together).
                        let gone = stamps.keys.filter { row in state.withLock { $0.record(row) == nil } }
                        for row in gone { stamps[row] = nil }
                        onDemand.state.withLock { d in for row in gone { d.lastUse[row] = nil } }
                    }
                    let order = candidates.sorted { (stamps[$0] ?? 0, $0) < (stamps[$1] ?? 0, $1) }
                    let result = try evictRows(order, database: database, stopAt: local + reserving - limit)
                    estimate -= result.bytes
                    onDemand.state.withLock { d in d.evictedFiles += result.evicted; d.evictedBytes += result.bytes }
                    if estimate + reserving > limit {
                        logger.notice("cache: \(estimate) bytes of contents here, over the limit of \(limit): the rest is not on the server yet, open or pinned")
                    }
                }
                onDemand.state.withLock { $0.localEstimate = estimate }
            }
        } catch {
            logger.warning("cache: eviction stopped: \(error.reason)")
        }
    }

    // MARK: Pins

    package func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        guard let onDemand = replica?.onDemand else {
            throw ProviderError(.unsupported, "\(path(of: identifier)) is in a store without a server: every file is here already")
        }
        let row = currentRow(try itemRow(identifier))
        let found = try item(for: identifier)
        let absent = try write { (database) throws(ProviderError) -> [Int64] in
            do {
                try database.inDatabase { db in
                    if pinned {
                        try db.execute(sql: "INSERT OR IGNORE INTO pinned (row) VALUES (?)", arguments: [row])
                    } else {
                        try db.execute(sql: "DELETE FROM pinned WHERE row = ?", arguments: [row])
                    }
                }
            } catch {
                throw ProviderError(.ioError, "\(pinned ? "pin" : "unpin") \(path(of: identifier)): \(error)")
            }
            onDemand.state.withLock { d in if pinned { d.pins.insert(row) } else { d.pins.remove(row) } }
            guard pinned else { return [] }
            return found.isFolder ? try filesBelow(row, downloaded: false, database: database) : (found.isDownloaded ? [] : [row])
        }
        // Pinning downloads what is not here yet, before it answers.
        for file in absent {
            guard let record = state.withLock({ $0.record(file) }), !record.item.isDownloaded else { continue }
            let download = try startDownload(record)
            let outcome: Result<Void, ProviderError> = await Task.detached {
                do throws(ProviderError) { try download.arrival.waitForAll(); return .success(()) } catch { return .failure(error) }
            }.value
            try outcome.get()
        }
    }

    package func isPinned(_ identifier: ItemIdentifier) -> Bool {
        guard let row = row(for: identifier) else { return false }
        return isPinnedRow(currentRow(row))
    }

    /// The row or a folder above it is pinned.
    package func isPinnedRow(_ row: Int64) -> Bool {
        guard let onDemand = replica?.onDemand else { return false }
        let pins = onDemand.state.withLock { $0.pins }
        guard !pins.isEmpty else { return false }
        var cursor: Int64? = row
        var steps = 0
        while let current = cursor, steps < 4096 {
            if pins.contains(current) { return true }
            cursor = state.withLock { $0.record(current)?.parent }
            steps += 1
        }
        return false
    }
}
