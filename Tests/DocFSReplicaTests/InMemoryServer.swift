import Foundation
import Synchronization
import DocFSProvider
import DocFSWire
@testable import DocFSRemote
@testable import DocFSReplica

/// The server's metadata in memory, with the rules of `RemoteDatabase` the sync engine relies
/// on: operations idempotent by id, content versions compared and swapped, names suffixed when
/// taken, a change log with positions, notifications. Faults are injected per call.
final class InMemoryServer: ReplicaServer {
    struct State {
        var items: [Int64: ServerItem] = [:]
        var nextID: Int64 = 10
        var log: [RemoteChange] = []
        var operations: [UUID: (kind: RemoteChange.Kind, change: AppliedChange)] = [:]
        var layoutJSON: String?
        var intents: Set<String> = []
        var blocks: [String: StoredBlock] = [:]
        var manifests: [String: BlockManifest] = [:]
        /// Blocks marked damaged (docfs_blocks.damaged_ns): not "had" for dedup.
        var damaged: Set<String> = []
        var dropAfterLookup: String?
        /// SHA-256 recorded per object key (as docfs_versions.sha256).
        var hashes: [String: String] = [:]
        /// Errors the next calls throw (any method), in order.
        var failures: [any Error] = []
        /// Names the server refuses for a reason of its own (`RemoteError.rejected`).
        var rejectedNames: Set<String> = []
        /// Names containing this the server refuses as invalid (`RemoteError.invalid`).
        var invalidNamesContaining: String?
        var listeners: [UUID: @Sendable (Int64) -> Void] = [:]
        /// The next operation is applied and its answer lost (the connection broke after commit).
        var loseNextAnswer = false
        /// The next manifests are recorded and the answer lost; every call then fails (the server
        /// unreachable) until `reachable()`.
        var downAfterNextManifests = false
        var down = false
        /// The next call of this name waits until `releaseHold()` (a content version after its
        /// upload read the file; the end of a chunk after its commit).
        var holdNext: String?
        /// Calls of that name let through before the one held.
        var holdSkipping = 0
        var held: CheckedContinuation<Void, Never>?
        var calls: [String: Int] = [:]
        /// Change positions written by hand (`plantChange`): the server's own go on from the
        /// last of its own, as a sequence does.
        var plantedPositions: Set<Int64> = []
    }
    let state = Mutex(State())
    static let rootID: Int64 = 1

    init() {
        state.withLock { s in
            s.items[Self.rootID] = ServerItem(id: Self.rootID, parentID: nil, name: "", kind: .folder, posixPermissions: 0o755)
        }
    }

    /// The server's data now, as `pg_dump` takes it; `restore` puts it back, as `pg_restore`
    /// does (identifiers and change log positions rewind with it).
    func backup() -> State { state.withLock { $0 } }
    func restore(_ backup: State) {
        state.withLock { s in
            s.items = backup.items
            s.nextID = backup.nextID
            s.log = backup.log
            s.operations = backup.operations
            s.intents = backup.intents
            s.blocks = backup.blocks
            s.manifests = backup.manifests
            s.hashes = backup.hashes
        }
    }

    func failNext(_ errors: any Error...) { state.withLock { $0.failures += errors } }
    func loseNextAnswer() { state.withLock { $0.loseNextAnswer = true } }
    func goDownAfterNextManifests() { state.withLock { $0.downAfterNextManifests = true } }
    var isDown: Bool { state.withLock { $0.down } }
    func holdNext(_ call: String, skipping: Int = 0) {
        state.withLock {
            $0.holdNext = call; $0.holdSkipping = skipping
        }
    }
    var isHolding: Bool { state.withLock { $0.held != nil } }
    func releaseHold() {
        state.withLock { s in
            defer { s.held = nil }; return s.held
        }?.resume()
    }
    func reachable() { state.withLock { $0.down = false } }
    func reject(name: String) { state.withLock { _ = $0.rejectedNames.insert(name) } }
    func refuseAsInvalid(namesContaining part: String?) { state.withLock { $0.invalidNamesContaining = part } }
    func allow(name: String) { state.withLock { _ = $0.rejectedNames.remove(name) } }
    func calls(_ name: String) -> Int { state.withLock { $0.calls[name] ?? 0 } }

