#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

/// An entry the server has (or that can never be sent), and for a create the permanent
/// identifier the server gave the item.
package struct OutboxCompletion: Sendable {
    package var entry: OutboxEntry
    package var permanentRow: Int64?
    /// The object the entry's contents went up as: the file's bytes can be evicted and
    /// downloaded from it again, while it has no newer contents.
    package var contentKey: String?
    package init(entry: OutboxEntry, permanentRow: Int64? = nil, contentKey: String? = nil) {
        self.entry = entry
        self.permanentRow = permanentRow
        self.contentKey = contentKey
    }
}

// A replica's outbox: the changes the sync engine sends to the server, written with the actions
// that make them (`commit`), read and completed by the engine, and the replacement of a
// temporary row by the server's permanent identifier.
extension LocalStore {
    /// Rows from here up are temporary: given by this replica to items the server has not
    /// numbered yet. The server's identifiers stay below (2^40 items is beyond any tree).
    package static let temporaryRowBase: Int64 = 1 << 40

    /// The server this store is a replica of; nil for a store of its own.
    package var remoteLink: RemoteLink? { replica?.link }

    /// Whether an identifier is a temporary one (a replica's item the server has not numbered yet).
    package static func isTemporary(_ identifier: ItemIdentifier) -> Bool {
        (row(for: identifier) ?? 0) >= temporaryRowBase
    }

    /// The outbox rows of what `commit` is about to write (the records' old values are still in
    /// memory then; new rows are at or past `nextRow`). Deletions first: a move that replaces an
    /// item frees the name before it takes it.
    func plannedOutbox(_ replica: ReplicaState, saving records: [Record], deleting deletions: [Int64])
        -> (changes: [StoreJournal.Change], count: Int, bytes: Int64) {
        var planned: [OutboxPlanner.Planned] = []
        state.withLock { tree in
            for row in deletions {
                if let old = tree.records[row] { planned += OutboxPlanner.planDeletion(of: old) }
            }
            for record in records {
                let old = record.row >= tree.nextRow ? nil : tree.records[record.row]
                planned += OutboxPlanner.plan(old: old, new: record)
            }
        }
        guard !planned.isEmpty else { return ([], 0, 0) }
        var seq = replica.reserve(planned.count)
        let now = FileTime.now().totalNanoseconds
        var changes: [StoreJournal.Change] = []
        var bytes: Int64 = 0
        for plan in planned {
            let entry = OutboxEntry(seq: seq, id: UUID(), kind: plan.kind, row: plan.row, parent: plan.parent,
                                    name: plan.name, bytes: plan.bytes, enqueuedNs: now, details: plan.details)
            changes.append(.outbox(Schema.values(of: entry)))
            replica.noteRecent(plan.row)
            bytes += plan.bytes
            seq += 1
        }
        return (changes, planned.count, bytes)
    }

    // MARK: For the sync engine

    /// Pending changes and bytes to upload.
    package var outboxCounts: (pending: Int, pendingBytes: Int64) {
        let counts = replica?.current
        return (counts?.pending ?? 0, counts?.pendingBytes ?? 0)
    }

