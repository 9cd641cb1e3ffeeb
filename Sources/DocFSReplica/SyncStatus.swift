import Foundation

/// What `docfs status` shows (`user.docfs.status` on the mount's root, as JSON). The first four
/// field names are a promise to scripts: `online`, `pending`, `pendingBytes`, `lastError`.
package struct SyncStatus: Codable, Sendable, Equatable {
    /// The last request to the server got an answer (false: unreachable, retrying with backoff).
    package var online: Bool
    /// Changes not yet on the server.
    package var pending: Int
    /// Bytes of contents still to upload.
    package var pendingBytes: Int64
    /// The last error the sync met (cleared by the next success), or null.
    package var lastError: String?
    /// When the last error happened (ISO 8601), or null.
    package var lastErrorAt: String?
    /// "idle", "uploading", "offline", or "stalled" (an error retrying will not mend soon:
    /// credentials, a missing bucket; retried every minute).
    package var state: String
    /// Bytes uploaded since the mount started, and the upload rate over the last seconds.
    package var uploadedBytes: Int64
    package var uploadRate: Double
    /// Changes sent since the mount started.
    package var sent: Int
    /// How long the oldest pending change has waited, in seconds (null when none).
    package var oldestPendingSeconds: Double?
    /// Items whose change the server refused (each has `user.docfs.sync` = "error: …").
    package var failedItems: Int
    /// The server, without secrets.
    package var remote: String
    /// Changes other replicas made that this one has not applied yet (0: caught up; items whose
    /// server state is to be fetched again count too), and the
    /// change log position it has applied (its sync anchor).
    package var incoming: Int64 = 0
    package var anchor: Int64 = 0
    /// Conflicts with other replicas since the mount, and the latest few, described.
    package var conflicts: Int = 0
    package var recentConflicts: [String] = []
    /// Contents on demand: the `--cache-size` limit (null: none), the bytes of contents here as
    /// last counted (null when no limit makes it count them), and downloads in progress.
    package var cacheLimit: Int64?
    package var cachedBytes: Int64?
    package var downloading: Int = 0
    /// Items set aside (the server refused a change of theirs for a reason a retry will not
    /// mend: `user.docfs.sync` says why) and their changes, which `pending` counts too and which
    /// wait until the item changes again or `docfs sync --retry PATH`.
    package var setAside: Int = 0
    package var setAsideChanges: Int = 0
    /// The server's database found restored to an earlier point since the mount: what it meant
    /// here (files kept in `STORE/recovered/`), and when; null when not.
    package var restore: String?
    /// The last time this replica had sent everything with the server answering (ISO 8601), or
    /// null before the first time since the mount.
    package var lastSyncAt: String?
    /// Items whose rows from the server break a rule of `ServerRowChecks` (a hand-edited
    /// database, an older server): not applied here, each named once in the log.
    package var refusedIncoming: Int = 0

    /// Every key is always written; an absent value is null (the synthesized encoder leaves it out).
    package func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(online, forKey: .online)
        try c.encode(pending, forKey: .pending)
        try c.encode(pendingBytes, forKey: .pendingBytes)
        try c.encode(lastError, forKey: .lastError)
        try c.encode(lastErrorAt, forKey: .lastErrorAt)
        try c.encode(state, forKey: .state)
        try c.encode(uploadedBytes, forKey: .uploadedBytes)
        try c.encode(uploadRate, forKey: .uploadRate)
        try c.encode(sent, forKey: .sent)
        try c.encode(oldestPendingSeconds, forKey: .oldestPendingSeconds)
        try c.encode(failedItems, forKey: .failedItems)
        try c.encode(remote, forKey: .remote)
        try c.encode(incoming, forKey: .incoming)
        try c.encode(anchor, forKey: .anchor)
        try c.encode(conflicts, forKey: .conflicts)
        try c.encode(recentConflicts, forKey: .recentConflicts)
        try c.encode(cacheLimit, forKey: .cacheLimit)
        try c.encode(cachedBytes, forKey: .cachedBytes)
        try c.encode(downloading, forKey: .downloading)
        try c.encode(setAside, forKey: .setAside)
        try c.encode(setAsideChanges, forKey: .setAsideChanges)
        try c.encode(restore, forKey: .restore)
        try c.encode(lastSyncAt, forKey: .lastSyncAt)
        try c.encode(refusedIncoming, forKey: .refusedIncoming)
    }

    static func encoded(_ status: SyncStatus) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(status)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
