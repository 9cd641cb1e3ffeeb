import Foundation
import Logging
import Synchronization
import SystemPackage
import DocFSProvider
import DocFSWire
import DocFSRemote
import DocFSStore

/// The daemon's background sync of a replica: sends the store's outbox to the server in order,
/// while every FUSE request keeps answering from the local store.
///
/// One loop: read the oldest entries (`ReplicaStore.outboxEntries`), send them in chunks —
/// contents uploaded to the bucket a few at a time (`PREFIX/objects/<operation id>`, multipart
/// for large files, streamed), then the metadata operations applied on PostgreSQL one by one in
/// order — and complete each chunk in the store in one transaction (temporary rows become the
/// permanent identifiers the server gave). Each entry carries its operation id, so resending it
/// after a crash or a lost answer applies it once (`RemoteDatabase`) and uploads the same object.
///
/// Errors: unreachable servers are retried with backoff (0.5 s doubling to 30 s), the outbox
/// waiting; an error retrying cannot mend soon (refused credentials, a missing bucket, a server
/// schema too new) is reported and retried every minute; a change the server refuses (a name it
/// will not take, a version conflict) marks its item (`user.docfs.sync`) and is skipped, its local
/// copy kept. Each new error is logged once.
package final class SyncEngine: Sendable {
    let store: any ReplicaStore
    let configuration: ReplicaConfiguration
    let database: any ReplicaServer
    let s3: any ObjectStore
    let logger: Logger
    let wake = WakeSignal()
    let progress = Mutex(SyncProgress())
    /// Looking for damaged blocks this replica can send again (`SyncEngine+Heal`).
    let healState = Mutex(HealState())
    private let task = Mutex<Task<Void, Never>?>(nil)
    /// Other replicas' changes: applied by `incoming`, woken by `follower` (a connection pool of
    /// their own, so a long upload never holds them up).
    let incomingDatabase: any ReplicaServer
    let incoming: IncomingSync
    let follower: ChangeFollower
    /// Every download checked against the SHA-256 its uploader recorded.
    let verifier: DownloadVerifier
    /// Files downloaded when opened, evicted under the limit, pinned: the store's, made by its
    /// first engine (handed to the store before any FUSE op; a later engine takes it over).
    package let onDemand: ContentsOnDemand
    /// Entries read at a time: a few chunks, so that each chunk's upload but the first goes on
    /// beside the server's work on the one before (`send`).
    static let batchSize = 4 * chunkSize
    /// The bound of a mounted replica's pool: a call of the sending loop and one of the
    /// receiving side (a catch-up, a download's row) at once; others wait their turn.
    package static let poolConnections = 2
    /// Entries sent per chunk (a chunk's blocks share packs).
    static let chunkSize = 128
    static let chunkBytes: Int64 = 64 << 20
    let timing: RetryTiming

    /// How long the loop waits after an error: an unreachable server from `firstBackoff`,
    /// doubling up to `longestBackoff`; an error a retry cannot mend soon, `stalledRetry`.
    package struct RetryTiming: Sendable {
        package var firstBackoff = Duration.milliseconds(500)
        /// Short: an outage's end is found within seconds (the listening connection coming back
        /// also ends a wait at once); a retry costs one connection attempt.
        package var longestBackoff = Duration.seconds(4)
        package var stalledRetry = Duration.seconds(60)
        package init() {}

        /// The daemon's: `DOCFS_STALLED_RETRY` (seconds) in its environment changes
        /// `stalledRetry`, for the tests that stall a replica and mend its cause (a removed role
        /// let in again, an old schema set up) without sitting out the minute.
        static func fromEnvironment() -> RetryTiming {
            var timing = RetryTiming()
            timing.stalledRetry = SyncEngine.duration(fromEnvironment: "DOCFS_STALLED_RETRY", or: timing.stalledRetry)
            return timing
        }
    }

    package convenience init(store: any ReplicaStore, configuration: ReplicaConfiguration, logger: Logger) {
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        // One pool for sending and receiving, and the listening connection beside it: at most
        // `poolConnections` + 1 sessions per replica (docs/REMOTE.md, "Connections").
        let listenURL: PostgresURL? = if case .url(let url) = configuration.listen { url } else { nil }
        let answerTimeout = Self.answerTimeoutFromEnvironment()
        let server = RemoteDatabase(
            url: configuration.postgres, logger: quiet, maximumConnections: Self.poolConnections,
            operationTimeout: answerTimeout, listenURL: listenURL)
        // Reads from a hot standby (`--remote-read`): a pool of its own beside the primary's.
        let reads: any ReplicaServer =
            configuration.read.map {
                StandbyReads(
                    primary: server,
                    standby: RemoteDatabase(
                        url: $0, logger: quiet, maximumConnections: Self.poolConnections,
                        operationTimeout: answerTimeout),
                    standbyName: $0.withoutPassword, lagWait: Self.standbyWaitFromEnvironment())
            } ?? server
        self.init(
            store: store, configuration: configuration, logger: logger,
            server: server, incomingServer: reads,
            objects: S3Client(
                endpoint: configuration.endpoint, credentials: configuration.credentials, region: configuration.region,
                connectTimeout: .seconds(5), readTimeout: .seconds(60), logger: quiet,
                renewCredentials: { configuration.currentCredentials() }, caFile: configuration.s3CA,
                uploadLimit: configuration.uploadLimit.map { RateLimit(bytesPerSecond: $0) },
                downloadLimit: configuration.downloadLimit.map { RateLimit(bytesPerSecond: $0) }),
            timing: .fromEnvironment())
    }

    /// How long a call waits for a connection and its answer before it counts as unreachable: 5 s,
    /// or `DOCFS_SERVER_TIMEOUT` (seconds) from the daemon's environment (the tests of a server
    /// that never answers take it shorter).
    static func answerTimeoutFromEnvironment() -> Duration {
        duration(fromEnvironment: "DOCFS_SERVER_TIMEOUT", or: .seconds(5))
    }

    /// How long a read waits for a lagging standby's replay before it fails and is retried: 10 s,
    /// or `DOCFS_STANDBY_WAIT` (seconds) from the daemon's environment (the test of a paused
    /// standby takes it shorter).
    static func standbyWaitFromEnvironment() -> Duration {
        duration(fromEnvironment: "DOCFS_STANDBY_WAIT", or: .seconds(10))
    }

    /// Seconds from the daemon's environment (the `DOCFS_…` settings above, which tests set to
    /// wait less), or `fallback` when unset, not a number, or not above 0.
    static func duration(fromEnvironment name: String, or fallback: Duration) -> Duration {
        guard let text = ProcessInfo.processInfo.environment[name], let seconds = Double(text), seconds > 0 else { return fallback }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// With the servers given: `incomingServer` is a connection pool of its own for other
    /// replicas' changes (the tests give in-memory ones).
    package init(
        store: any ReplicaStore, configuration: ReplicaConfiguration, logger: Logger,
        server: any ReplicaServer, incomingServer: any ReplicaServer, objects: any ObjectStore,
        timing: RetryTiming = RetryTiming()
    ) {
        self.timing = timing
        self.store = store
        self.configuration = configuration
        self.logger = logger
        database = server
        s3 = objects
        incomingDatabase = incomingServer
        verifier = DownloadVerifier(database: incomingServer, logger: logger)
        incoming = IncomingSync(
            store: store, database: incomingServer, s3: objects, bucket: configuration.bucket,
            prefix: configuration.prefix, logger: logger,
            verifier: verifier)
        follower = ChangeFollower(
            incoming: incoming, database: incomingServer, logger: logger,
            listens: configuration.listen != .none)
        // Made before the mount answers (the engine is made first), kept by the store after.
        writers = HeldWriters.watching(store)
        onDemand = ContentsOnDemand.attached(to: store, logger: logger)
    }

    /// Set-ID bits of files from the server are kept (a mount with an explicit `-o suid`), else
    /// cleared on apply (`SetIDBits`).
    package func keepSetIDBits(_ keep: Bool) { incoming.keepsSetID.store(keep, ordering: .relaxed) }

    package func start() {
        let wake = self.wake
        // Files on the server only are downloaded when opened, by this engine's client.
        let (s3, bucket) = (self.s3, configuration.bucket)
        let verifier = self.verifier
        // A damaged block this replica marked: it looks whether it holds the bytes.
        let fetcher = ContentFetcher(
            server: incomingDatabase, objects: s3, bucket: bucket, prefix: configuration.prefix, logger: logger,
            reported: { [weak self] in self?.requestHeal() })
        onDemand.setTransfers { request, ended in
            ContentDownload(
                row: request.row, key: request.key, contentVersion: request.contentVersion, size: request.size,
                path: request.path,
                fetch: { range, progress in
                    try await fetcher.fetch(key: request.key, range: range, intoFileAt: FilePath(request.path), progress: progress)
                },
                verify: { path in await verifier.check(path, key: request.key) },
                ended: { download, failure in ended(download, failure) })
        }
        store.attach(
            ReplicaStoreHooks(
                wake: { wake.signal() },
                status: { [weak self] in self?.statusJSON() ?? "{}" },
                retry: { [weak self] row in
                    self?.retryRequests.withLock { _ = $0.insert(row) }
                    wake.signal()
                }))
        // A file's writer let go: what other replicas did to it meanwhile, kept aside, is fetched
        // and applied by the loop, between chunks (never while a create of this replica is on the
        // server and not yet completed here, which a fetch would take for another replica's item).
        writers.setRefresh { [weak self] rows in
            self?.heldChanges.withLock { $0.formUnion(rows) }
            wake.signal()
        }
        // Changes kept aside for writers when the last daemon stopped: no writer survives it.
        heldChanges.withLock { $0.formUnion(store.heldBackRows()) }
        task.withLock { $0 = Task { await self.run() } }
        follower.start()
    }

    /// Stops sending (what is pending stays in the outbox for the next mount) and closes the
    /// connections.
    package func stop() async {
        let running = task.withLock { t -> Task<Void, Never>? in
            defer { t = nil }; return t
        }
        running?.cancel()
        await running?.value
        await follower.stop()
        store.attach(nil)
        writers.setRefresh(nil)
        onDemand.setTransfers(nil)
        await database.shutdown()
        // One pool for both in a mount (shutting it down twice is harmless); tests give two.
        await incomingDatabase.shutdown()
        try? await s3.shutdown()
    }

    // MARK: The loop

    func run() async {
        var rootID: Int64?
        var checkedStaleUploads = false
        var checkedServer = false
        var backoff = timing.firstBackoff
        var deferUntil: ContinuousClock.Instant?
        while !Task.isCancelled {
            do {
                // Replicas never migrate: a schema older or newer than this docfs's, or a prefix
                // that belongs to another tree, stalls the sync with one line saying so.
                if !checkedServer {
                    try await checkServer()
                    checkedServer = true
                }
                if rootID == nil { rootID = try await database.rootID() }
                if !checkedStaleUploads {
                    try await abortStaleUploads()
                    checkedStaleUploads = true
                }
                try await letLocalBurstFinish(until: &deferUntil)
                store.outboxIdle()
                releaseSetAside()
                // Left in the set until applied: `docfs status` counts them as incoming meanwhile.
                let held = heldChanges.withLock { Array($0) }
                if !held.isEmpty {
                    try await incoming.refresh(held)
                    heldChanges.withLock { $0.subtract(held) }
                    writers.clearFetched(held)
                }
                let entries = try store.outboxEntries(limit: Self.batchSize, skipping: Set(setAside.keys))
                guard let first = entries.first else {
                    deferUntil = nil
                    try await healIfDue()
                    try await recheckOlderServer()
                    noteIdle()
                    await wake.wait(timeout: .seconds(5))
                    continue
                }
                progress.withLock {
                    $0.oldestPendingNs = first.enqueuedNs; $0.state = "uploading"
                }
                try await send(entries, rootID: rootID!)
                backoff = timing.firstBackoff
            } catch is CancellationError {
                break
            } catch {
                var failure = ServerExchangeError(error, bucket: configuration.bucket)
                // No answer: a login the server now refuses says so (a removed replica stalls with that line).
                if case RemoteError.unreachable = error, let refusal = await database.loginRefusal() {
                    failure = ServerExchangeError(refusal, bucket: configuration.bucket)
                }
                report(failure)
                // Back after the server was away (a restart, a restore): checked again before
                // anything is sent.
                if !failure.reachedServer { checkedServer = false }
                let delay = failure.stalls ? timing.stalledRetry : backoff
                if !failure.stalls { backoff = min(backoff * 2, timing.longestBackoff) }
                if failure.reachedServer {
                    try? await Task.sleep(for: delay)
                } else {
                    // Until the server is back (the follower's connection listens again) or the delay ends.
                    await follower.serverBack.wait(timeout: delay)
                    if Task.isCancelled { break }
                }
            }
        }
    }

    /// While the mount is busy (changes arrived in the last half second), the engine waits —
    /// up to 10 s, so that a long copy still syncs as it goes: on a small machine the uploads, the
    /// server and the copy share the CPU, and the person copying should not wait for the server.
    static let quietPeriod = Duration.milliseconds(500)
    static let longestDeferral = Duration.seconds(10)

    /// `deadline`: when deferring stops until the outbox is next empty (set at the first wait).
    func letLocalBurstFinish(until deadline: inout ContinuousClock.Instant?) async throws {
        let clock = ContinuousClock()
        while let quiet = store.outboxQuietFor, quiet < Self.quietPeriod {
            let end = deadline ?? clock.now + Self.longestDeferral
            deadline = end
            guard clock.now < end else { return }
            try await Task.sleep(for: min(Self.quietPeriod - quiet, end - clock.now))
        }
    }

    /// Sends entries in chunks; completes in the store what the server has even when a later
    /// entry fails (the failure then goes up to the loop, which retries from there).
    ///
    /// Pipelined: while the server applies a chunk's changes, the next chunk's contents go up
    /// (packed, PUT, their places and manifests recorded: each manifest still after its blocks,
    /// each change still after its manifest). The upload ahead ends before the chunk is
    /// completed here, since completing renames the contents of new files (`completeOutbox`); one
    /// that missed a file, failed, or followed a chunk the server decided otherwise about is
    /// done again in turn, as without the overlap.
    func send(_ entries: [OutboxEntry], rootID: Int64) async throws {
        conflicted = []
        var chunk = nextChunk(of: entries, from: 0)
        var start = 0
        var ahead: Result<Uploaded, any Error>?
        while !chunk.isEmpty {
            try Task.checkCancellation()
            start += chunk.count
            let began = ContinuousClock.now
            let uploadedChunk: Uploaded
            if let ready = try? ahead?.get(), Self.uploadCovers(ready, chunk) {
                uploadedChunk = ready
            } else {
                uploadedChunk = try await upload(chunk)
            }
            ahead = nil
            let (contents, refusedUploads, uploadedBytes) = uploadedChunk
            let uploaded = ContinuousClock.now
            if !contents.isEmpty { await FaultInjection.pause(.uploadDone) } // test-only (DOCFS_FAULT)
            let next = nextChunk(of: entries, from: start)
            let conflictsBefore = conflicted.count
            // The chunk's changes in one call (or a few, after a refusal); the server drops the
            // upload intents of the contents its versions now name. The next chunk's upload
            // meanwhile (cancelled with the loop, awaited before this chunk is completed).
            async let nextUpload: Result<Uploaded, any Error>? = uploadAhead(next)
            let chunkProgress = await applyChunk(chunk, contents: contents, refusedUploads: refusedUploads, rootID: rootID)
            let aheadResult = await nextUpload
            let (completions, refresh, failure) = (chunkProgress.completions, chunkProgress.refresh, chunkProgress.failure)
            let committed = ContinuousClock.now
            // The entries leave the outbox and the chunk is counted in one step under the
            // status's lock, so that `docfs status` never shows them gone with bytes uncounted.
            try progress.withLock { (p) throws(ProviderError) in
                try store.completeOutbox(completions, refetch: refresh)
                p.sent += completions.count
                // Bytes sent in packs: blocks the server had already cost nothing.
                p.noteUploaded(uploadedBytes)
                // A chunk cut short (the server gone mid-way) is reported next: not online meanwhile.
                if failure == nil {
                    p.online = true
                    p.lastError = nil
                }
            }
            // Bytes the upload ahead sent are counted when its chunk is completed.
            logger.debug(
                "sync: chunk of \(chunk.count) entries: upload \(uploaded - began), server \(committed - uploaded) (next chunk's upload beside it), completed here \(ContinuousClock.now - committed)"
            )
            follower.wake.signal()
            // A chunk the server decided otherwise about changed items here (a conflicted copy, a
            // name dropped): the next chunk's contents are read again after it.
            if refresh.isEmpty, conflicted.count == conflictsBefore { ahead = aheadResult }
            if !refresh.isEmpty {
                // Noted with the completions: a fetch cut short is the loop's to try again (the
                // change log will not name these items again for this replica).
                heldChanges.withLock { $0.formUnion(refresh) }
                FaultInjection.point(.refetch) // test-only (DOCFS_FAULT)
                await FaultInjection.pause(.refetch)
                do {
                    try await incoming.refresh(refresh)
                    heldChanges.withLock { $0.subtract(refresh) }
                    writers.clearFetched(refresh)
                } catch {
                    logger.notice(
                        "sync: the server's state of \(refresh.count) item(s) it decided about is fetched again later: \(ServerExchangeError(error, bucket: configuration.bucket).message)"
                    )
                    follower.wake.signal()
                }
            }
            if let failure { throw failure }
            chunk = next
        }
    }

    /// What a chunk's upload gave: contents by seq, refusals by seq, bytes sent in packs.
    typealias Uploaded = (contents: [Int64: RemoteContent], refused: [Int64: String], bytes: Int64)

    /// The entries of the chunk that starts at `start` (none past the end).
    func nextChunk(of entries: [OutboxEntry], from start: Int) -> [OutboxEntry] {
        guard start < entries.count else { return [] }
        var end = min(start + Self.chunkSize, entries.count)
        // A chunk's packs go up before any of its versions: a few large files end it early,
        // so that other replicas see the first of them before the last is sent.
        var bytes: Int64 = 0
        for index in start..<end where entries[index].kind == .create || entries[index].kind == .content {
            var st = stat()
            if let url = store.contentURL(ofRow: store.currentRow(entries[index].row)),
                stat(url.path, &st) == 0
            {
                bytes += Int64(st.st_size)
            }
            if bytes >= Self.chunkBytes { end = index + 1; break }
        }
        // A file's next content version joins the chunk its create or last version is in, so
        // the two share one upload (a chunk may grow to twice its size for it).
        var files = Set(entries[start..<end].filter { $0.kind == .create || $0.kind == .content }.map { store.currentRow($0.row) })
        while end < entries.count, end - start < 2 * Self.chunkSize, entries[end].kind == .content,
            files.contains(store.currentRow(entries[end].row))
        {
            files.insert(store.currentRow(entries[end].row))
            end += 1
        }
        return Array(entries[start..<end])
    }

    /// The next chunk's upload, beside the server's work on this one (nil: no next chunk).
    private func uploadAhead(_ chunk: [OutboxEntry]) async -> Result<Uploaded, any Error>? {
        guard !chunk.isEmpty else { return nil }
        do { return .success(try await upload(chunk)) } catch { return .failure(error) }
    }

    /// Whether an upload made ahead answers every file of the chunk: one it found gone (a
    /// content file renamed meanwhile, or deleted) is uploaded again in turn, where a file
    /// really gone is found gone again.
    static func uploadCovers(_ uploaded: Uploaded, _ chunk: [OutboxEntry]) -> Bool {
        chunk.allSatisfy { entry in
            guard (entry.kind == .create && entry.details.kind == .file) || entry.kind == .content else { return true }
            return uploaded.contents[entry.seq] != nil || uploaded.refused[entry.seq] != nil
        }
    }

    /// Uploads the contents a chunk's creates and content changes carry, together, as blocks
    /// (`BlockUploader`). Keyed by seq. An upload the object storage refused (not unreachable,
    /// not the credentials, not full) is answered in `refused`, keyed by seq, and its entries
    /// are set aside.
    func upload(_ chunk: [OutboxEntry]) async throws -> (contents: [Int64: RemoteContent], refused: [Int64: String], bytes: Int64) {
        let wanted = chunk.filter { entry in
            (entry.kind == .create && entry.details.kind == .file) || entry.kind == .content
        }
        guard !wanted.isEmpty else { return ([:], [:], 0) }
        // Each upload sends the file as it is now, so a file's create and content changes in one
        // chunk (a new file and what was written into it) share one manifest: each version names it.
        var byRow: [Int64: [OutboxEntry]] = [:]
        var order: [Int64] = []
        for entry in wanted {
            let row = store.currentRow(entry.row)
            if byRow[row] == nil { order.append(row) }
            byRow[row, default: []].append(entry)
        }
        let files = order.compactMap { row -> BlockUploader.File? in
            guard let entries = byRow[row], let url = store.contentURL(ofRow: row) else { return nil }
            return BlockUploader.File(seqs: entries.map(\.seq), operationID: entries[0].id, path: url.path)
        }
        var uploader = BlockUploader(
            server: database, objects: s3, bucket: configuration.bucket, prefix: configuration.prefix,
            writer: configuration.postgres.user, logger: logger)
        uploader.liveDetaches = store.liveDetaches
        let result = try await uploader.upload(files)
        // Each version says which replica sent it (`docfs versions`).
        let replica = "\(ConflictNames.hostName):\(store.url.lastPathComponent)"
        return (
            result.contents.mapValues {
                var content = $0; content.replica = replica; return content
            }, result.refused, result.uploadedBytes
        )
    }

    /// The item's content type and what it conforms to, nearest first, for the server's check of
    /// its layout's rules; nil when the item is gone here.
    func typeChain(_ row: Int64) -> [String]? {
        store.typeChain(ofRow: store.currentRow(row))
    }

    /// What applying an entry gave: the permanent identifier a create got, and an item whose
    /// server state the replica should take (a name the server suffixed).
    struct Outcome {
        var permanent: Int64? = nil
        var follow: Int64? = nil
        /// The uploaded contents the item itself has on the server now (not a conflicted copy's).
        var keptContentKey: String? = nil
    }

    /// A create or move the server applied under another name (another replica's item had it
    /// first): the item is renamed here to match, and the conflict noted.
    func renamed(_ applied: AppliedChange, _ entry: OutboxEntry, _ asked: String, row: Int64) -> Int64? {
        guard let name = applied.name, name != asked, !applied.replayed else { return nil }
        let path = store.path(ofRow: entry.row)
        store.noteConflict(
            "named \"\(name)\": another replica had already put an item named \"\(asked)\" there", row: row,
            summary: "\(path): renamed to \"\(name)\" (another replica's \"\(asked)\" came first)")
        logger.warning("sync: \(path): another replica's item is named \"\(asked)\" there already; this one is \"\(name)\" now")
        return row
    }

    /// Concurrent edits: the server keeps the other replica's version under the name, and this
    /// replica's version goes beside it as "NAME (conflicted copy from HOST YYYY-MM-DD).EXT"; here
    /// the item takes the server's version, and the copy holds this replica's.
    /// With `refusal` (the server's layout does not allow writing the file), the same, for that reason.
    func keepConflictedCopy(
        _ entry: OutboxEntry, itemID: Int64, content: RemoteContent, rootID: Int64,
        refusal: String? = nil
    ) async throws -> Outcome {
        // What this chunk sent so far is committed: the item is read as the server has it now,
        // and the copy made here exists on the server (its own call) before it exists here.
        guard let server = try await database.item(itemID), let parentID = server.parentID else {
            throw ServerExchangeError.Refused("the item is gone from the server")
        }
        let row = store.currentRow(entry.row)
        let name = ConflictNames.copy(of: server.name, host: ConflictNames.hostName, date: Date())
        let local = store.item(ofRow: row)
        let attributes = ReplicatedAttributes(
            ownerID: local?.ownerID ?? server.ownerID, groupID: local?.groupID ?? server.groupID,
            posixPermissions: local?.posixPermissions ?? server.posixPermissions & 0o7777,
            creationTime: local?.creationTime ?? server.creationTime,
            modificationTime: entry.details.changes.modificationTime ?? server.modificationTime)
        let applied = try await database.createItem(
            operationID: ConflictNames.copyOperation(entry.id), parentID: parentID, name: name,
            kind: .file, attributes: attributes, content: content)
        let parentRow = parentID == rootID ? ReplicaRows.root : parentID
        // The server's name for the copy, if a folder can hold it (`ServerRowChecks`); else the one asked for.
        let given = applied.name.flatMap { ServerRowChecks.name($0) == nil ? $0 : nil }
        try store.forkConflictedCopy(
            of: row, as: applied.itemID, name: given ?? name, parentRow: parentRow, sending: entry.seq,
            contentKey: content.key)
        conflicted.insert(row)
        let path = store.path(ofRow: row)
        let copyName = given ?? name
        if let refusal {
            store.noteConflict(
                "conflicted copy of \"\(server.name)\": \(refusal); the server's version kept the name",
                row: applied.itemID, summary: "\(path): \(refusal); this replica's version is \"\(copyName)\"")
            store.noteConflict(
                "this replica's edit is \"\(copyName)\" beside it: \(refusal)", row: row,
                summary: "\(path): the server's version kept the name")
            logger.warning(
                "sync: \(path): the server refused this replica's edit (\(refusal)): the server's version keeps the name, this replica's is \"\(copyName)\""
            )
        } else {
            store.noteConflict(
                "conflicted copy of \"\(server.name)\": both replicas changed it; the server's version kept the name",
                row: applied.itemID, summary: "\(path): edited on two replicas; this one's version is \"\(copyName)\"")
            store.noteConflict(
                "edited on another replica too; this replica's version is \"\(copyName)\" beside it", row: row,
                summary: "\(path): the other replica's version kept the name")
            logger.warning("sync: \(path) was changed on another replica too: the server's version keeps the name, this replica's is \"\(copyName)\"")
        }
        return Outcome(follow: row)
    }

    /// Items whose content changes went into a conflicted copy in this batch (their later content
    /// changes are in the copy too). Only the engine's loop touches it.
    nonisolated(unsafe) var conflicted: Set<Int64> = []
    /// Items set aside, by outbox row: the server refused a change of theirs for a reason a retry
    /// will not mend. Their entries wait in the outbox, in order, while the others go on; a later
    /// change of the item (an entry newer than `latest`), `docfs sync --retry`, or the item
    /// it waits for being tried again, tries them again. Only the engine's loop touches it.
    struct SetAside { var reason: String; var latest: Int64; var waitsOn: Int64? }
    nonisolated(unsafe) var setAside: [Int64: SetAside] = [:]
    /// Rows `docfs sync --retry` asked for (from any thread).
    let retryRequests = Mutex<Set<Int64>>([])
    /// Rows whose writer let go after other replicas' changes to them were kept aside (and their
    /// folders), or whose fetch after the server decided about their change was cut short:
    /// fetched and applied by the loop (from any thread).
    let heldChanges = Mutex<Set<Int64>>([])
    /// The files open for writing and the changes kept aside for them (the store's, `HeldWriters.watching`).
    let writers: HeldWriters

    /// Content versions of a row this replica made and never sent (the file was gone before its
    /// upload), counted until the row's delete is sent. Only the engine's loop touches it.
    nonisolated(unsafe) var unsentVersions: [Int64: Int] = [:]
}