    /// The oldest `limit` entries of the outbox, in order. The journal's batch goes to SQLite
    /// first, so that the outbox there is complete.
    /// The oldest entries, in order, but for those of the `skipping` rows (set aside by the
    /// engine: a change the server refused for a reason a retry will not mend).
    package func outboxEntries(limit: Int, skipping: Set<Int64> = []) throws(ProviderError) -> [OutboxEntry] {
        guard replica != nil else { return [] }
        return try write { (database) throws(ProviderError) -> [OutboxEntry] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    let skip = skipping.isEmpty ? "" : "WHERE row NOT IN (\(skipping.sorted().map(String.init).joined(separator: ",")))"
                    return try Row.fetchAll(db, sql: "SELECT \(Schema.outboxColumns) FROM outbox \(skip) ORDER BY seq LIMIT ?", arguments: [limit])
                        .compactMap(Schema.outboxEntry(from:))
                }
            } catch let error as DatabaseError {
                throw Self.providerError(error, "read the outbox")
            } catch {
                throw ProviderError(.ioError, "read the outbox: \(error)")
            }
        }
    }

    /// Removes completed entries from the outbox and, for creates, replaces each temporary row by
    /// its permanent identifier everywhere (the item, its children, the trash's memory of it, its
    /// stored attributes, its content file, the entries still waiting), in one transaction. The
    /// mount is told (`ProviderChange.identifierReplaced`): its inodes keep their numbers.
    /// `refetch`: items whose change the server decided otherwise about (a conflicted copy, an
    /// undone change): their server state is noted to be fetched again in the same transaction,
    /// so that a fetch the server's absence or a crash cuts short is tried again, never dropped.
    package func completeOutbox(_ completions: [OutboxCompletion], refetch: [Int64] = []) throws(ProviderError) {
        guard let replica, !completions.isEmpty else { return }
        var renumbered: [(old: Int64, new: Int64)] = []
        try write { (database) throws(ProviderError) in
            try flushJournal(database)
            var renumbers: [(old: Int64, new: Int64)] = []
            for completion in completions {
                guard let permanent = completion.permanentRow, completion.entry.row >= Self.temporaryRowBase,
                      permanent != completion.entry.row, permanent < Self.temporaryRowBase else { continue }
                renumbers.append((completion.entry.row, permanent))
            }
            // In memory before SQLite changes: `TreeState.renumber` moves what memory holds.
            state.withLock { tree in for (old, _) in renumbers { _ = tree.records[old] } }
            // The content file under both names until the transaction is in: a crash in between
            // leaves one unowned name, which the next open removes.
            for (old, new) in renumbers where !sysLink(contentPath(old), contentPath(new)) {
                let err = errno
                if err != ENOENT && err != EEXIST { throw ProviderError.posix(err, "link the contents of item \(old) as \(new)") }
            }
            do {
                try database.inDatabase { db in
                    try db.inTransaction {
                        for (old, new) in renumbers {
                            try db.execute(sql: "UPDATE item SET id = ? WHERE id = ?", arguments: [new, old])
                            try db.execute(sql: "UPDATE item SET parent = ? WHERE parent = ?", arguments: [new, old])
                            // Only items at the top of the trash remember an origin (and the index on parent finds them).
                            try db.execute(sql: "UPDATE item SET trashedFrom = ? WHERE parent = ? AND trashedFrom = ?", arguments: [new, Self.trashRow, old])
                            try db.execute(sql: "UPDATE xattr SET item = ? WHERE item = ?", arguments: [new, old])
                            try db.execute(sql: "UPDATE outbox SET row = ? WHERE row = ?", arguments: [new, old])
                            try db.execute(sql: "UPDATE outbox SET parent = ? WHERE parent = ?", arguments: [new, old])
                            try db.execute(sql: "UPDATE pinned SET row = ? WHERE row = ?", arguments: [new, old])
                            // A file's further names, and the links waiting that name it (hard links).
                            try db.execute(sql: "UPDATE item SET linkOf = ? WHERE linkOf = ?", arguments: [new, old])
                            try db.execute(sql: "UPDATE outbox SET details = json_set(details, '$.linkOf', ?) WHERE kind = 'link' AND json_extract(details, '$.linkOf') = ?",
                                           arguments: [new, old])
                        }
                        for completion in completions {
                            try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq = ?").execute(arguments: [completion.entry.seq])
                        }
                        if !refetch.isEmpty { try Self.noteRefetch(refetch, db) }
                        return .commit
                    }
                }
            } catch {
                for (_, new) in renumbers { _ = sysUnlink(contentPath(new)) }
                if let error = error as? DatabaseError { throw Self.providerError(error, "complete \(completions.count) outbox entries") }
                throw ProviderError(.ioError, "complete \(completions.count) outbox entries: \(error)")
            }
            // Memory (which also forwards the old rows) first, the old content name last: a
            // reader that resolved the old identifier a moment ago still finds a file to open.
            state.withLock { tree in for (old, new) in renumbers { tree.renumber(old, to: new) } }
            replica.onDemand.state.withLock { d in
                for (old, new) in renumbers where d.pins.remove(old) != nil { d.pins.insert(new) }
            }
            for (old, new) in renumbers {
                replica.moveError(from: old, to: new)
                replica.writers.rename(old, to: new)
                _ = sysUnlink(contentPath(old))
            }
            renumbered = renumbers
        }
        try noteUploadedContents(completions)
        replica.didComplete(count: completions.count, bytes: completions.reduce(0) { $0 + $1.entry.bytes })
        if !renumbered.isEmpty {
            replica.notify(renumbered.map { .identifierReplaced(old: Self.identifier(forRow: $0.old), new: Self.identifier(forRow: $0.new)) })
        }
    }

    /// Drops the changes waiting for these items (a restored server gave their identifiers to
    /// other items: sent, they would change those). Their contents are kept first
    /// (`keepRecovered`); new items inside them keep their creates (nothing of them is lost).
    package func forgetOutboxEntries(rows: [Int64]) throws(ProviderError) {
        guard let replica, !rows.isEmpty else { return }
        let dropped = try write { (database) throws(ProviderError) -> (count: Int, bytes: Int64) in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    var dropped = (count: 0, bytes: Int64(0))
                    try db.inTransaction {
                        let list = rows.map(String.init).joined(separator: ",")
                        let condition = "row IN (\(list))"
                        if let row = try Row.fetchOne(db, sql: "SELECT count(*), coalesce(sum(bytes), 0) FROM outbox WHERE \(condition)") {
                            dropped = (row[0], row[1])
                        }
                        try db.execute(sql: "DELETE FROM outbox WHERE \(condition)")
                        return .commit
                    }
                    return dropped
                }
            } catch {
                throw ProviderError(.ioError, "drop outbox entries: \(error)")
            }
        }
        replica.didComplete(count: dropped.count, bytes: dropped.bytes)
    }

    /// The row an entry's row is now (after a replacement the engine has not seen yet).
    package func currentRow(_ row: Int64) -> Int64 {
        row >= Self.temporaryRowBase ? state.withLock { $0.resolve(row) } : row
    }

    /// The sync engine's hooks: woken when an action adds to the outbox; asked for the status
    /// JSON (`user.docfs.status`, `docfs status`).
    package func setSyncHooks(wake: (@Sendable () -> Void)?, status: (@Sendable () -> String)?) {
        replica?.setWake(wake)
        replica?.setStatus(status)
    }

    /// The engine is about to wait for work: the next action that adds to the outbox wakes it.
    package func outboxIdle() {
        replica?.engineIdle.store(true, ordering: .releasing)
    }

    /// How long ago an action last added to the outbox (nil: none since the mount).
    package var outboxQuietFor: Duration? {
        guard let last = replica?.lastAppend.load(ordering: .relaxed), last > 0 else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        return .nanoseconds(Int64(now > last ? now - last : 0))
    }

    /// Marks an item's sync state as failed (nil: clears it), for `user.docfs.sync`.
    /// The error an item's change met (nil: none).
    package func syncError(of row: Int64) -> String? { replica?.error(of: row) }

    package func setSyncError(_ message: String?, row: Int64) {
        replica?.setError(message, row: row)
    }

    package func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {
        replica?.addObserver(handler)
    }

    /// `user.docfs.sync`: uploaded, pending, or error: REASON; nil for a store without a remote.
    package func syncState(of identifier: ItemIdentifier) -> String? {
        guard let replica, let row = row(for: identifier), row != Self.trashRow else { return nil }
        if let error = replica.error(of: row) { return "error: " + error }
        if row >= Self.temporaryRowBase || replica.isRecent(row) { return "pending" }
        let waiting = state.withLock { $0.reader?.count("SELECT COUNT(*) FROM outbox WHERE row = \(row)") ?? 0 }
        return waiting > 0 ? "pending" : "uploaded"
    }

    /// The status JSON the sync engine reports (`docfs status`); nil without a remote.
    package func syncStatus() -> String? { replica?.statusJSON }
}

