import Foundation
import Synchronization
import DocFSProvider
import DocFSWire
@testable import DocFSStore
@testable import DocFSReplica

/// The replica's store as plain rows in memory (`ReplicaStore`): no SQLite, no journal, no
/// mount. Items by row (temporary rows for those made here until the server numbers them), an
/// outbox in order, contents as files in a folder of its own (the engine uploads from a path),
/// and what the engine noted (errors, conflicts, conflicted copies), for tests to read.
/// Every file of the server is kept here (every row reads as pinned: `IncomingSync.contentsNeeded` asks for all of them).
final class InMemoryReplicaStore: ReplicaStore {
    struct Fork: Equatable { var row: Int64; var copyRow: Int64; var name: String; var parentRow: Int64 }

    struct State {
        var items: [Int64: ServerItem] = [:]
        var outbox: [OutboxEntry] = []
        var nextSeq: Int64 = 1
        var nextTemporary = ReplicaRows.temporaryBase
        /// Temporary rows and the permanent identifiers the server gave them.
        var resolved: [Int64: Int64] = [:]
        var lastAppend: ContinuousClock.Instant?
        /// The replica's keys in `meta` (the anchor's, `SyncAnchor`).
        var meta: [String: String] = [:]
        /// Rows noted to be fetched again (`held-back`).
        var heldBack: Set<Int64> = []
        var writerWatch: (any OpenWriterWatch)?
        var schema = 0
        var errors: [Int64: String] = [:]
        var conflicts: [(row: Int64, message: String, summary: String)] = []
        var forks: [Fork] = []
        var hooks: ReplicaStoreHooks?
        /// Trashed items here: the folder each came from.
        var trashedFrom: [Int64: Int64] = [:]
        /// Items open for writing here: other replicas' changes to them wait (`holdForWriter`).
        var held: Set<Int64> = []
    }
    let state = Mutex(State())
    /// Contents on demand's side of the fake (`InMemoryReplicaStore+OnDemand`).
    let onDemandState = Mutex(OnDemandFakeState())
    /// One incoming apply or contents-on-demand pass at a time, as under the store's writer lock
    /// (the same `Mutex`, held across the body as `LocalStore.write` holds it).
    let writer = Mutex<Void>(())
    let url: URL
    let stagingDirectory: URL
    private let contents: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("docfs-fake-store-\(UUID().uuidString)")
        stagingDirectory = url.appendingPathComponent("staging")
        contents = url.appendingPathComponent("contents")
        for folder in [stagingDirectory, contents] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
    }

    func remove() { try? FileManager.default.removeItem(at: url) }

    // MARK: What a test does here (as the bridge's actions would)

    /// A new folder or file made here: a temporary row and its create in the outbox.
    @discardableResult
    func create(_ name: String, _ text: String? = nil, in parent: Int64 = ReplicaRows.root) throws -> Int64 {
        let kind: ItemKind = text == nil ? .folder : .file
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        let row = state.withLock { s -> Int64 in
            defer { s.nextTemporary += 1 }
            return s.nextTemporary
        }
        if let text { try Data(text.utf8).write(to: contentFile(row)) }
        state.withLock { s in
            s.items[row] = ServerItem(
                id: row, parentID: parent, name: name, kind: kind, size: Int64(text?.utf8.count ?? 0),
                creationTime: FileTime(totalNanoseconds: now),
                modificationTime: FileTime(totalNanoseconds: now))
        }
        append(
            .create, row: row, parent: parent, name: name, bytes: Int64(text?.utf8.count ?? 0),
            details: OutboxDetails(
                kind: kind,
                newItem: ReplicatedAttributes(
                    posixPermissions: 0o644,
                    creationTime: FileTime(totalNanoseconds: now),
                    modificationTime: FileTime(totalNanoseconds: now))))
        return row
    }

    /// New contents of a file here, based on content version `base`.
    func write(_ text: String, to row: Int64, base: UInt64) throws {
        let row = currentRow(row)
        try Data(text.utf8).write(to: contentFile(row))
        let now = FileTime(totalNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9))
        var details = OutboxDetails(
            changes: AttributeChanges(modificationTime: now),
            contentVersion: base + 1)
        details.baseVersion = base
        append(.content, row: row, bytes: Int64(text.utf8.count), details: details)
    }

    /// `docfs sync --retry` of an item set aside.
    func retry(_ row: Int64) {
        let hook = state.withLock { $0.hooks?.retry }
        hook?(currentRow(row))
    }

    func text(ofRow row: Int64) -> String? {
        guard let data = FileManager.default.contents(atPath: contentFile(currentRow(row)).path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    func incomingItem(_ row: Int64) -> ServerItem? { state.withLock { $0.items[row] } }
    var forks: [Fork] { state.withLock { $0.forks } }
    var conflictRows: [Int64] { state.withLock { $0.conflicts.map(\.row) } }

    func contentFile(_ row: Int64) -> URL { contents.appendingPathComponent(String(row)) }

    private func append(
        _ kind: OutboxEntry.Kind, row: Int64, parent: Int64? = nil, name: String? = nil, bytes: Int64 = 0,
        details: OutboxDetails
    ) {
        let wake = state.withLock { s -> (@Sendable () -> Void)? in
            s.outbox.append(
                OutboxEntry(
                    seq: s.nextSeq, id: UUID(), kind: kind, row: row, parent: parent, name: name, bytes: bytes,
                    enqueuedNs: Int64(Date().timeIntervalSince1970 * 1e9), details: details))
            s.nextSeq += 1
            s.lastAppend = .now
            return s.hooks?.wake
        }
        wake?()
    }

    // MARK: ReplicaStore: the replica

    func attach(_ hooks: ReplicaStoreHooks?) { state.withLock { $0.hooks = hooks } }
    func synchronizeSync() throws(ProviderError) {}

    // MARK: Items, read

    func currentRow(_ row: Int64) -> Int64 { state.withLock { $0.resolved[row] ?? row } }

    func path(ofRow row: Int64) -> String {
        state.withLock { s in
            var names: [String] = []
            var current = s.resolved[row] ?? row
            while current != ReplicaRows.root, let item = s.items[current], names.count < 256 {
                names.insert(item.name, at: 0)
                current = item.parentRow
            }
            return "/" + names.joined(separator: "/")
        }
    }

    /// Files here are never written in place.
    var liveDetaches: LiveDetaches? { nil }

    func contentURL(ofRow row: Int64) -> URL? {
        let file = contentFile(row)
        return FileManager.default.fileExists(atPath: file.path) ? file : nil
    }

    /// Nil: a conflicted copy takes the server's attributes.
    func item(ofRow row: Int64) -> Item? { nil }

    func typeChain(ofRow row: Int64) -> [String]? {
        guard let item = state.withLock({ $0.items[row] }) else { return nil }
        return item.kind == .folder ? ["public.folder", "public.item"] : ["public.data", "public.item"]
    }

    // MARK: The outbox

    func outboxEntries(limit: Int, skipping: Set<Int64>) throws(ProviderError) -> [OutboxEntry] {
        state.withLock { Array($0.outbox.filter { !skipping.contains($0.row) }.prefix(limit)) }
    }

    func completeOutbox(_ completions: [OutboxCompletion], refetch: [Int64]) throws(ProviderError) {
        var moves: [(Int64, Int64)] = []
        state.withLock { s in
            let done = Set(completions.map(\.entry.seq))
            s.outbox.removeAll { done.contains($0.seq) }
            for completion in completions {
                guard let permanent = completion.permanentRow, completion.entry.row != permanent else { continue }
                let temporary = completion.entry.row
                s.resolved[temporary] = permanent
                if var item = s.items.removeValue(forKey: temporary) {
                    item.row = permanent
                    s.items[permanent] = item
                }
                for (row, item) in s.items where item.parentRow == temporary { s.items[row]?.parentRow = permanent }
                for index in s.outbox.indices {
                    if s.outbox[index].row == temporary { s.outbox[index].row = permanent }
                    if s.outbox[index].parent == temporary { s.outbox[index].parent = permanent }
                }
                moves.append((temporary, permanent))
            }
            for completion in completions {
                guard let key = completion.contentKey else { continue }
                let row = s.resolved[completion.entry.row] ?? completion.entry.row
                s.items[row]?.contentKey = key
            }
        }
        for (from, to) in moves where FileManager.default.fileExists(atPath: contentFile(from).path) {
            try? FileManager.default.moveItem(at: contentFile(from), to: contentFile(to))
        }
        // A writer's hold follows its row, as in the store.
        if let watch = state.withLock({ $0.writerWatch }) { for (from, to) in moves { watch.renamed(from, to: to) } }
    }

    func forgetOutboxEntries(rows: [Int64]) throws(ProviderError) {
        let gone = Set(rows)
        state.withLock { $0.outbox.removeAll { gone.contains($0.row) } }
    }

    func outboxWaiting(rows: Set<Int64>) -> [Int64: (count: Int, latest: Int64)] {
        state.withLock { s in
            var waiting: [Int64: (count: Int, latest: Int64)] = [:]
            for entry in s.outbox where rows.contains(entry.row) {
                let now = waiting[entry.row] ?? (0, 0)
                waiting[entry.row] = (now.count + 1, max(now.latest, entry.seq))
            }
            return waiting
        }
    }

    func outboxEntryIDs(among ids: [UUID]) -> Set<UUID> {
        state.withLock { s in Set(s.outbox.map(\.id)).intersection(ids) }
    }

    func outboxHasEntry(id: UUID) -> Bool { state.withLock { $0.outbox.contains { $0.id == id } } }

    var outboxCounts: (pending: Int, pendingBytes: Int64) {
        state.withLock { ($0.outbox.count, $0.outbox.reduce(0) { $0 + $1.bytes }) }
    }

    var outboxQuietFor: Duration? { state.withLock { $0.lastAppend.map { ContinuousClock.now - $0 } } }

    func outboxIdle() {}

    // MARK: Sync state shown to the user

    func syncError(of row: Int64) -> String? { state.withLock { $0.errors[row] } }

    func setSyncError(_ message: String?, row: Int64) { state.withLock { $0.errors[row] = message } }

    func noteConflict(_ message: String, row: Int64, summary: String) {
        state.withLock { $0.conflicts.append((row, message, summary)) }
    }

    var conflictSummary: (count: Int, recent: [String]) {
        state.withLock { ($0.conflicts.count, $0.conflicts.suffix(5).map(\.summary)) }
    }

    var serverSchemaVersion: Int { state.withLock { $0.schema } }
    func noteServerSchema(_ version: Int) { state.withLock { $0.schema = version } }

    // MARK: Incoming changes

    func replicaMeta(_ keys: [String]) throws(ProviderError) -> [String: String] {
        state.withLock { s in s.meta.filter { keys.contains($0.key) } }
    }

    func setReplicaMeta(_ values: [String: String], removing: [String]) throws(ProviderError) {
        state.withLock { s in
            s.meta.merge(values) { $1 }
            for key in removing { s.meta[key] = nil }
        }
    }

    /// Every file is kept here: all are pinned.
    func isPinnedRow(_ row: Int64) -> Bool { true }

    func contentVersion(ofRow row: Int64) -> UInt64? {
        state.withLock { s in s.items[row].map { UInt64($0.contentVersion) } }
    }

    /// The real incoming apply (`IncomingApply`) runs over the rows here (`Edit`), one at a time.
    func editIncoming<T>(_ body: (any IncomingTreeEdit) throws(ProviderError) -> T) throws(ProviderError) -> T? {
        try writer.withLock { _ throws(ProviderError) -> T in try body(Edit(store: self)) }
    }

    func addServerItem(_ server: ServerItem, contentFile: String? = nil) throws(ProviderError) {
        state.withLock { s in
            var item = ServerItem(id: server.row, parentID: server.parentRow, name: server.name, kind: server.kind)
            (item.size, item.creationTime, item.modificationTime) = (server.size, server.creationTime, server.modificationTime)
            (item.ownerID, item.groupID, item.posixPermissions) = (server.ownerID, server.groupID, server.posixPermissions)
            (item.symlinkTargetPath, item.contentKey) = (server.symlinkTargetPath, server.contentKey)
            item.contentVersion = server.contentVersion
            s.items[server.row] = item
        }
        if let file = contentFile { try? FileManager.default.copyItem(atPath: file, toPath: self.contentFile(server.row).path) }
    }

    func permanentIdentities() throws(ProviderError) -> [Int64: (kind: ItemKind, creationTime: FileTime)] {
        state.withLock { s in
            s.items.filter { ReplicaRows.isPermanent($0.key) }.mapValues { ($0.kind, $0.creationTime) }
        }
    }

    func permanentRows() throws(ProviderError) -> [Int64] {
        state.withLock { $0.items.keys.filter(ReplicaRows.isPermanent).sorted() }
    }

    func putBack(_ lost: LostItem, in folder: [String], as name: String) async throws(ProviderError) -> PutBackResult {
        let found = state.withLock { s -> (parent: Int64?, taken: ServerItem?) in
            func child(_ name: String, of parent: Int64) -> (row: Int64, item: ServerItem)? {
                s.items.first { $0.value.parentRow == parent && $0.value.name == name && !$0.value.deleted && !$0.value.trashed }
                    .map { ($0.key, $0.value) }
            }
            var current = ReplicaRows.root
            for part in folder {
                guard let next = child(part, of: current), next.item.kind == .folder else { return (nil, nil) }
                current = next.row
            }
            return (current, child(name, of: current)?.item)
        }
        guard let parent = found.parent else { return .noFolder }
        if let taken = found.taken { return .nameTaken(byFolder: taken.kind == .folder) }
        let text = lost.contents.flatMap { FileManager.default.contents(atPath: $0) }.map { String(decoding: $0, as: UTF8.self) }
        guard lost.kind == .folder || (lost.kind == .file && text != nil) else {
            throw ProviderError(.invalidArgument, "the fake store puts back folders and files with contents")
        }
        do {
            return .made(row: try create(name, lost.kind == .folder ? nil : text, in: parent))
        } catch {
            throw ProviderError(.noSuchItem, "\(error)")
        }
    }

    // MARK: What the server decided otherwise

    func dropRefusedName(row: Int64) throws(ProviderError) -> String? { nil }

    // MARK: Open writers

    func heldBackRows() -> [Int64] { state.withLock { $0.heldBack.sorted() } }
    func clearHeldBack(_ rows: [Int64]) { state.withLock { $0.heldBack.subtract(rows) } }

    func watchOpenWriters(_ make: () -> any OpenWriterWatch) -> (any OpenWriterWatch)? {
        state.withLock { s in
            if let watch = s.writerWatch { return watch }
            let made = make()
            s.writerWatch = made
            return made
        }
    }

    func folderRows(above row: Int64) -> [Int64] {
        state.withLock { s in
            var up: [Int64] = []
            var cursor = s.items[s.resolved[row] ?? row]?.parentRow
            while let current = cursor, current > ReplicaRows.trash {
                up.append(current)
                cursor = s.items[current]?.parentRow
            }
            return up
        }
    }

    /// What the bridge does when a file is opened or closed for writing.
    func openForWriting(_ row: Int64) { state.withLock { $0.writerWatch }?.opened(row) }
    func closeForWriting(_ row: Int64) { state.withLock { $0.writerWatch }?.closed(row) }
    /// What the store's incoming apply asks of a change of `row` (and notes, as the store does).
    func keepAsideForWriter(_ row: Int64) -> Bool {
        guard let watch = state.withLock({ $0.writerWatch }), watch.holdForWriter(row) else { return false }
        state.withLock { _ = $0.heldBack.insert(row) }
        return true
    }
}
