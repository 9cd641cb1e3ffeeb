import Foundation
import DocFSProvider
import DocFSWire
import DocFSRemote
import DocFSStore

/// A chunk of the outbox as the server takes it: its changes go in one call (`apply`, one round
/// trip); the server applies them in order and stops at the first it refuses. What it refused is
/// decided here (a conflicted copy, the item set aside or following the server), then the rest
/// are planned again and go in the next call: every change is decided in order, as if sent one
/// by one.
extension SyncEngine {
    /// What the chunk's changes came to so far.
    struct ChunkProgress {
        var completions: [OutboxCompletion] = []
        /// Permanent identifiers the chunk's creates got, by outbox row.
        var assigned: [Int64: Int64] = [:]
        /// Rows whose create is in the call being put together (later changes name that create).
        var created: [Int64: UUID] = [:]
        var refresh: [Int64] = []
        /// What stopped the chunk (the server unreachable, a retry needed): the rest waits.
        var failure: (any Error)?
    }

    /// A change sent, with what its answer is decided against.
    struct Sent {
        var entry: OutboxEntry
        var operation: RemoteOperation
        var index: Int
        var content: RemoteContent?
        /// The item's row as the change was planned (a delete's bookkeeping).
        var row: Int64
    }

    /// What to do with one entry.
    enum Plan {
        case send(RemoteOperation)
        /// Behind a change of its item set aside: it waits with it, in order.
        case wait
        case setAside(String)
        /// Already in a conflicted copy: done.
        case complete
        /// Nothing to send (decided here).
        case outcome(Outcome)
        case failed(any Error)
    }

    /// Sends the chunk's changes and decides each; returns what they came to.
    func applyChunk(
        _ chunk: [OutboxEntry], contents: [Int64: RemoteContent], refusedUploads: [Int64: String],
        rootID: Int64
    ) async -> ChunkProgress {
        var progress = ChunkProgress()
        var sending: [Sent] = []
        var index = 0
        while progress.failure == nil {
            guard index < chunk.count else {
                guard !sending.isEmpty else { break }
                if let resume = await flush(&sending, &progress, rootID: rootID) { index = resume }
                continue
            }
            let entry = chunk[index]
            let plan = self.plan(
                entry, content: contents[entry.seq], refusal: refusedUploads[entry.seq], rootID: rootID,
                progress: progress)
            if case .send(let operation) = plan {
                sending.append(
                    Sent(
                        entry: entry, operation: operation, index: index, content: contents[entry.seq],
                        row: progress.assigned[entry.row] ?? store.currentRow(entry.row)))
                switch operation.change {
                case .create, .link: progress.created[store.currentRow(entry.row)] = entry.id
                default: break
                }
                index += 1
                continue
            }
            // Decided here, on what no answer still awaited can change (a change that depends on
            // one, of the same item or inside a folder being created, is planned as sent).
            switch plan {
            case .send, .wait:
                break
            case .setAside(let reason):
                setItemAside(entry, reason)
            case .complete:
                progress.completions.append(OutboxCompletion(entry: entry))
            case .outcome(let outcome):
                decide(entry, .success(outcome), &progress)
            case .failed(let error):
                decide(entry, .failure(error), &progress)
            }
            index += 1
        }
        return progress
    }

    /// One call with the changes planned; each answer decided in order. Returns the index of
    /// the first change the server did not apply (it stopped at a refusal), to plan again.
    private func flush(_ sending: inout [Sent], _ progress: inout ChunkProgress, rootID: Int64) async -> Int? {
        let batch = sending
        sending = []
        progress.created = [:]
        let answers: [Result<AppliedChange, RemoteError>]
        do {
            answers = try await database.apply(batch.map(\.operation))
        } catch {
            progress.failure = error
            return nil
        }
        for (sent, answer) in zip(batch, answers) {
            let outcome: Result<Outcome, any Error>
            do {
                outcome = .success(try await conclude(sent, answer, rootID: rootID, progress: progress))
            } catch {
                outcome = .failure(error)
            }
            decide(sent.entry, outcome, &progress)
            if progress.failure != nil { return nil }
        }
        return answers.count < batch.count ? batch[answers.count].index : nil
    }