extension LocalStore {
    /// For each of `rows` with entries waiting: how many, and the newest one's seq (a change
    /// made after an item was set aside tries it again).
    package func outboxWaiting(rows: Set<Int64>) -> [Int64: (count: Int, latest: Int64)] {
        guard replica != nil, !rows.isEmpty else { return [:] }
        return (try? write { (database) throws(ProviderError) -> [Int64: (count: Int, latest: Int64)] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    let list = rows.sorted().map(String.init).joined(separator: ",")
                    var found: [Int64: (count: Int, latest: Int64)] = [:]
                    for row in try Row.fetchAll(db, sql: "SELECT row, count(*), max(seq) FROM outbox WHERE row IN (\(list)) GROUP BY row") {
                        found[row[0]] = (row[1], row[2])
                    }
                    return found
                }
            } catch {
                throw ProviderError(.ioError, "read the outbox: \(error)")
            }
        }) ?? [:]
    }

    /// Which of these operation ids are outbox entries still waiting.
    package func outboxEntryIDs(among ids: [UUID]) -> Set<UUID> {
        guard replica != nil, !ids.isEmpty else { return [] }
        let found = (try? write { (database) throws(ProviderError) -> [String] in
            try flushJournal(database)
            do {
                return try database.inDatabase { db in
                    let list = ids.map { "'\($0.uuidString)'" }.joined(separator: ",")
                    return try String.fetchAll(db, sql: "SELECT id FROM outbox WHERE id IN (\(list))")
                }
            } catch {
                throw ProviderError(.ioError, "read the outbox: \(error)")
            }
        }) ?? []
        return Set(found.compactMap { UUID(uuidString: $0) })
    }

    /// Whether an outbox entry with this operation id is still waiting (after a restart: a
    /// multipart upload of it left behind is aborted and made again, not leaked).
    package func outboxHasEntry(id: UUID) -> Bool {
        guard replica != nil else { return false }
        return state.withLock { $0.reader?.count("SELECT COUNT(*) FROM outbox WHERE id = '\(id.uuidString)'") ?? 0 } > 0
    }
}
