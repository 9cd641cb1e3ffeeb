#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// A replica's outbox: the changes the sync engine sends to the server, written with the actions
// that make them (`commit`), read and completed by the engine, and the replacement of a
// temporary row by the server's permanent identifier.
extension StoreReplica {
    /// The server this store is a replica of.
    package var remoteLink: RemoteLink { state.link }

    // MARK: For the sync engine

    /// Pending changes and bytes to upload.
    package var outboxCounts: (pending: Int, pendingBytes: Int64) {
        let counts = outbox.current
        return (counts.pending, counts.pendingBytes)
    }

    /// The oldest `limit` entries of the outbox, in order, but for those of the `skipping` rows
    /// (`StoreOutbox.entries`). The journal's batch goes to SQLite first, so that the outbox there
    /// is complete.
    package func outboxEntries(limit: Int, skipping: Set<Int64> = []) throws(ProviderError) -> [OutboxEntry] {
        try write { (database) throws(ProviderError) -> [OutboxEntry] in
            try flushJournal(database)
            return try outbox.entries(database, limit: limit, skipping: skipping)
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
        guard !completions.isEmpty else { return }
        try write { (database) throws(ProviderError) in
            try flushJournal(database)
            var renumbers: [(old: Int64, new: Int64)] = []
            for completion in completions {
                guard let permanent = completion.permanentRow, completion.entry.row >= Self.temporaryRowBase,
                    permanent != completion.entry.row, permanent < Self.temporaryRowBase
                else { continue }
                renumbers.append((completion.entry.row, permanent))
            }
            // In memory before SQLite changes: `TreeState.renumber` moves what memory holds.
            tree.reading { tree in for (old, _) in renumbers { _ = tree.records[old] } }
            // The content file under both names until the transaction is in: a crash in between
            // leaves one unowned name, which the next open removes.
            for (old, new) in renumbers where !sysLink(contents.path(old), contents.path(new)) {
                let err = errno
                if err != ENOENT && err != EEXIST { throw ProviderError.posix(err, "link the contents of item \(old) as \(new)") }
            }
            do {
                try outbox.complete(
                    database, completions, renumbering: renumbers,
                    noteRefetch: refetch.isEmpty ? nil : { db in try Self.noteRefetch(refetch, db) })
            } catch {
                for (_, new) in renumbers { _ = sysUnlink(contents.path(new)) }
                if let error = error as? DatabaseError { throw StoreWriter.providerError(error, "complete \(completions.count) outbox entries") }
                throw ProviderError(.ioError, "complete \(completions.count) outbox entries: \(error)")
            }
            // Memory (which also forwards the old rows) first, the old content name last: a
            // reader that resolved the old identifier a moment ago still finds a file to open.
            tree.update { tree in for (old, new) in renumbers { tree.renumber(old, to: new) } }
            if !renumbers.isEmpty {
                // The mount keeps each inode under its permanent identifier at once, before the
                // outbox's count drops: a lookup after the tree changed, or after `docfs status`
                // shows nothing pending, would otherwise give the new identifier an inode of its own.
                state.notify(renumbers.map { .identifierReplaced(old: Self.identifier(forRow: $0.old), new: Self.identifier(forRow: $0.new)) })
                state.onDemand?.rowsRenumbered(renumbers)
            }
            for (old, new) in renumbers {
                state.moveError(from: old, to: new)
                state.writers?.renamed(old, to: new)
                _ = sysUnlink(contents.path(old))
            }
        }
        try noteUploadedContents(completions)
        outbox.didComplete(count: completions.count, bytes: completions.reduce(0) { $0 + $1.entry.bytes })
    }

    /// Drops the changes waiting for these items (a restored server gave their identifiers to
    /// other items: sent, they would change those). Their contents are kept first
    /// (`keepRecovered`); new items inside them keep their creates (nothing of them is lost).
    package func forgetOutboxEntries(rows: [Int64]) throws(ProviderError) {
        guard !rows.isEmpty else { return }
        let dropped = try write { (database) throws(ProviderError) -> (count: Int, bytes: Int64) in
            try flushJournal(database)
            return try outbox.forget(database, rows: rows)
        }
        outbox.didComplete(count: dropped.count, bytes: dropped.bytes)
    }

    /// The row an entry's row is now (after a replacement the engine has not seen yet).
    package func currentRow(_ row: Int64) -> Int64 {
        row >= Self.temporaryRowBase ? tree.resolve(row) : row
    }

    /// The sync engine's hooks: woken when an action adds to the outbox; asked for the status
    /// JSON (`user.docfs.status`, `docfs status`).
    package func setSyncHooks(wake: (@Sendable () -> Void)?, status: (@Sendable () -> String)?) {
        outbox.setWake(wake)
        state.setStatus(status)
    }

    /// The engine is about to wait for work: the next action that adds to the outbox wakes it.
    package func outboxIdle() {
        outbox.idle()
    }

    /// How long ago an action last added to the outbox (nil: none since the mount).
    package var outboxQuietFor: Duration? { outbox.quietFor }

    /// Marks an item's sync state as failed (nil: clears it), for `user.docfs.sync`.
    /// The error an item's change met (nil: none).
    package func syncError(of row: Int64) -> String? { state.error(of: row) }

    package func setSyncError(_ message: String?, row: Int64) {
        state.setError(message, row: row)
    }

    func observeChanges(_ handler: @escaping @Sendable ([ProviderChange]) -> Void) {
        state.addObserver(handler)
    }

    /// `user.docfs.sync` of the item at `row`: uploaded, pending, or error: REASON.
    func syncState(ofRow row: Int64) -> String? {
        guard row != Self.trashRow else { return nil }
        if let error = state.error(of: row) { return "error: " + error }
        if row >= Self.temporaryRowBase || outbox.isRecent(row) { return "pending" }
        let waiting = tree.withReader { StoreOutbox.waitingCount(row: row, $0) }
        return waiting > 0 ? "pending" : "uploaded"
    }
}

extension StoreReplica {
    /// For each of `rows` with entries waiting: how many, and the newest one's seq (a change
    /// made after an item was set aside tries it again).
    package func outboxWaiting(rows: Set<Int64>) -> [Int64: (count: Int, latest: Int64)] {
        guard !rows.isEmpty else { return [:] }
        return
            (try? write { (database) throws(ProviderError) -> [Int64: (count: Int, latest: Int64)] in
                try flushJournal(database)
                return try outbox.waiting(database, rows: rows)
            }) ?? [:]
    }

    /// Which of these operation ids are outbox entries still waiting.
    package func outboxEntryIDs(among ids: [UUID]) -> Set<UUID> {
        guard !ids.isEmpty else { return [] }
        let found =
            (try? write { (database) throws(ProviderError) -> [String] in
                try flushJournal(database)
                return try outbox.entryIDs(database, among: ids)
            }) ?? []
        return Set(found.compactMap { UUID(uuidString: $0) })
    }
}