    /// An entry's outcome, as the chunk records it: completed (with the identifier a create
    /// got), set aside, undone (the item follows the server), or the chunk stopped.
    private func decide(_ entry: OutboxEntry, _ result: Result<Outcome, any Error>, _ progress: inout ChunkProgress) {
        switch result {
        case .success(let outcome):
            if let permanent = outcome.permanent { progress.assigned[entry.row] = permanent }
            if let follow = outcome.follow { progress.refresh.append(follow) }
            progress.completions.append(
                OutboxCompletion(
                    entry: entry, permanentRow: outcome.permanent,
                    contentKey: outcome.keptContentKey))
        case .failure(let error):
            let sorted = ServerExchangeError(error, bucket: configuration.bucket)
            if sorted.setsAside {
                setItemAside(entry, sorted.message, waitsOn: (error as? ServerExchangeError.WaitsFor)?.row)
                return
            }
            guard sorted.isItemLevel else {
                progress.failure = error
                return
            }
            let row = progress.assigned[entry.row] ?? store.currentRow(entry.row)
            // An edit of a file the server has, refused (its conflicted copy's name, a rule that
            // refuses the copy too), is set aside with its contents: undone or dropped, this
            // replica would keep bytes the server never gets, with nothing pending. (A file whose
            // create was refused is marked with that refusal already.)
            if entry.kind == .content, ReplicaRows.isPermanent(row) {
                setItemAside(entry, sorted.message)
                return
            }
            // The server decided otherwise (another replica's change came first, a move it
            // refuses): the change is dropped and the item follows the server's state.
            var path = store.path(ofRow: row)
            if path.hasSuffix("?") { path = "item \(row) (deleted here)" }
            if ReplicaRows.isPermanent(row) {
                progress.refresh.append(row)
                store.noteConflict(
                    "this replica's \(entry.kind.rawValue) was undone: \(sorted.message)", row: row,
                    summary: "\(path): \(entry.kind.rawValue) undone (\(sorted.message))")
                logger.warning(
                    "sync: \(path): the server refused the \(entry.kind.rawValue) (\(sorted.message)); undone here, the item follows the server")
            } else {
                // The first refusal says why (a later change of the item fails for that one).
                if store.syncError(of: row) == nil { store.setSyncError(sorted.message, row: row) }
                logger.error("sync: \(path): the server refused the \(entry.kind.rawValue): \(sorted.message); kept locally, not sent")
                self.progress.withLock { $0.failedItems += 1 }
            }
            progress.completions.append(OutboxCompletion(entry: entry))
        }
    }

    /// The operation an entry becomes, or what is decided about it here.
    func plan(_ entry: OutboxEntry, content: RemoteContent?, refusal: String?, rootID: Int64, progress: ChunkProgress) -> Plan {
        let row = store.currentRow(entry.row)
        if setAside[entry.row] != nil || setAside[row] != nil { return .wait }
        if let refusal { return .setAside(refusal) }
        if entry.kind == .content || entry.kind == .delete, conflicted.contains(row) {
            // A later edit is in the conflicted copy already. A later delete was of this
            // replica's version, which the copy holds now; the server's version under the name is
            // another replica's edit, which a delete it never saw must not remove (its content
            // version number can equal the one this replica deleted).
            return .complete
        }
        do {
            guard let operation = try operation(for: entry, content: content, rootID: rootID, progress: progress) else {
                return .outcome(Outcome())
            }
            return .send(operation)
        } catch {
            return .failed(error)
        }
    }

    /// The server's item for an outbox row: its identifier, or the create sent for it.
    private func target(_ row: Int64, of entry: OutboxEntry, rootID: Int64, progress: ChunkProgress) throws -> RemoteOperation.Target {
        let current = progress.assigned[row] ?? store.currentRow(row)
        if current == ReplicaRows.root { return .item(rootID) }
        if let create = progress.created[current] { return .createdBy(create) }
        guard ReplicaRows.isPermanent(current) else {
            if let held = setAside[row] ?? setAside[current] {
                throw ServerExchangeError.WaitsFor(row: row, "its folder is set aside (\(held.reason))")
            }
            throw ServerExchangeError.Refused(
                row == entry.row
                    ? "it was never created on the server"
                    : "its folder was never created on the server")
        }
        return .item(current)
    }