    /// The live tree as "path" → item (folders end in "/").
    func tree() -> [String: ServerItem] {
        state.withLock { s in
            var out: [String: ServerItem] = [:]
            func walk(_ id: Int64, _ prefix: String) {
                for item in s.items.values where item.parentID == id && !item.deleted && item.trashTime == nil {
                    let path = prefix + item.name + (item.kind == .folder ? "/" : "")
                    out[path] = item
                    if item.kind == .folder { walk(item.id, path) }
                }
            }
            walk(Self.rootID, "")
            return out
        }
    }

    // MARK: Reading

    /// Waits here when `holdNext(call)` asked for it, until `releaseHold()`.
    private func pauseIfHeld(_ call: String) async {
        let holds = state.withLock { s -> Bool in
            guard s.holdNext == call else { return false }
            if s.holdSkipping > 0 { s.holdSkipping -= 1; return false }
            s.holdNext = nil
            return true
        }
        if holds {
            await withCheckedContinuation { (held: CheckedContinuation<Void, Never>) in state.withLock { $0.held = held } }
        }
    }

    private func enter(_ call: String) throws {
        try state.withLock { s in
            s.calls[call, default: 0] += 1
            if s.down { throw RemoteError.unreachable("the server is down (test)") }
            if !s.failures.isEmpty { throw s.failures.removeFirst() }
        }
    }

    func schemaVersion() async throws -> Int { try enter("schemaVersion"); return RemoteSchema.latest }
    func treeID() async throws -> String? { try enter("treeID"); return nil }
    func rootID() async throws -> Int64 { try enter("rootID"); return Self.rootID }
    func item(_ id: Int64) async throws -> ServerItem? { try enter("item"); return state.withLock { $0.items[id] } }
    func items(_ ids: [Int64]) async throws -> [ServerItem] {
        try enter("items")
        return state.withLock { s in ids.compactMap { s.items[$0] } }
    }
    func children(of parentID: Int64) async throws -> [ServerItem] {
        try enter("children")
        return state.withLock { s in
            s.items.values.filter { $0.parentID == parentID && !$0.deleted && $0.trashTime == nil }.sorted { $0.name < $1.name }
        }
    }
    func allItemIDs() async throws -> [Int64] { try enter("allItemIDs"); return state.withLock { Array($0.items.keys) } }
    func changes(since anchor: Int64, limit: Int) async throws -> [RemoteChange] {
        try enter("changes")
        return state.withLock { Array($0.log.filter { $0.position > anchor }.prefix(limit)) }
    }
    func change(at position: Int64) async throws -> RemoteChange? {
        try enter("change")
        return state.withLock { $0.log.first { $0.position == position } }
    }
    func latestPosition() async throws -> Int64 { try enter("latestPosition"); return state.withLock { $0.log.last?.position ?? 0 } }
    func logStart() async throws -> Int64 { try enter("logStart"); return state.withLock { $0.log.first?.position ?? 1 } }
    func layout() async throws -> String? { try enter("layout"); return state.withLock { $0.layoutJSON } }
    func expectedSHA256(key: String) async throws -> String? {
        try enter("expectedSHA256")
        return state.withLock { $0.hashes[key] }
    }

