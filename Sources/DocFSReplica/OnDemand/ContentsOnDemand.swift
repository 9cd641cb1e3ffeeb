import Foundation
import Logging
import Synchronization
import DocFSProvider
import DocFSStore

/// A replica's contents on demand: files other replicas made arrive as metadata (`absent`), and
/// are downloaded when first opened; downloaded files the server has are evicted, least recently
/// opened first, to keep the contents under `--cache-size`; pinned items stay downloaded.
///
/// The decisions are here; the store does the mechanics (`OnDemandStore`) and hands this the
/// provider's on-demand actions (`OnDemandHandler`). Made once per replica by its first sync
/// engine and kept by the store (an engine restarting finds it), so that pins, the open readers
/// and the least-recently-used order outlive the engine.
///
/// In memory: the downloads in flight, the maker of transfers the sync engine sets (nil while no
/// engine runs: an evicted file then cannot be read), the cache limit, when each file was last
/// opened, the readers holding each file open (never evicted), and the pinned items. A leaf
/// lock, never held across I/O.
package final class ContentsOnDemand: OnDemandHandler {
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

    let store: any OnDemandStore
    let logger: Logger
    let state: Mutex<State>

    /// The store's contents on demand: the one it has (made by an earlier engine), or a new one
    /// handed to it now (the pins read from the store).
    package static func attached(to store: any OnDemandStore, logger: Logger) -> ContentsOnDemand {
        if let existing = store.onDemandHandler as? ContentsOnDemand { return existing }
        let made = ContentsOnDemand(store: store, logger: logger)
        store.setOnDemandHandler(made)
        return made
    }

    init(store: any OnDemandStore, logger: Logger) {
        self.store = store
        self.logger = logger
        var pins: Set<Int64> = []
        do throws(ProviderError) {
            pins = try store.onDemandPass { (pass) throws(ProviderError) in try pass.pinnedRows() }
        } catch {
            logger.error("contents on demand: \(error.reason); no item reads as pinned until it is pinned again")
        }
        state = Mutex(State(pins: pins))
    }

    /// Set by the sync engine while it runs: without it, an evicted file cannot be read (EIO).
    package func setTransfers(_ maker: ContentTransferMaker?) {
        state.withLock { $0.transfers = maker }
    }

    /// `docfs mount --cache-size`: nil for no limit.
    package func setCacheLimit(_ bytes: Int64?) {
        state.withLock { $0.limit = bytes }
        scheduleEviction()
    }

    /// For `docfs status`: the limit (nil: none), the bytes of contents here as last counted (nil:
    /// not counted yet, no limit), downloads in flight.
    package var cacheFigures: (limit: Int64?, local: Int64?, downloading: Int) {
        state.withLock { ($0.limit, $0.localEstimate, $0.downloads.count) }
    }

    /// For metrics: since the mount, contents downloaded (files, bytes) and evicted (files, bytes).
    package var transferFigures: (downloadedFiles: Int, downloadedBytes: Int64, evictedFiles: Int, evictedBytes: Int64) {
        state.withLock {
            (downloadedFiles: $0.downloadedFiles, downloadedBytes: $0.downloadedBytes, evictedFiles: $0.evictedFiles, evictedBytes: $0.evictedBytes)
        }
    }

    // MARK: Opening and closing

    package func openContentsForReading(of identifier: ItemIdentifier) throws(ProviderError) -> OpenedContents {
        guard let row = store.onDemandRow(of: identifier) else {
            return OpenedContents(fd: try store.openStoredContents(of: identifier))
        }
        // The warm path: a file here is opened with this one check.
        guard let file = store.onDemandFile(row: row), file.isFile, !file.isDownloaded else {
            return OpenedContents(fd: try openHere(identifier, row: row))
        }
        let download = try startDownload(file)
        let fd = open(download.path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            // Finished meanwhile: the file is in contents/ now.
            return OpenedContents(fd: try openHere(identifier, row: row))
        }
        noteOpen(row, reader: true)
        return OpenedContents(fd: fd, arrival: download.arrival)
    }

    /// The store's contents opened; a reading handle on `row` until `contentsClosed`.
    private func openHere(_ identifier: ItemIdentifier, row: Int64) throws(ProviderError) -> Int32 {
        let fd = try store.openStoredContents(of: identifier)
        noteOpen(row, reader: true)
        return fd
    }

    package func contentsClosed(of identifier: ItemIdentifier) {
        guard let row = store.onDemandRow(of: identifier) else { return }
        // A file open while a download made room could not go then: it can now.
        if noteClosed(row) { scheduleEviction() }
    }

    package func contentsOpened(row: Int64) { noteOpen(row, reader: false) }

    package func contentsUploaded() { scheduleEviction() }

    package func rowsRenumbered(_ renumbers: [(old: Int64, new: Int64)]) {
        state.withLock { d in
            for (old, new) in renumbers where d.pins.remove(old) != nil { d.pins.insert(new) }
        }
    }

    /// The file was opened (for the least-recently-used order); with `reader`, a reading handle
    /// is open on it until `noteClosed` (never evicted meanwhile).
    func noteOpen(_ row: Int64, reader: Bool) {
        state.withLock { s in
            s.clock += 1
            s.lastUse[row] = s.clock
            if reader { s.openReaders[row, default: 0] += 1 }
        }
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

    // MARK: Pins

    package func setPinned(_ pinned: Bool, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) {
        guard let row = store.onDemandRow(of: identifier), let found = store.onDemandFile(row: row) else {
            throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'")
        }
        let absent = try store.onDemandPass { (pass) throws(ProviderError) -> [Int64] in
            try pass.setPinned(pinned, row: row)
            state.withLock { d in if pinned { d.pins.insert(row) } else { d.pins.remove(row) } }
            guard pinned else { return [] }
            return found.isFolder ? try pass.filesBelow(row, downloaded: false) : (found.isDownloaded ? [] : [row])
        }
        // Pinning downloads what is not here yet, before it answers.
        for row in absent {
            guard let file = store.onDemandFile(row: row), !file.isDownloaded else { continue }
            let download = try startDownload(file)
            let outcome: Result<Void, ProviderError> = await Task.detached {
                do throws(ProviderError) { try download.arrival.waitForAll(); return .success(()) } catch { return .failure(error) }
            }.value
            try outcome.get()
        }
    }

    /// The row or a folder above it is pinned.
    package func isPinnedRow(_ row: Int64) -> Bool {
        let pins = state.withLock { $0.pins }
        guard !pins.isEmpty else { return false }
        var cursor: Int64? = row
        var steps = 0
        while let current = cursor, steps < 4096 {
            if pins.contains(current) { return true }
            cursor = store.onDemandFile(row: current)?.parent
            steps += 1
        }
        return false
    }
}
