import Foundation
import Logging
import Synchronization
import DocFSRemote
import DocFSWire

/// `docfs init --remote-read`: the replica's reads of the server (the catch-up's change log and
/// items, listings, manifests, places, recorded hashes) go to a hot standby of it (PostgreSQL's
/// own streaming replication), everything that writes, LISTEN (a standby cannot) and the
/// schema's and tree's checks to the primary. The rows come back through the same checks as
/// the primary's (`ServerRowChecks` in `IncomingSync`): this only picks the connection.
///
/// Never older than what the replica knows. A standby replays the primary's commits in commit
/// order and the change log's positions are given in commit order (`RemoteSchema+Positions`),
/// so a standby whose log reaches position N holds every state the primary had when its log
/// ended at N: every item row is changed with a change-log entry, and manifests and block places
/// are recorded before the change that names them. So the fence is a position, in the same unit
/// as the anchor: `floor`, the highest log end this replica has learned — the primary's, read
/// from its change log by `awaitCurrentReads` at the start of every catch-up, refresh and
/// restore check (a LISTEN payload is never used: any role may NOTIFY), and the standby's own,
/// seen by each read. Every standby read first asks the standby's log end (one indexed
/// `max(position)`) and waits, polling, until it reaches `floor`; after `lagWait` it throws, the
/// caller retries later (the follower with its backoff) and `docfs status` says how far the
/// standby is behind. A standby that lags, restarts (and reopens at an older point: a hot
/// standby accepts connections at its minimum recovery point, which may be before what it
/// served) or is down delays the reads; it never makes the replica apply an older state, so
/// nothing is lost or reordered.
///
/// Positions rather than WAL locations (`pg_last_wal_replay_lsn()` against the primary's
/// `pg_current_wal_insert_lsn()`): they are what the replica already trusts and shows (anchor,
/// `incoming`), they need nothing of a role but its tables, they hold through a pgbouncer, and
/// an idle primary's insert location can sit past a page header the standby's replay location
/// never reports, which would hold the reads until the next write.
///
/// An answer that says "none" (no manifest, no recorded hash, no place for a block) may be the
/// standby not having it yet where the replica learned of it from its own write (a file it
/// uploaded, evicted and opens again): it is asked of the primary, as is a download's lookup the
/// standby cannot answer (down, lagging): a file opens while the primary answers.
final class StandbyReads: ReplicaServer {
    let primary: any ReplicaServer
    let standby: any ReplicaServer
    /// The standby as messages name it (no password).
    let standbyName: String
    /// How long one read waits for the standby to reach `floor` before it throws.
    let lagWait: Duration
    private let floor = Mutex<Int64>(0)
    /// The standby was found to serve the primary's tree, and reads were fenced once against the
    /// primary (the store's anchor may come from it: `docfs init`).
    private let checked = Atomic<Bool>(false)

    init(primary: any ReplicaServer, standby: any ReplicaServer, standbyName: String, lagWait: Duration = .seconds(10)) {
        self.primary = primary
        self.standby = standby
        self.standbyName = standbyName
        self.lagWait = lagWait
    }

    /// `docfs init --remote-read`: the standby answers and serves the primary's tree.
    static func check(standby: PostgresURL, primary: PostgresURL, logger: Logger = Logger(label: "docfs.postgres")) async throws {
        try await RemoteDatabase.probe(standby, logger: logger)
        let (p, s) = (
            RemoteDatabase(url: primary, logger: logger, maximumConnections: 1, operationTimeout: .seconds(15)),
            RemoteDatabase(url: standby, logger: logger, maximumConnections: 1, operationTimeout: .seconds(15))
        )
        let reads = StandbyReads(primary: p, standby: s, standbyName: standby.withoutPassword)
        do {
            try await reads.checkTree()
            await reads.shutdown()
        } catch {
            await reads.shutdown()
            throw error
        }
    }

    /// The highest log end known so far (tests, status).
    var knownLogEnd: Int64 { floor.withLock { $0 } }

    // MARK: The fence

    func awaitCurrentReads() async throws {
        if !checked.load(ordering: .relaxed) { try await checkTree() }
        let head = try await primary.latestPosition()
        floor.withLock { $0 = max($0, head) }
        _ = try await standbyLogEnd()
    }

    /// A standby of another database would hand this replica another tree's rows.
    func checkTree() async throws {
        let mine = try await primary.treeID()
        let theirs = try await onStandby { try await self.standby.treeID() }
        guard mine == theirs else {
            throw RemoteError.invalid("the read standby \(standbyName) serves another tree (\(theirs ?? "none")) than the server (\(mine ?? "none"))")
        }
        checked.store(true, ordering: .relaxed)
    }

    /// The standby's log end once it reaches `floor` (raised to it), after waiting for its replay.
    private func standbyLogEnd() async throws -> Int64 {
        if !checked.load(ordering: .relaxed) { try await awaitCurrentReads() }
        let deadline = ContinuousClock.now + lagWait
        var pause = Duration.milliseconds(20)
        while true {
            let seen = try await onStandby { try await self.standby.latestPosition() }
            let wanted = floor.withLock { f -> Int64? in
                guard seen >= f else { return f }
                f = seen
                return nil
            }
            guard let wanted else { return seen }
            guard ContinuousClock.now < deadline else {
                throw RemoteError.unreachable(
                    "the read standby \(standbyName) has the change log to \(seen), the server to \(wanted): waiting for its replay")
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(500))
        }
    }