    func knownBlocks(_ hashes: [String]) async throws -> Set<String> {
        try enter("knownBlocks")
        await pauseIfHeld("knownBlocks")
        return state.withLock { s in
            let known = Set(hashes.filter { s.blocks[$0] != nil && !s.damaged.contains($0) })
            if let hash = s.dropAfterLookup, known.contains(hash) {
                s.blocks[hash] = nil
                s.dropAfterLookup = nil
            }
            return known
        }
    }
    func recordPack(_ key: String, size: Int64, blocks: [StoredBlock], version: String?) async throws {
        try enter("recordPack")
        state.withLock { s in
            // As docfs_record_pack: a damaged block takes the new place and loses its mark.
            for var block in blocks where s.blocks[block.hash] == nil || s.damaged.contains(block.hash) {
                block.version = version
                s.blocks[block.hash] = block
                s.damaged.remove(block.hash)
            }
        }
    }
    func recordManifests(_ manifests: [BlockManifest], donePacks: [String]) async throws -> Set<String> {
        try enter("recordManifests")
        return try state.withLock { s in
            let missing = Set(manifests.flatMap(\.hashes).filter { s.blocks[$0] == nil || s.damaged.contains($0) })
            guard missing.isEmpty else { return missing }
            for manifest in manifests where s.manifests[manifest.key] == nil { s.manifests[manifest.key] = manifest }
            s.intents.formUnion(manifests.map(\.key))
            s.intents.subtract(donePacks)
            if s.downAfterNextManifests && !manifests.isEmpty {
                s.downAfterNextManifests = false
                s.down = true
                throw RemoteError.unreachable("the connection broke after the manifests were recorded (test)")
            }
            return []
        }
    }
    /// Blocks in their packs and manifests naming them, as a replica records them (tests' setup).
    func recordBlocks(_ blocks: [StoredBlock], manifests: [BlockManifest]) async throws -> Set<String> {
        for pack in Set(blocks.map(\.pack)) {
            try await recordPack(
                pack, size: blocks.filter { $0.pack == pack }.map { $0.offset + $0.length }.max() ?? 0,
                blocks: blocks.filter { $0.pack == pack }, version: nil)
        }
        return manifests.isEmpty ? [] : try await recordManifests(manifests, donePacks: [])
    }
    func manifest(key: String) async throws -> (size: Int64, blocks: [StoredBlock])? {
        try enter("manifest")
        return state.withLock { s in
            s.manifests[key].map { m in (m.size, m.hashes.compactMap { s.blocks[$0] }) }
        }
    }
    /// One place per block here: the one `manifest` gives.
    func places(of hashes: [String]) async throws -> [String: [StoredBlock]] {
        try enter("places")
        return state.withLock { s in
            var out: [String: [StoredBlock]] = [:]
            for hash in hashes { if let block = s.blocks[hash] { out[hash] = [block] } }
            return out
        }
    }
    func markBlockDamaged(hash: String, pack: String) async throws -> Bool {
        try enter("markBlockDamaged")
        return state.withLock { s in
            guard s.blocks[hash]?.pack == pack else { return false }
            s.damaged.insert(hash)
            return true
        }
    }
    /// Asked by an idle engine: it takes no failure queued for the operations a test drives.
    func damagedContents() async throws -> [DamagedContent] {
        try state.withLock { s in
            s.calls["damagedContents", default: 0] += 1
            if s.down { throw RemoteError.unreachable("the server is down (test)") }
            return s.items.values.sorted { $0.id < $1.id }.compactMap { item -> DamagedContent? in
                guard !item.deleted, let key = item.contentKey, let manifest = s.manifests[key] else { return nil }
                let hashes = Set(manifest.hashes).intersection(s.damaged)
                return hashes.isEmpty ? nil : DamagedContent(itemID: item.id, key: key, hashes: hashes.sorted())
            }
        }
    }
    func isDamaged(_ hash: String) -> Bool { state.withLock { $0.damaged.contains(hash) } }
    /// Forgets a block right after the next `knownBlocks` answered it known (as gc would
    /// between a replica's question and its record): that replica must send it again.
    func dropBlockAfterNextLookup(_ hash: String) { state.withLock { $0.dropAfterLookup = hash } }

    func recordUploadIntents(_ keys: [String]) async throws {
        try enter("recordUploadIntents")
        state.withLock { $0.intents.formUnion(keys) }
    }
    func dropUploadIntents(_ keys: [String]) async throws {
        await pauseIfHeld("dropUploadIntents")
        try enter("dropUploadIntents")
        state.withLock { $0.intents.subtract(keys) }
    }
    func hello() async throws { try enter("hello") }
    func loginRefusal() async -> RemoteError? { nil }
    func shutdown() async {}

