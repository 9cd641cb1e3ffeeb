#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import DocFSProvider
import GRDB

// A replica's contents on demand, the store's side: the provider's on-demand actions go to the
// handler the replica hands over (DocFSReplica's `ContentsOnDemand`, which decides what to
// download, evict and keep); the store answers with mechanics: a file's snapshot, a download's
// staging file, placing it, evicting rows and pinning them, each in one transaction.
extension StoreReplica {
    /// Set once when the replica is opened (the sync engine's `ContentsOnDemand`), before any
    /// FUSE op.
    package func setOnDemandHandler(_ handler: (any OnDemandHandler)?) { state.setOnDemand(handler) }
    package var onDemandHandler: (any OnDemandHandler)? { state.onDemand }

    /// The row or a folder above it is pinned.
    package func isPinnedRow(_ row: Int64) -> Bool { state.onDemand?.isPinnedRow(row) ?? false }

    // MARK: Mechanics contents on demand asks for

    /// Opens the file's contents for reading (a file not here: waits for its whole download).
    package func openStoredContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let store else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        return try store.openStoredContents(of: identifier)
    }

    /// The current row an identifier names (nil: none).
    package func onDemandRow(of identifier: ItemIdentifier) -> Int64? { tree.row(for: identifier).map(currentRow) }

    /// The item at `row` as contents on demand sees it (nil: gone).
    package func onDemandFile(row: Int64) -> OnDemandFile? {
        guard let record = self.tree.record(row) else { return nil }
        return Self.onDemandFile(record)
    }

    static func onDemandFile(_ record: Record, waiting: Bool = false) -> OnDemandFile {
        OnDemandFile(
            row: record.row, parent: record.parent, kind: record.item.kind,
            isDownloaded: record.item.isDownloaded,
            size: record.item.documentSize, contentVersion: record.item.itemVersion.contentVersion,
            remoteKey: record.remoteKey, allowsEvicting: record.item.capabilities.contains(.allowsEvicting), waiting: waiting)
    }

    /// A new empty file in staging/ for the download of `row`'s contents.
    package func newDownloadFile(row: Int64) throws(ProviderError) -> String {
        let path = contents.stagingPath + "/download-\(row)-\(UUID().uuidString)"
        let fd = sysOpen(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ProviderError.posix(errno, "make a file to download \(self.path(ofRow: row)) into") }
        sysClose(fd)
        return path
    }

    /// Where `row`'s contents are kept once here.
    package func onDemandContentPath(row: Int64) -> String { contents.path(row) }

    /// A finished download's file goes into contents/ if the item still wants that version and
    /// object (moved, then committed; the item reads as downloaded); false when it changed
    /// meanwhile (the file is left where it is). The kernel is told later
    /// (`noteContentsPlaced`), once the readers waiting on the download went on.
    package func placeDownloadedContents(row: Int64, from path: String, contentVersion: UInt64, key: String) throws(ProviderError) -> Bool {
        try write { (database) throws(ProviderError) -> Bool in
            guard var record = self.tree.record(row), record.item.kind == .file, !record.item.isDownloaded,
                record.item.itemVersion.contentVersion == contentVersion, record.remoteKey == key
            else {
                return false // changed meanwhile: this version is no one's now
            }
            try sysRename(path, contents.path(row), "move the downloaded contents of \(record.item.filename) into the store")
            record.item.isDownloaded = true
            try commit(database, saving: [record], replicated: false, "note \(record.item.filename) downloaded")
            self.tree.replaceKeepingCounts([record])
            return true
        }
    }

    /// A downloaded file was placed: the kernel drops what it cached of the item.
    package func noteContentsPlaced(row: Int64) { state.notify([.modified(Self.identifier(forRow: row))]) }

    /// Runs `body` under the writer lock, with what an eviction or pin changes in one transaction.
    package func withOnDemandPass<T>(_ body: (OnDemandPass) throws(ProviderError) -> T) throws(ProviderError) -> T {
        try write { (database) throws(ProviderError) -> T in try body(OnDemandPass(store: self, database: database)) }
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
                guard var record = self.tree.record(row), record.item.kind == .file,
                    record.item.itemVersion.contentVersion == version, record.remoteKey != key
                else { continue }
                record.remoteKey = key
                saving.append(record)
            }
            guard !saving.isEmpty else { return }
            try commit(database, saving: saving, replicated: false, "note the uploaded contents of \(saving.count) file(s)")
            self.tree.replaceKeepingCounts(saving)
        }
        state.onDemand?.contentsUploaded()
    }
}