    /// The entry as an operation; nil when there is nothing to send.
    private func operation(
        for entry: OutboxEntry, content: RemoteContent?, rootID: Int64,
        progress: ChunkProgress
    ) throws -> RemoteOperation? {
        func target(_ row: Int64) throws -> RemoteOperation.Target {
            try self.target(row, of: entry, rootID: rootID, progress: progress)
        }
        let details = entry.details
        switch entry.kind {
        case .create:
            guard let parent = entry.parent, let name = entry.name, let kind = details.kind else {
                throw ServerExchangeError.Refused("the outbox entry is incomplete")
            }
            // Deleted before its upload: nothing to create (its delete is skipped likewise).
            if details.kind == .file, content == nil { return nil }
            // As the outbox recorded it; a create without attributes sends what it always has (0, 0, 0644, times 0).
            var attributes = details.newItem ?? ReplicatedAttributes(creationTime: FileTime(seconds: 0), modificationTime: FileTime(seconds: 0))
            attributes.types = typeChain(entry.row)
            return RemoteOperation(
                id: entry.id,
                .create(
                    parent: try target(parent), name: name, kind: kind,
                    attributes: attributes, content: content))
        case .content:
            guard let content else {
                // The file was deleted before its new contents went up: that version never
                // reaches the server, so the delete that follows must not expect it.
                unsentVersions[store.currentRow(entry.row), default: 0] += 1
                return nil
            }
            let version = Int64(details.contentVersion ?? 2)
            let base = details.baseVersion.map { Int64($0) } ?? version - 1
            return RemoteOperation(
                id: entry.id,
                .content(
                    item: try target(entry.row), expectedVersion: base, content: content,
                    modificationTime: details.changes.modificationTime ?? FileTime(seconds: 0)))
        case .move:
            guard let parent = entry.parent, let name = entry.name else { throw ServerExchangeError.Refused("the outbox entry is incomplete") }
            // Where the replica saw the item: a folder not on the server yet is not checked.
            var expectedParent: Int64?
            if let from = details.fromParent, case .item(let id)? = try? target(from) { expectedParent = id }
            return RemoteOperation(
                id: entry.id,
                .move(
                    item: try target(entry.row), toParent: try target(parent), name: name,
                    expectedParentID: expectedParent,
                    expectedName: expectedParent == nil ? nil : details.fromName,
                    types: typeChain(entry.row)))
        case .trash:
            return RemoteOperation(id: entry.id, .trash(item: try target(entry.row)))
        case .untrash:
            guard let parent = entry.parent, let name = entry.name else { throw ServerExchangeError.Refused("the outbox entry is incomplete") }
            return RemoteOperation(
                id: entry.id,
                .untrash(
                    item: try target(entry.row), toParent: try target(parent), name: name,
                    types: typeChain(entry.row)))
        case .delete:
            let current = progress.assigned[entry.row] ?? store.currentRow(entry.row)
            // Never on the server (deleted before its create went): nothing to delete there.
            if current >= ReplicaRows.temporaryBase, progress.created[current] == nil { return nil }
            // Kept until the server has answered about this delete (a retry needs it again).
            let unsent = Int64(unsentVersions[current] ?? 0)
            return RemoteOperation(
                id: entry.id,
                .delete(
                    item: try target(entry.row),
                    expectedContentVersion: details.contentVersion.map { Int64($0) - unsent }))
        case .attributes:
            return RemoteOperation(id: entry.id, .attributes(item: try target(entry.row), changes: details.changes))
        case .link:
            guard let parent = entry.parent, let name = entry.name, let named = details.linkOf else {
                throw ServerExchangeError.Refused("the outbox entry is incomplete")
            }
            // The file went before its create reached the server: nothing to name there.
            let file = progress.assigned[named] ?? store.currentRow(named)
            if file >= ReplicaRows.temporaryBase, progress.created[file] == nil { return nil }
            return RemoteOperation(id: entry.id, .link(item: try target(named), parent: try target(parent), name: name))
        case .unlink:
            let current = progress.assigned[entry.row] ?? store.currentRow(entry.row)
            // A name that never reached the server (refused, or removed before its link went).
            if current >= ReplicaRows.temporaryBase, progress.created[current] == nil { return nil }
            return RemoteOperation(id: entry.id, .unlink(name: try target(entry.row)))
        case .moveName:
            guard let parent = entry.parent, let name = entry.name else { throw ServerExchangeError.Refused("the outbox entry is incomplete") }
            let current = progress.assigned[entry.row] ?? store.currentRow(entry.row)
            if current >= ReplicaRows.temporaryBase, progress.created[current] == nil { return nil }
            var expectedParent: Int64?
            if let from = details.fromParent, case .item(let id)? = try? target(from) { expectedParent = id }
            return RemoteOperation(
                id: entry.id,
                .moveName(
                    name: try target(entry.row), toParent: try target(parent), newName: name,
                    expectedParentID: expectedParent,
                    expectedName: expectedParent == nil ? nil : details.fromName))
        }
    }