    func followChanges(listening: @Sendable () -> Void, notified: @escaping @Sendable (Int64) -> Void) async throws {
        let id = UUID()
        state.withLock { $0.listeners[id] = notified }
        defer { _ = state.withLock { $0.listeners.removeValue(forKey: id) } }
        listening()
        // Until cancelled (an AsyncStream's iteration ends then): notifications arrive through
        // `listeners`, called by the operations themselves.
        let (parked, continuation) = AsyncStream<Never>.makeStream()
        for await _ in parked {}
        continuation.finish()
    }

    // MARK: Operations

    /// As `docfs_apply`: in order, stopping at the first refused (its error the last answer).
    /// Each applies at once here (a failure of the call leaves those before it applied: they
    /// are answered as replays when sent again).
    func apply(_ operations: [RemoteOperation]) async throws -> [Result<AppliedChange, RemoteError>] {
        var answers: [Result<AppliedChange, RemoteError>] = []
        for operation in operations {
            do {
                answers.append(.success(try await applyOne(operation)))
            } catch let error as RemoteError {
                switch error {
                case .unreachable, .server, .authentication, .schemaTooNew, .schemaTooOld, .notPermitted: throw error
                default: answers.append(.failure(error))
                }
                break
            }
        }
        await pauseIfHeld("applied")
        return answers
    }

    func resolve(_ target: RemoteOperation.Target) throws -> Int64 {
        switch target {
        case .item(let id): return id
        case .createdBy(let operationID):
            guard let created = state.withLock({ $0.operations[operationID] }), created.kind == .create || created.kind == .link else {
                throw RemoteError.invalid("its folder or the item itself was never created on the server")
            }
            return created.change.itemID
        }
    }

    private func applyOne(_ operation: RemoteOperation) async throws -> AppliedChange {
        let id = operation.id
        switch operation.change {
        case let .create(parent, name, kind, attributes, content):
            return try await create(
                operationID: id, parentID: try resolve(parent), name: name, kind: kind, attributes: attributes,
                content: content)
        case let .content(item, expectedVersion, content, modificationTime):
            return try await newContent(
                operationID: id, itemID: try resolve(item), expectedVersion: expectedVersion, content: content,
                modificationTime: modificationTime)
        case let .move(item, toParent, name, expectedParentID, expectedName, types):
            return try await move(
                operationID: id, itemID: try resolve(item), toParentID: try resolve(toParent), name: name,
                expectedParentID: expectedParentID, expectedName: expectedName, types: types)
        case let .delete(item, expectedContentVersion):
            return try await delete(operationID: id, itemID: try resolve(item), expectedContentVersion: expectedContentVersion)
        case let .trash(item):
            return try await trash(operationID: id, itemID: try resolve(item))
        case let .untrash(item, toParent, name, types):
            return try await untrash(
                operationID: id, itemID: try resolve(item), toParentID: try resolve(toParent), name: name,
                types: types)
        case let .attributes(item, changes):
            return try await attributes(operationID: id, itemID: try resolve(item), changes: changes)
        case let .link(item, parent, name):
            return try await link(operationID: id, itemID: try resolve(item), parentID: try resolve(parent), name: name)
        case let .unlink(name):
            return try await unlink(operationID: id, nameID: try resolve(name))
        case let .moveName(name, toParent, newName, expectedParentID, expectedName):
            return try await move(
                operationID: id, itemID: try resolve(name), toParentID: try resolve(toParent), name: newName,
                expectedParentID: expectedParentID, expectedName: expectedName, types: nil, kind: .moveName)
        }
    }

    typealias Body = (inout State, Int64) throws -> (itemID: Int64, name: String?)