    /// A read of the standby once it has everything the replica knows of.
    private func fenced<T: Sendable>(_ read: @escaping @Sendable () async throws -> T) async throws -> T {
        _ = try await standbyLogEnd()
        return try await onStandby(read)
    }

    /// The standby's errors name it (`docfs status` then says which server is not answering).
    private func onStandby<T: Sendable>(_ read: @escaping @Sendable () async throws -> T) async throws -> T {
        do { return try await read() } catch let error as RemoteError {
            switch error {
            case .unreachable(let why): throw RemoteError.unreachable("the read standby \(standbyName): \(why)")
            case .authentication(let why): throw RemoteError.authentication("the read standby \(standbyName): \(why)")
            default: throw error
            }
        }
    }

    // MARK: Reads: the standby

    func rootID() async throws -> Int64 { try await fenced { try await self.standby.rootID() } }
    func item(_ id: Int64) async throws -> ServerItem? { try await fenced { try await self.standby.item(id) } }
    func items(_ ids: [Int64]) async throws -> [ServerItem] { try await fenced { try await self.standby.items(ids) } }
    func children(of parentID: Int64) async throws -> [ServerItem] { try await fenced { try await self.standby.children(of: parentID) } }
    func allItemIDs() async throws -> [Int64] { try await fenced { try await self.standby.allItemIDs() } }
    func changes(since anchor: Int64, limit: Int) async throws -> [RemoteChange] {
        try await fenced { try await self.standby.changes(since: anchor, limit: limit) }
    }
    func change(at position: Int64) async throws -> RemoteChange? { try await fenced { try await self.standby.change(at: position) } }
    func latestPosition() async throws -> Int64 { try await standbyLogEnd() }
    func logStart() async throws -> Int64 { try await fenced { try await self.standby.logStart() } }
    func layout() async throws -> String? { try await fenced { try await self.standby.layout() } }

    // A download's lookups: an open() should not fail while the primary answers. A recorded
    // hash and a manifest never change once recorded for their key (no fence needed: the standby
    // has the row or not yet); places can (gc moves blocks), so theirs is fenced. Whatever the
    // standby lacks or cannot answer now is asked of the primary.

    func expectedSHA256(key: String) async throws -> String? {
        if let found = try? await onStandby({ try await self.standby.expectedSHA256(key: key) }) { return found }
        return try await primary.expectedSHA256(key: key)
    }

    func manifest(key: String) async throws -> (size: Int64, blocks: [StoredBlock])? {
        let found = try? await onStandby { try await self.standby.manifest(key: key).map { Manifest(size: $0.size, blocks: $0.blocks) } }
        if let found { return (found.size, found.blocks) }
        return try await primary.manifest(key: key)
    }

    func places(of hashes: [String]) async throws -> [String: [StoredBlock]] {
        var found = (try? await fenced { try await self.standby.places(of: hashes) }) ?? [:]
        let missing = hashes.filter { found[$0]?.isEmpty ?? true }
        if !missing.isEmpty { found.merge(try await primary.places(of: missing)) { _, primary in primary } }
        return found
    }

    /// A tuple is not Sendable: the manifest crosses the closure as this.
    private struct Manifest: Sendable {
        var size: Int64
        var blocks: [StoredBlock]
    }

    // MARK: The primary: checks, writes, LISTEN

    func schemaVersion() async throws -> Int { try await primary.schemaVersion() }
    func treeID() async throws -> String? { try await primary.treeID() }
    /// Which blocks uploads may count on: the write path's, current.
    func knownBlocks(_ hashes: [String]) async throws -> Set<String> { try await primary.knownBlocks(hashes) }
    func recordPack(_ key: String, size: Int64, blocks: [StoredBlock], version: String?) async throws {
        try await primary.recordPack(key, size: size, blocks: blocks, version: version)
    }
    func recordManifests(_ manifests: [BlockManifest], donePacks: [String]) async throws -> Set<String> {
        try await primary.recordManifests(manifests, donePacks: donePacks)
    }
    func markBlockDamaged(hash: String, pack: String) async throws -> Bool { try await primary.markBlockDamaged(hash: hash, pack: pack) }
    func damagedContents() async throws -> [DamagedContent] { try await primary.damagedContents() }
    func recordUploadIntents(_ keys: [String]) async throws { try await primary.recordUploadIntents(keys) }
    func dropUploadIntents(_ keys: [String]) async throws { try await primary.dropUploadIntents(keys) }
    func hello() async throws { try await primary.hello() }
    func loginRefusal() async -> RemoteError? { await primary.loginRefusal() }
    func followChanges(listening: @Sendable () -> Void, notified: @escaping @Sendable (Int64) -> Void) async throws {
        try await primary.followChanges(listening: listening, notified: notified)
    }
    func apply(_ operations: [RemoteOperation]) async throws -> [Result<AppliedChange, RemoteError>] {
        try await primary.apply(operations)
    }

    func shutdown() async {
        await standby.shutdown()
        await primary.shutdown()
    }
}

extension ReplicaConfiguration {
    /// `docfs init --remote-read`: the standby answers and serves the primary's tree.
    package func checkStandby() async throws {
        guard let read else { return }
        try await StandbyReads.check(standby: read, primary: postgres)
    }
}
