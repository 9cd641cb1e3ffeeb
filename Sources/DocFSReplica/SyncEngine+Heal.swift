import Foundation
import DocFSProvider
import DocFSRemote
import DocFSStore

/// When the engine last looked for damaged blocks it could heal, and whether a reader asked.
struct HealState: Sendable {
    /// A reader marked a block damaged (or the engine just started): look at the next idle.
    var requested = true
    var last: ContinuousClock.Instant?
    /// Items already sent from here whose blocks stayed damaged (the bytes here differ, or the
    /// server marked them again meanwhile), and when: tried again only after `retryStuck`.
    var tried: [String: ContinuousClock.Instant] = [:]
}

// Damaged blocks heal: a block the server marks damaged (a reader found it so, or `docfs remote
// check`) is not "had" any more, and a replica that holds a file naming it sends it again.
extension SyncEngine {
    /// How often an idle engine asks the server whether it holds bytes of damaged blocks: 15 s,
    /// or `DOCFS_HEAL_INTERVAL` (seconds) from the daemon's environment (the tests of a heal take
    /// it shorter rather than sit it out).
    static let healInterval = duration(fromEnvironment: "DOCFS_HEAL_INTERVAL", or: .seconds(15))
    /// How long an item whose blocks stayed damaged after a send waits before it is tried again:
    /// its bytes here may differ (then each try reads the file for nothing), or a mark may have
    /// raced the send (then the next try heals it).
    static let retryStuck = Duration.seconds(60)

    /// A reader marked a block damaged: the engine looks at its next idle moment.
    func requestHeal() {
        healState.withLock { $0.requested = true }
        wake.signal()
    }

    /// At an idle moment (the outbox sent): heals when asked, or every `healInterval`. Best
    /// effort: a server away is the loop's business when there is something to send; the next
    /// idle moment asks again.
    func healIfDue() async throws {
        let clock = ContinuousClock()
        let due = healState.withLock { h -> Bool in
            guard h.requested || h.last.map({ clock.now - $0 >= Self.healInterval }) ?? true else { return false }
            h.requested = false
            h.last = clock.now
            return true
        }
        guard due else { return }
        do { try await healDamagedBlocks() } catch is CancellationError {
            throw CancellationError()
        } catch {
            healState.withLock { $0.requested = true }
            logger.debug("sync: looking for damaged blocks to send again: \(error)")
        }
    }

    /// Sends again, from the files this replica holds, the blocks the server marks damaged that
    /// their current versions name: only those blocks go (the uploader skips the rest), and
    /// recording them gives each a sound place and clears its mark.
    func healDamagedBlocks() async throws {
        let damaged = try await database.damagedContents()
        guard !damaged.isEmpty else { return }
        let now = ContinuousClock.now
        let tried = healState.withLock { h in
            h.tried = h.tried.filter { now - $0.value < Self.retryStuck }
            return h.tried
        }
        let attempt = { (d: DamagedContent) in "\(d.itemID) \(d.key) \(d.hashes.joined(separator: ","))" }
        let wanted = damaged.filter { tried[attempt($0)] == nil }
        let held = heldContents(wanted.map(\.itemID))
        guard !held.isEmpty else { return }
        let heldRows = Set(held.map(\.row))
        let sending = wanted.filter { heldRows.contains(store.currentRow($0.itemID)) }
        let hashes = Set(sending.flatMap(\.hashes))
        let files = held.map { BlockUploader.File(seqs: [], operationID: UUID(), path: $0.path) }
        let uploader = BlockUploader(
            server: database, objects: s3, bucket: configuration.bucket, prefix: configuration.prefix,
            writer: configuration.postgres.user, logger: logger)
        let result = try await uploader.upload(files, only: hashes)
        progress.withLock { $0.noteUploaded(result.uploadedBytes) }
        let healed = try await database.knownBlocks(Array(hashes))
        let paths = held.prefix(3).map { store.path(ofRow: $0.row) }.joined(separator: ", ")
        logger.notice(
            "sync: sent again \(healed.count) of \(hashes.count) block(s) the server marked damaged (\(result.uploadedBytes) bytes), from this replica's copies of \(paths)\(held.count > 3 ? " and \(held.count - 3) more" : "")"
        )
        // Those whose blocks stayed damaged hold other bytes here (or were marked again while
        // this ran): not tried again for a while.
        let stuck = sending.filter { !Set($0.hashes).isSubset(of: healed) }
        if !stuck.isEmpty { healState.withLock { h in for d in stuck { h.tried[attempt(d)] = now } } }
    }

    /// Of these items (server identifiers), the ones whose contents are here (downloaded or
    /// written here, not evicted), with the path of their content file (a file kept in a segment
    /// gets one). A file whose recorded key is not the damaged one (its completion lost to a
    /// crash, a copy kept under a key of its own) is offered too: the uploader sends only blocks
    /// whose hashes are the damaged ones, so bytes that differ send nothing.
    func heldContents(_ rows: [Int64]) -> [(row: Int64, path: String)] {
        rows.compactMap { wanted in
            let row = store.currentRow(wanted)
            guard let item = store.item(ofRow: row), item.kind == .file, item.isDownloaded,
                let url = store.contentURL(ofRow: row)
            else { return nil }
            return (row, url.path)
        }
    }
}