    /// One operation: a replay answers what it did the first time; else the body runs, the
    /// item's versions are read back and the change is logged and announced. `target`: the row
    /// an operation other than create and link changes, which must be a name row for the name
    /// operations and an item's own row for the others (as `docfs_apply_one`).
    func apply(_ call: String, _ operationID: UUID, _ kind: RemoteChange.Kind, target: Int64? = nil, _ body: Body) throws -> AppliedChange {
        try enter(call)
        let (change, listeners) = try state.withLock { s -> (AppliedChange, [@Sendable (Int64) -> Void]) in
            if let prior = s.operations[operationID] {
                guard prior.kind == kind else { throw RemoteError.operationReused(operationID, previousKind: prior.kind.rawValue) }
                var replay = prior.change
                replay.replayed = true
                replay.name = s.items[replay.itemID]?.name
                return (replay, [])
            }
            let position = Self.nextPosition(s)
            // A name row takes the name operations and (schema 13) trash and untrash; an item the others.
            if let target, let row = s.items[target],
                row.linkOf != nil ? ![.unlink, .moveName, .trash, .untrash].contains(kind) : [.unlink, .moveName].contains(kind)
            {
                throw RemoteError.invalid(
                    row.linkOf == nil
                        ? "item \(target) is an item, not one of its further names (a \(kind.rawValue) takes a name)"
                        : "item \(target) is a further name of item \(row.linkOf!) (a \(kind.rawValue) takes an item)")
            }
            let (id, _) = try body(&s, position)
            let item = s.items[id]!
            // After what the body logged itself (a name passed on by a delete).
            let logged = Self.nextPosition(s)
            Self.log(
                &s,
                RemoteChange(
                    position: logged, itemID: id, kind: kind, operationID: operationID,
                    contentVersion: item.contentVersion, metadataVersion: item.metadataVersion, atNs: position))
            let change = AppliedChange(
                itemID: id, contentVersion: item.contentVersion, metadataVersion: item.metadataVersion,
                position: logged, replayed: false, name: item.name)
            s.operations[operationID] = (kind, change)
            return (change, Array(s.listeners.values))
        }
        for listener in listeners { listener(change.position) }
        if !change.replayed,
            state.withLock({ s in
                defer { s.loseNextAnswer = false }; return s.loseNextAnswer
            })
        {
            throw RemoteError.unreachable("the connection broke before the answer (injected)")
        }
        return change
    }

    static func nextPosition(_ s: State) -> Int64 {
        (s.log.last { !s.plantedPositions.contains($0.position) }?.position ?? 0) + 1
    }

    /// The log stays in position order (a planted position may be past the server's own).
    static func log(_ s: inout State, _ change: RemoteChange) {
        s.log.insert(change, at: s.log.firstIndex { $0.position > change.position } ?? s.log.endIndex)
    }

    // MARK: Rows written by hand (the owner, an older server): none of the server's rules apply

    /// `item` as it is (any name, size, key), with a change naming it, announced.
    func plant(_ item: ServerItem) {
        let (position, listeners) = state.withLock { s -> (Int64, [@Sendable (Int64) -> Void]) in
            // (The server's own identifiers go on from theirs: tests plant from 100 up.)
            s.items[item.id] = item
            let position = Self.nextPosition(s)
            Self.log(
                &s,
                RemoteChange(
                    position: position, itemID: item.id, kind: .create, operationID: UUID(),
                    contentVersion: item.contentVersion, metadataVersion: item.metadataVersion, atNs: position))
            return (position, Array(s.listeners.values))
        }
        for listener in listeners { listener(position) }
    }

    /// A file row by hand: `name` under `parent`, contents at `key` (nil: none) of `size` bytes.
    static func fileRow(
        id: Int64, name: String, parent: Int64 = rootID, kind: ItemKind = .file, size: Int64 = 0,
        key: String? = nil, target: String? = nil, contentVersion: Int64 = 1
    ) -> ServerItem {
        let one = FileTime(totalNanoseconds: 1)
        return ServerItem(
            id: id, parentID: parent, name: name, kind: kind, size: size, creationTime: one, modificationTime: one,
            changeTime: one, accessTime: one, posixPermissions: kind == .folder ? 0o755 : 0o644,
            symlinkTargetPath: target, contentKey: key, contentVersion: contentVersion)
    }

    /// Block rows and a manifest as they are (no length, hash or sum checked).
    func plant(blocks: [StoredBlock], manifest: BlockManifest) {
        state.withLock { s in
            for block in blocks { s.blocks[block.hash] = block }
            s.manifests[manifest.key] = manifest
        }
    }