    /// A refusal a retry does not mend (the server's item or folder gone, a value it does not take).
    static func refusesForGood(_ error: RemoteError) -> Bool {
        switch error {
        case .notFound, .invalid, .refused: return true
        default: return false
        }
    }

    /// What the server's answer to a change means here.
    private func conclude(
        _ sent: Sent, _ answer: Result<AppliedChange, RemoteError>, rootID: Int64,
        progress: ChunkProgress
    ) async throws -> Outcome {
        let entry = sent.entry
        let itemID = progress.assigned[entry.row] ?? store.currentRow(entry.row)
        switch (sent.operation.change, answer) {
        case (.create(_, let name, _, _, _), .success(let applied)):
            return Outcome(
                permanent: applied.itemID, follow: renamed(applied, entry, name, row: applied.itemID),
                keptContentKey: sent.content?.key)
        case (.content, .success):
            return Outcome(keptContentKey: sent.content?.key)
        case (.content, .failure(.versionConflict)):
            guard let content = sent.content else { throw RemoteError.invalid("a content change without contents") }
            return try await keepConflictedCopy(entry, itemID: itemID, content: content, rootID: rootID)
        case (.content, .failure(.refused(let rule))):
            // The server's layout does not let this file be written: the edit goes beside it.
            guard let content = sent.content else { throw RemoteError.invalid("a content change without contents") }
            return try await keepConflictedCopy(entry, itemID: itemID, content: content, rootID: rootID, refusal: rule)
        case (.move(_, _, let name, _, _, _), .success(let applied)), (.untrash(_, _, let name, _), .success(let applied)):
            return Outcome(follow: renamed(applied, entry, name, row: itemID))
        case (.delete, .success), (.delete, .failure(.notFound)):
            unsentVersions[sent.row] = nil
            return Outcome()
        case (.delete, .failure(let error)):
            if case .versionConflict = error { unsentVersions[sent.row] = nil }
            throw error
        case (.link(_, _, let name), .success(let applied)):
            return Outcome(permanent: applied.itemID, follow: renamed(applied, entry, name, row: applied.itemID))
        case (.link, .failure(let error)) where Self.refusesForGood(error):
            // Its file or folder gone on the server, or a name it does not take: the name goes
            // here too (a name only here would be half-done).
            let path = try store.dropRefusedName(row: sent.row)
            logger.warning(
                "sync: \(path ?? "a further name") of item \(entry.details.linkOf ?? 0): the server refused the hard link (\(error)); the name is removed here"
            )
            return Outcome()
        case (.unlink, .success), (.unlink, .failure(.notFound)):
            return Outcome()
        case (.moveName(_, _, let name, _, _), .success(let applied)):
            return Outcome(follow: renamed(applied, entry, name, row: itemID))
        case (_, .success):
            return Outcome()
        case (_, .failure(let error)):
            throw error
        }
    }
}