/// What contents on demand does under the store's writer lock (`StoreReplica.withOnDemandPass`):
/// count the contents here, list files below a folder, evict rows, pin rows. Valid only inside
/// the pass.
package struct OnDemandPass {
    let store: StoreReplica
    let database: DatabaseQueue

    /// The bytes of contents here, and when they and `reserving` are over `limit`, the files
    /// that could go (downloaded, not empty, on the server, nothing waiting in the outbox).
    package func contentsHere(limit: Int64, reserving: Int64) throws(ProviderError) -> (local: Int64, candidates: [Int64]) {
        try store.flushJournal(database)
        do {
            return try database.inDatabase { db in
                let local = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM item WHERE kind = 0 AND absent = 0") ?? 0
                guard local + reserving > limit else { return (local, []) }
                let rows = try Int64.fetchAll(
                    db,
                    sql: """
                        SELECT id FROM item WHERE kind = 0 AND absent = 0 AND size > 0 AND remoteKey IS NOT NULL
                        AND id NOT IN (SELECT row FROM outbox)
                        """)
                return (local, rows)
            }
        } catch {
            throw ProviderError(.ioError, "count the contents here: \(error)")
        }
    }

    /// The files below a folder that are (or are not) downloaded.
    package func filesBelow(_ folder: Int64, downloaded: Bool) throws(ProviderError) -> [Int64] {
        try store.flushJournal(database)
        do {
            return try database.inDatabase { db in
                try Int64.fetchAll(
                    db,
                    sql: """
                        WITH RECURSIVE below(id) AS (SELECT ? UNION ALL SELECT item.id FROM item JOIN below ON item.parent = below.id AND item.kind = 1)
                        SELECT item.id FROM item JOIN below ON item.parent = below.id WHERE item.kind = 0 AND item.absent = ?
                        """, arguments: [folder, downloaded ? 0 : 1])
            }
        } catch {
            throw ProviderError(.ioError, "list the files below \(store.path(ofRow: folder)): \(error)")
        }
    }

    /// Evicts these files in order, but those `blocker` keeps (it says why), until `enough`
    /// bytes went: one journal entry for them all, the files unlinked once it is in.
    package func evict(
        _ rows: [Int64], stopAt enough: Int64? = nil, blocker: (OnDemandFile) -> String?
    )
        throws(ProviderError) -> (evicted: [Int64], bytes: Int64, kept: [(row: Int64, reason: String)])
    {
        let pending = try store.pendingRows(database)
        var bytes: Int64 = 0
        var kept: [(row: Int64, reason: String)] = []
        var evicting: [Record] = []
        for row in rows {
            if let enough, bytes >= enough { break }
            guard var record = store.tree.record(row) else { continue }
            if let reason = blocker(StoreReplica.onDemandFile(record, waiting: pending.contains(row))) {
                kept.append((row, reason))
                continue
            }
            record.item.isDownloaded = false
            evicting.append(record)
            bytes += record.item.documentSize
        }
        guard !evicting.isEmpty else { return ([], 0, kept) }
        try store.commit(database, saving: evicting, replicated: false, "evict the contents of \(evicting.count) file(s)")
        store.tree.update { tree in
            for record in evicting {
                tree.replaceKeepingCounts(record)
                tree.dirty.remove(record.row)
            }
        }
        // Open descriptors (none: the blocker checked, or a reader racing in) keep the old inode.
        for record in evicting { _ = sysUnlink(store.contents.path(record.row)) }
        store.state.notify(evicting.map { .modified($0.item.identifier) })
        return (evicting.map(\.row), bytes, kept)
    }

    /// Notes (or drops) a pin on `row` in the `pinned` table.
    package func setPinned(_ pinned: Bool, row: Int64) throws(ProviderError) {
        do {
            try database.inDatabase { db in
                if pinned {
                    try db.execute(sql: "INSERT OR IGNORE INTO pinned (row) VALUES (?)", arguments: [row])
                } else {
                    try db.execute(sql: "DELETE FROM pinned WHERE row = ?", arguments: [row])
                }
            }
        } catch {
            throw ProviderError(.ioError, "\(pinned ? "pin" : "unpin") \(store.path(ofRow: row)): \(error)")
        }
    }

    /// The rows pinned (`docfs pin`), as the `pinned` table keeps them.
    package func pinnedRows() throws(ProviderError) -> Set<Int64> {
        do {
            return try database.inDatabase { db in Set(try Int64.fetchAll(db, sql: "SELECT row FROM pinned")) }
        } catch {
            throw ProviderError(.ioError, "read the pinned items: \(error)")
        }
    }
}