    /// A change at `position` naming `itemID`, announced.
    func plantChange(at position: Int64, itemID: Int64) {
        let listeners = state.withLock { s -> [@Sendable (Int64) -> Void] in
            s.plantedPositions.insert(position)
            Self.log(
                &s,
                RemoteChange(
                    position: position, itemID: itemID, kind: .attributes, operationID: UUID(),
                    contentVersion: 1, metadataVersion: 1, atNs: position))
            return Array(s.listeners.values)
        }
        for listener in listeners { listener(position) }
    }

    static func live(_ s: State, _ id: Int64) throws -> ServerItem {
        guard let item = s.items[id], !item.deleted else { throw RemoteError.notFound(itemID: id) }
        return item
    }

    static func folder(_ s: State, _ id: Int64) throws {
        guard let item = s.items[id], !item.deleted, item.trashTime == nil, item.kind == .folder, item.linkOf == nil else {
            throw RemoteError.invalid("item \(id) is not a live folder")
        }
    }

    /// `name`, or "BASE 2.EXT", "BASE 3.EXT", … cut to 255 bytes (as `RemoteDatabase.freeName`).
    static func freeName(_ s: State, _ name: String, isFolder: Bool, parent: Int64, except: Int64?) -> String {
        let taken = Set(s.items.values.filter { $0.parentID == parent && !$0.deleted && $0.trashTime == nil && $0.id != except }.map(\.name))
        return ItemNames.unique(name, isFolder: isFolder) { taken.contains($0) }
    }

    /// The real server's name check (`RemoteDatabase.checkName`: over 255 bytes is refused), and
    /// names a test has the server refuse as invalid (an item-level refusal, as that check's).
    func checkRejected(_ s: State, _ name: String) throws {
        if s.rejectedNames.contains(name) { throw RemoteError.rejected("a trigger of the server's own refuses \"\(name)\"") }
        try RemoteDatabase.checkName(name)
        if let part = s.invalidNamesContaining, name.contains(part) { throw RemoteError.invalid("\"\(name)\" is not a valid item name") }
    }

    private func create(
        operationID: UUID, parentID: Int64, name: String, kind: ItemKind,
        attributes: ReplicatedAttributes, content: RemoteContent?
    ) async throws -> AppliedChange {
        try apply("createItem", operationID, .create) { s, position in
            try checkRejected(s, name)
            try Self.folder(s, parentID)
            let id = s.nextID
            s.nextID += 1
            if let content, let hash = content.sha256 { s.hashes[content.key] = hash }
            let free = Self.freeName(s, name, isFolder: kind == .folder, parent: parentID, except: nil)
            s.items[id] = ServerItem(
                id: id, parentID: parentID, name: free, kind: kind, size: content?.size ?? 0,
                creationTime: attributes.creationTime,
                modificationTime: attributes.modificationTime,
                changeTime: FileTime(totalNanoseconds: position),
                accessTime: attributes.modificationTime, ownerID: attributes.ownerID,
                groupID: attributes.groupID, posixPermissions: attributes.posixPermissions & 0o7777,
                tagData: ServerTags.data(ServerTags.array(attributes.tagData)),
                symlinkTargetPath: attributes.symlinkTargetPath,
                contentKey: content?.key)
            return (id, free)
        }
    }

