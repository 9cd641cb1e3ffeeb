import Foundation
import Logging
import Synchronization
import SystemPackage
import DocFSProvider
import DocFSWire
import DocFSRemote
import DocFSStore

/// Brings other replicas' changes into this one: reads the change log after the store's anchor,
/// fetches the items it names as the server has them now, downloads the contents they need, and
/// applies them (`ReplicaStore.applyIncoming`); then moves the anchor. An actor, so that the
/// follower's catch-up and the engine's refresh of an item the server decided about never apply
/// an older state over a newer one (each fetches, then applies, one at a time).
actor IncomingSync {
    let store: any ReplicaStore
    let database: any ReplicaServer
    let s3: any ObjectStore
    let bucket: String
    let prefix: String
    let logger: Logger
    var rootID: Int64?
    /// Items whose server rows break a rule of `ServerRowChecks`, and the rule: not applied (the
    /// rest goes on), logged once, applied again when a good row for them comes.
    var setAside: [Int64: String] = [:] {
        didSet { setAsideCount.store(setAside.count, ordering: .relaxed) }
    }
    /// Their number, for `docfs status` (read without waiting for the actor).
    nonisolated let setAsideCount = Atomic<Int>(0)
    /// A change refused (its position), logged once: the anchor stays before it.
    var refusedPosition: Int64?
    /// Items skipped because applying them now would put a folder below itself; tried again with
    /// the next changes (the catch-up runs every few seconds).
    var deferred: Set<Int64> = [] {
        didSet { deferredCount.store(deferred.count, ordering: .relaxed) }
    }
    /// Their number, counted in `incoming` of `docfs status`: the tree here is not the server's
    /// until they are applied.
    nonisolated let deferredCount = Atomic<Int>(0)
    /// The latest change log position the server's log holds (read by each catch-up, never
    /// taken from a notification) and the anchor applied, for `incoming` in the status (read
    /// without waiting for the actor).
    nonisolated let positions = Mutex<(latest: Int64, anchor: Int64)>((0, 0))
    var latestKnown: Int64 {
        get { positions.withLock { $0.latest } }
        set { positions.withLock { $0.latest = max($0.latest, newValue) } }
    }
    var anchor: Int64 {
        get { positions.withLock { $0.anchor } }
        set { positions.withLock { $0.anchor = newValue } }
    }
    /// What the last restore of the server's database meant here, for `docfs status` (`restore`).
    nonisolated let restoreReport = Mutex<String?>(nil)
    /// Set-ID bits of incoming files are kept (the mount's explicit `-o suid`), else cleared
    /// (`SetIDBits`).
    nonisolated let keepsSetID = Atomic<Bool>(false)

    let verifier: DownloadVerifier?

    init(
        store: any ReplicaStore, database: any ReplicaServer, s3: any ObjectStore, bucket: String, prefix: String, logger: Logger,
        verifier: DownloadVerifier? = nil
    ) {
        self.prefix = prefix
        self.verifier = verifier
        self.store = store
        self.database = database
        self.s3 = s3
        self.bucket = bucket
        self.logger = logger
    }

    /// Applies every change after the anchor; returns how many items changed here.
    @discardableResult
    func catchUp() async throws -> Int {
        if rootID == nil { rootID = try await database.rootID() }
        // Before any change is applied: after a restore, the positions (and identifiers) after
        // the anchor may be other replicas' new ones.
        var applied = try await rebuildIfRestored()
        anchor = try store.syncAnchor().position
        // What is still to come, as the log says (a restore may have lowered it).
        let logEnd = try await database.latestPosition()
        positions.withLock { $0.latest = max(logEnd, $0.anchor) }
        // (A log start below 1 is no trimmed log's; never `- 1` on it: Int64.min would trap.)
        let logStart = try await database.logStart()
        if logStart > 1, anchor < logStart - 1 {
            applied += try await rebuild()
        }
        while true {
            // A change whose position no sequence makes (a hand-edited log) would move the anchor
            // past every change to come: the catch-up stops before it.
            let read = ServerRowChecks.changes(try await database.changes(since: anchor, limit: 500), after: anchor)
            if let (change, problem) = read.refused, refusedPosition != change.position {
                refusedPosition = change.position
                logger.error("sync: refused the server's change \(change.position) (item \(change.itemID)): \(problem); the changes after it wait")
            }
            var changes = read.usable
            guard let last = changes.last else { break }
            latestKnown = max(latestKnown, last.position)
            // This replica's own change whose outbox entry is not completed yet (its item may still
            // have a temporary row here): stop before it; the engine wakes us when it completes.
            let waiting = store.outboxEntryIDs(among: changes.map(\.operationID))
            var stopped = false
            if let first = changes.firstIndex(where: { waiting.contains($0.operationID) }) {
                changes = Array(changes[..<first])
                stopped = true
            }
            if let end = changes.last {
                var seen = Set<Int64>()
                let ids = changes.map(\.itemID).filter { $0 != rootID && seen.insert($0).inserted }
                applied += try await apply(ids)
                try store.setSyncAnchor(end.position, witness: end.operationID)
                anchor = end.position
            }
            if stopped || read.refused != nil { break }
        }
        if !deferred.isEmpty { applied += try await apply([]) }
        latestKnown = max(latestKnown, anchor)
        // A refused position a notification carried is not "changes to come" (the status).
        if let refused = refusedPosition {
            positions.withLock { $0.latest = min($0.latest, max($0.anchor, refused > 0 ? refused - 1 : 0)) }
        }
        return applied
    }

    /// The server's database went back to an earlier point when the change this replica applied
    /// last (its witness) is no longer at its position: another operation there (positions
    /// rewound, other replicas wrote after), or none while the log reaches it. The replica then
    /// rebuilds from a full listing (its changes waiting are kept and sent; what the server lost,
    /// kept in `STORE/recovered/`). The engine asks before it sends anything (every reconnect),
    /// the catch-up before it applies anything.
    @discardableResult
    func rebuildIfRestored() async throws -> Int {
        // Reads from a standby wait until it has what the primary has (`StandbyReads`): a
        // standby behind the anchor must not look like a restored server.
        try await database.awaitCurrentReads()
        // One check at a time (the engine's and the catch-up's meet at the actor's awaits): a
        // second would compare the anchor from before the first one's rebuild, and rebuild again.
        if let running = restoreCheck {
            _ = try? await running.value
            return 0
        }
        let check = Task { try await self.checkRestored() }
        restoreCheck = check
        defer { restoreCheck = nil }
        return try await check.value
    }

    private var restoreCheck: Task<Int, any Error>?

    private func checkRestored() async throws -> Int {
        let stored = try store.syncAnchor()
        anchor = stored.position
        guard anchor > 0 else { return 0 }
        let why: String
        if let witness = stored.witness {
            if let change = try await database.change(at: anchor) {
                guard change.operationID != witness else { return 0 }
                why = "the server's change \(anchor) is another operation than the one this replica applied there"
            } else {
                // Trimmed by gc: the log starts after it (the catch-up rebuilds for that).
                guard try await database.logStart() <= anchor else { return 0 }
                why = "the server's change log no longer holds change \(anchor), which this replica applied"
            }
        } else {
            // A store from before the witness: only a log that ends before the anchor tells.
            guard try await database.latestPosition() < anchor else { return 0 }
            why = "the server's change log ends before this replica's anchor (\(anchor))"
        }
        if rootID == nil { rootID = try await database.rootID() }
        logger.warning(
            "sync: \(why): its database was restored to an earlier point; rebuilding from a full listing; changes waiting here are kept and sent, items whose identifiers the server now gives to others are kept in recovered/"
        )
        return try await rebuild(restored: true)
    }

    /// The server's state of these items, applied now (after the engine sent a change the server
    /// decided otherwise about: a rename that lost, a name suffixed, a refused move).
    func refresh(_ ids: [Int64]) async throws {
        // What this replica just sent is on the primary; a standby must have it first.
        try await database.awaitCurrentReads()
        if rootID == nil { rootID = try await database.rootID() }
        let wanted = ids.filter { $0 != rootID && ReplicaRows.isPermanent($0) }
        _ = try await apply(wanted)
        // A folder this replica deleted and the server kept (another replica put something in it
        // meanwhile) comes back here with what is in it: those children's changes were passed
        // over while their folder was gone here, and the change log will not name them again.
        var folders = try await database.items(wanted).filter { $0.kind == .folder && !$0.deleted }.map(\.id)
        var subtree: [Int64] = []
        while let folder = folders.popLast(), subtree.count < 100_000 {
            for child in try await database.children(of: folder) {
                subtree.append(child.id)
                if child.kind == .folder { folders.append(child.id) }
            }
        }
        if !subtree.isEmpty { _ = try await apply(subtree) }
    }

    /// A replica whose anchor is older than the log the server keeps: every item the server has,
    /// applied; this replica's items the server no longer knows (and that are not waiting to be
    /// sent) are deleted.
    /// `restored`: the server's database went back to an earlier point; what this replica had
    /// sent and the server lost is kept under `STORE/recovered/` before it goes from the tree.
    func rebuild(restored: Bool = false) async throws -> Int {
        var position = try await database.latestPosition()
        let start = try await database.logStart()
        // A last position no sequence reaches (a hand-edited log): the anchor goes to the log's
        // start instead, and the catch-up reads what follows (applying twice changes nothing).
        let before = start > 1 ? start - 1 : 0
        if position < 0 || position - before > ServerRowChecks.largestGap {
            logger.error(
                "sync: refused the server's last change position \(position): more than \(ServerRowChecks.largestGap) past its log's start (\(start)); reading from there"
            )
            position = before
        }
        let witness = position > 0 ? try await database.change(at: position)?.operationID : nil
        let ids = try await database.allItemIDs()
        var applied = 0
        // One folder of recovered/ for everything this rebuild keeps.
        let folder = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "-")
        // Items of this replica's the restored server does not know at all: made again at their
        // paths once the server's tree is here (`RestoredItems`).
        var toPutBack: [LostItem] = []
        var kept: [Int64: String] = [:]
        if restored {
            // Before anything of the server's is applied: this replica's items that the restored
            // server lost, or whose identifiers it has given to other items since (another kind,
            // another birth), are kept in recovered/ and go from the tree with the changes
            // waiting for them; the server's items then take those identifiers here.
            let local = try store.permanentIdentities()
            let absent = Set(local.keys).subtracting(ids)
            var lost = absent
            for start in stride(from: 0, to: ids.count, by: 1000) {
                let batch = ids[start..<min(start + 1000, ids.count)].filter { local[$0] != nil }
                guard !batch.isEmpty else { continue }
                for item in try await database.items(batch) {
                    guard let mine = local[item.id] else { continue }
                    if mine.kind != item.kind || mine.creationTime != item.creationTime { lost.insert(item.id) }
                }
            }
            if !lost.isEmpty {
                kept = store.keepRecovered(rows: Array(lost), folder: folder)
                toPutBack = RestoredItems.lostItems(rows: absent, store: store, kept: kept)
                try store.forgetOutboxEntries(rows: Array(lost))
                applied += try forget(Array(lost))
            }
        }
        for start in stride(from: 0, to: ids.count, by: 1000) {
            applied += try await apply(Array(ids[start..<min(start + 1000, ids.count)]))
        }
        let known = Set(ids)
        let stray = try store.permanentRows().filter { !known.contains($0) }
        if !stray.isEmpty {
            if restored {
                let strays = store.keepRecovered(rows: stray, folder: folder)
                if !strays.isEmpty {
                    logger.warning(
                        "sync: the restored server lost \(strays.count) file(s) this replica had sent; their contents are kept in \(store.url.path)/recovered/\(folder)"
                    )
                }
                kept.merge(strays) { first, _ in first }
            }
            applied += try forget(stray)
        }
        try store.setSyncAnchor(position, witness: witness)
        anchor = position
        logger.notice("sync: this replica's anchor was older than the server's change log; rebuilt from a full listing (\(ids.count) items)")
        if restored { await reportRestore(putting: toPutBack, kept: kept, folder: folder) }
        return applied
    }

    /// Puts back what the restored server lost and can take again, and says in `docfs status`
    /// how many items went back and how many files stay in recovered/.
    private func reportRestore(putting items: [LostItem], kept: [Int64: String], folder: String) async {
        let outcome = await RestoredItems(store: store, logger: logger, copyName: ConflictNames.copyNamer).putBack(items, kept: kept)
        let left = kept.values.filter { FileManager.default.fileExists(atPath: $0) }.count
        if left == 0 { RestoredItems.removeIfEmpty(folder, in: store) }
        let stamp = " (\(Date().formatted(.iso8601)))"
        guard !kept.isEmpty || !items.isEmpty else {
            restoreReport.withLock { $0 = "the server's database was restored to an earlier point; it had everything of this replica's" + stamp }
            return
        }
        var message = "the server's database was restored to an earlier point"
        if outcome.putBack > 0 {
            message += "; \(outcome.putBack) item(s) of this replica it lost are put back at their paths"
            if outcome.renamed > 0 { message += " (\(outcome.renamed) under a conflicted-copy name)" }
        }
        if left > 0 { message += "; \(left) file(s) of this replica it lost are kept in \(store.url.path)/recovered/\(folder)" }
        restoreReport.withLock { $0 = message + stamp }
        logger.warning("sync: \(message)")
    }

    /// Removes these items here, as deletions from the server (children before their folders).
    private func forget(_ rows: [Int64]) throws -> Int {
        let gone = rows.map {
            ServerItem(
                id: $0, parentID: ReplicaRows.root, name: "", kind: .file, posixPermissions: 0,
                contentVersion: 0, deleted: true)
        }
        return try store.applyIncoming(gone, contents: [:]).applied
    }

    /// The files among `items` whose contents this replica fetches before applying them: in a
    /// pinned folder (or pinned themselves), new here or at another content version, with no
    /// change of this replica waiting. Other files arrive as metadata and download when opened.
    func contentsNeeded(_ items: [ServerItem]) -> [ServerItem] {
        let pinned = items.filter { item in
            item.kind == .file && !item.deleted && !item.trashed && item.contentKey != nil
                && (store.isPinnedRow(item.row) || store.isPinnedRow(item.parentRow))
        }
        guard !pinned.isEmpty else { return [] }
        let waiting = store.outboxWaiting(rows: Set(pinned.map(\.row)))
        return pinned.filter { item in
            guard waiting[item.row] == nil else { return false }
            guard let here = store.contentVersion(ofRow: item.row) else { return true }
            return here != UInt64(item.contentVersion)
        }
    }

    /// Fetches, downloads and applies; fetches what was missing (folders not here yet, items
    /// moved aside) and applies again, a bounded number of rounds.
    private func apply(_ ids: [Int64]) async throws -> Int {
        // The root's row is the one item checked apart (`checked`).
        if rootID == nil { rootID = try await database.rootID() }
        var wanted = Set(ids).union(deferred)
        deferred = []
        var applied = 0
        var rounds = 0
        while !wanted.isEmpty, rounds < 64 {
            rounds += 1
            var items = checked(try await database.items(Array(wanted))).compactMap(incoming)
            let needed = contentsNeeded(items)
            let (contents, refused) = try await download(needed)
            defer { for path in contents.values { unlink(path) } }
            if !refused.isEmpty {
                for (row, problem) in refused where setAside[row] != problem {
                    logger.error("sync: set aside the server's item \(row): \(problem)")
                    setAside[row] = problem
                }
                items.removeAll { refused[$0.row] != nil }
            }
            let result = try store.applyIncoming(items, contents: contents)
            applied += result.applied
            deferred.formUnion(result.deferred)
            var next = result.missingParents.union(result.movedAside)
            if !result.missingParents.isEmpty { next.formUnion(ids) }
            next = next.filter { $0 != rootID && $0 > ReplicaRows.trash }
            if next == wanted { break }
            wanted = next
        }
        return applied
    }

    /// The rows that pass `ServerRowChecks`. A refused one is set aside with one log line (once
    /// per rule) and its identifier remembered; a good row for it later applies.
    private func checked(_ rows: [ServerItem]) -> [ServerItem] {
        rows.filter { row in
            guard row.id != rootID else { return true }
            guard let problem = ServerRowChecks.item(row, rootID: rootID, prefix: prefix) else {
                if setAside.removeValue(forKey: row.id) != nil { logger.notice("sync: the server's item \(row.id) is good again; applied") }
                return true
            }
            if setAside[row.id] != problem {
                logger.error("sync: set aside the server's item \(row.id) (\(String(reflecting: String(row.name.prefix(64))))): \(problem)")
            }
            setAside[row.id] = problem
            return false
        }
    }

    /// The server's item as the store takes it (the root is row 1); nil for the root itself.
    func incoming(_ item: ServerItem) -> ServerItem? {
        guard let parent = item.parentID else { return nil }
        let kind = item.kind
        let sent = item.posixPermissions & 0o7777
        let mode = SetIDBits.applied(sent, kind: kind, keep: keepsSetID.load(ordering: .relaxed))
        if mode != sent, !item.deleted {
            logger.warning(
                "sync: cleared the set-user-ID/set-group-ID bits of the server's item \(item.id) (\(String(reflecting: String(item.name.prefix(64)))), mode \(String(sent, radix: 8)) from the server, uid \(item.ownerID)): set-ID bits from other replicas are kept only on a mount with -o suid"
            )
        }
        var taken = item
        taken.parentID = parent == rootID ? ReplicaRows.root : parent
        taken.posixPermissions = mode
        return taken
    }

    /// Downloads contents into the store's staging folder, four at a time; paths by row, and the
    /// rows whose manifests were refused (`ServerRowChecks`), with the rule.
    private func download(_ items: [ServerItem]) async throws -> ([Int64: String], [Int64: String]) {
        guard !items.isEmpty else { return ([:], [:]) }
        let staging = store.stagingDirectory.path
        let bucket = self.bucket
        let fetcher = ContentFetcher(server: database, objects: s3, bucket: bucket, prefix: prefix, logger: logger)
        let verifier = self.verifier
        var results: [Int64: String] = [:]
        var refused: [Int64: String] = [:]
        var index = 0
        while index < items.count {
            let slice = items[index..<min(index + 4, items.count)]
            index += slice.count
            try await withThrowingTaskGroup(of: (Int64, String?, String?).self) { group in
                for item in slice {
                    guard let key = item.contentKey else { continue }
                    let path = staging + "/incoming-\(item.row)-\(UUID().uuidString)"
                    group.addTask {
                        do {
                            try await fetcher.download(key: key, to: path)
                            if let problem = await verifier?.check(path, key: key) { throw DownloadVerifier.Mismatch(message: problem) }
                        } catch let error as RefusedRow {
                            // Logged by the fetcher: this item is set aside, the others go on.
                            unlink(path)
                            return (item.row, nil, error.message)
                        } catch {
                            unlink(path)
                            throw error
                        }
                        return (item.row, path, nil)
                    }
                }
                for try await (row, path, problem) in group {
                    if let path { results[row] = path }
                    if let problem { refused[row] = problem }
                }
            }
        }
        return (results, refused)
    }
}