    private func newContent(
        operationID: UUID, itemID: Int64, expectedVersion: Int64, content: RemoteContent,
        modificationTime: FileTime
    ) async throws -> AppliedChange {
        await pauseIfHeld("newContentVersion")
        return try apply("newContentVersion", operationID, .content, target: itemID) { s, position in
            var item = try Self.live(s, itemID)
            guard item.kind == .file else { throw RemoteError.invalid("item \(itemID) is not a file") }
            guard item.contentVersion == expectedVersion else {
                throw RemoteError.versionConflict(itemID: itemID, expected: expectedVersion, current: item.contentVersion)
            }
            item.contentKey = content.key
            item.size = content.size
            if let hash = content.sha256 { s.hashes[content.key] = hash }
            item.contentVersion += 1
            item.metadataVersion += 1
            item.modificationTime = modificationTime
            item.changeTime = FileTime(totalNanoseconds: position)
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }

    private func move(
        operationID: UUID, itemID: Int64, toParentID: Int64, name: String, expectedParentID: Int64?,
        expectedName: String?, types: [String]?, kind: RemoteChange.Kind = .move
    ) async throws -> AppliedChange {
        try apply(kind == .move ? "moveItem" : "moveName", operationID, kind, target: itemID) { s, position in
            try checkRejected(s, name)
            var item = try Self.live(s, itemID)
            if let expectedParentID, let expectedName, item.parentID != expectedParentID || item.name != expectedName || item.trashTime != nil {
                throw RemoteError.movedElsewhere(itemID: itemID)
            }
            try Self.folder(s, toParentID)
            var up: Int64? = toParentID
            while let id = up {
                if id == itemID { throw RemoteError.invalid("item \(itemID) cannot move into itself or its own subfolder") }
                up = s.items[id]?.parentID
            }
            item.name = Self.freeName(s, name, isFolder: item.kind == .folder, parent: toParentID, except: itemID)
            item.parentID = toParentID
            item.metadataVersion += 1
            item.changeTime = FileTime(totalNanoseconds: position)
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }

    private func delete(operationID: UUID, itemID: Int64, expectedContentVersion: Int64?) async throws -> AppliedChange {
        try apply("deleteItem", operationID, .delete, target: itemID) { s, position in
            var item = try Self.live(s, itemID)
            if let expectedContentVersion, item.kind == .file, item.contentVersion != expectedContentVersion {
                throw RemoteError.versionConflict(itemID: itemID, expected: expectedContentVersion, current: item.contentVersion)
            }
            // An item with further names loses the name it had: it takes its oldest other's place.
            if item.kind != .folder, Self.passName(&s, of: itemID, operationID: operationID, at: position) { return (itemID, nil) }
            if item.kind == .folder, s.items.values.contains(where: { $0.parentID == itemID && !$0.deleted }) {
                throw RemoteError.notEmpty(itemID: itemID)
            }
            item.deleted = true
            item.metadataVersion += 1
            item.changeTime = FileTime(totalNanoseconds: position)
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }

    private func trash(operationID: UUID, itemID: Int64) async throws -> AppliedChange {
        try apply("trashItem", operationID, .trash, target: itemID) { s, position in
            var item = try Self.live(s, itemID)
            item.trashTime = item.trashTime ?? FileTime(totalNanoseconds: position)
            item.metadataVersion += 1
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }

    private func untrash(operationID: UUID, itemID: Int64, toParentID: Int64, name: String, types: [String]?) async throws -> AppliedChange {
        try apply("untrashItem", operationID, .untrash, target: itemID) { s, position in
            var item = try Self.live(s, itemID)
            guard item.trashTime != nil else { throw RemoteError.invalid("item \(itemID) is not in the trash") }
            try Self.folder(s, toParentID)
            item.name = Self.freeName(s, name, isFolder: item.kind == .folder, parent: toParentID, except: itemID)
            item.parentID = toParentID
            item.trashTime = nil
            item.metadataVersion += 1
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }

    private func attributes(operationID: UUID, itemID: Int64, changes: AttributeChanges) async throws -> AppliedChange {
        try apply("setAttributes", operationID, .attributes, target: itemID) { s, position in
            var item = try Self.live(s, itemID)
            if let uid = changes.ownerID { item.ownerID = uid }
            if let gid = changes.groupID { item.groupID = gid }
            if let mode = changes.posixPermissions { item.posixPermissions = mode & 0o7777 }
            if let created = changes.creationTime { item.creationTime = created }
            if let modified = changes.modificationTime { item.modificationTime = modified }
            if let tagData = changes.tagData { item.tagData = ServerTags.data(ServerTags.array(tagData)) }
            if let rank = changes.favoriteRank { item.favoriteRank = rank }
            item.metadataVersion += 1
            item.changeTime = FileTime(totalNanoseconds: position)
            s.items[itemID] = item
            return (itemID, item.name)
        }
    }
}
