import DocFSWire
import Foundation
import Logging
import PostgresNIO

/// A content version whose object no one needs any more: its item was deleted, or a newer
/// version replaced it, before the collection's cutoff.
package struct GarbageVersion: Sendable, Equatable {
    package var itemID: Int64
    package var contentVersion: Int64
    package var key: String
    package var size: Int64
}

// What `docfs remote gc` asks of the server. Replicas only ever download an item's current
// version, so a version is garbage once it stopped being current; the cutoff (now less a grace
// period) keeps the objects a replica may be downloading right now, and the objects a replica
// uploaded but has not recorded yet (its metadata operation follows the upload within seconds).
extension RemoteDatabase {
    /// Versions not collected yet that stopped being current before `cutoffNs` (replaced by a
    /// newer version, or their item deleted), whose object no live item still names.
    package func garbageVersions(before cutoffNs: Int64) async throws -> [GarbageVersion] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT v.item_id, v.content_version, v.content_key, v.size
                FROM docfs_versions v JOIN docfs_items i ON i.id = v.item_id
                WHERE v.collected_ns IS NULL AND v.content_key IS NOT NULL
                  AND ((i.deleted AND i.changed_ns < \(cutoffNs))
                       OR EXISTS (SELECT 1 FROM docfs_versions n WHERE n.item_id = v.item_id
                                  AND n.content_version > v.content_version AND n.created_ns < \(cutoffNs)))
                  AND NOT EXISTS (SELECT 1 FROM docfs_items l WHERE l.content_key = v.content_key AND NOT l.deleted)
                ORDER BY v.item_id, v.content_version
                """, logger: logger)
            var out: [GarbageVersion] = []
            for try await (item, version, key, size) in rows.decode((Int64, Int64, String, Int64).self) {
                out.append(GarbageVersion(itemID: item, contentVersion: version, key: key, size: size))
            }
            return out
        }
    }

    /// Records that the object behind `key` was removed from the bucket (every version naming it).
    package func markCollected(key: String) async throws {
        try await mapped { [self] in
            try await client.perform(
                """
                UPDATE docfs_versions SET collected_ns = \(unescaped: Self.serverNow) WHERE content_key = \(key) AND collected_ns IS NULL
                """, logger: logger)
        }
    }

    /// Records (or renews, in the server's time) the objects a replica is about to write: gc
    /// keeps them while the intent lives, whatever the objects' age.
    package func recordUploadIntents(_ keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        try await mapped { [self] in
            try await client.perform("SELECT docfs_record_intents(\(keys)::text[])", logger: logger)
        }
    }

    /// The versions naming these objects are committed (or the uploads were given up): this
    /// replica's intents of them go (another's stay).
    package func dropUploadIntents(_ keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        try await mapped { [self] in
            try await client.perform("SELECT docfs_drop_intents(\(keys)::text[])", logger: logger)
        }
    }

    /// Drops intents recorded before `cutoffNs` (server time): their replica stopped before it
    /// committed, and their objects become left-overs. Returns how many went.
    @discardableResult
    package func expireUploadIntents(before cutoffNs: Int64) async throws -> Int {
        try await mapped { [self] in
            let rows = try await client.query(
                "WITH gone AS (DELETE FROM docfs_upload_intents WHERE created_ns < \(cutoffNs) RETURNING 1) SELECT count(*) FROM gone",
                logger: logger)
            for try await (n) in rows.decode(Int64.self) { return Int(n) }
            return 0
        }
    }

    /// Whether any version that is not collected, any item, or an upload intent names this object key: an object
    /// in the bucket that nothing names is left over (an upload whose operation never reached
    /// the server, or a version collected while a retry uploaded it again).
    package func referencedKeys(_ keys: [String]) async throws -> Set<String> {
        guard !keys.isEmpty else { return [] }
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT content_key FROM docfs_versions WHERE content_key = ANY(\(keys)) AND collected_ns IS NULL
                UNION SELECT content_key FROM docfs_items WHERE content_key = ANY(\(keys)) AND NOT deleted
                UNION SELECT key FROM docfs_upload_intents WHERE key = ANY(\(keys))
                """, logger: logger)
            var out: Set<String> = []
            for try await (key) in rows.decode(String.self) { out.insert(key) }
            return out
        }
    }

    /// What `trimHistory` removed.
    package struct TrimmedHistory: Sendable, Equatable {
        package var operations = 0
        package var versionRows = 0
        package var tombstones = 0
    }

    /// Drops what only the past needed, older than `cutoffNs` (the change log's own cutoff, run
    /// after `trimChangeLog`): applied operation ids (a retry older than that is not expected),
    /// the rows of versions whose objects gc removed, and deleted items (tombstones) no version,
    /// change log entry or child names any more, deepest first. A replica away for longer
    /// rebuilds from a full listing, where items the server no longer has are gone.
    package func trimHistory(before cutoffNs: Int64) async throws -> TrimmedHistory {
        let logger = self.logger
        let lock = try await writersLockQuery()
        // A file's tombstone goes after those of its names (schema 12: they refer to it).
        let names =
            try await schemaVersion() >= ServerSchemaVersions.names
            ? "AND NOT EXISTS (SELECT 1 FROM docfs_items n WHERE n.link_of = i.id)" : ""
        return try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> TrimmedHistory in
                try await conn.perform(PostgresQuery(unsafeSQL: lock), logger: logger)
                func count(_ query: PostgresQuery) async throws -> Int {
                    var n: Int64 = 0
                    for try await (c) in try await conn.query(query, logger: logger).decode(Int64.self) { n = c }
                    return Int(n)
                }
                var trimmed = TrimmedHistory()
                trimmed.operations = try await count(
                    "WITH gone AS (DELETE FROM docfs_operations WHERE applied_ns < \(cutoffNs) RETURNING 1) SELECT count(*) FROM gone")
                trimmed.versionRows = try await count(
                    """
                    WITH gone AS (DELETE FROM docfs_versions WHERE collected_ns IS NOT NULL AND collected_ns < \(cutoffNs) RETURNING 1)
                    SELECT count(*) FROM gone
                    """)
                for _ in 0..<256 {
                    let n = try await count(
                        """
                        WITH gone AS (
                            DELETE FROM docfs_items i WHERE i.deleted AND i.parent_id IS NOT NULL AND i.changed_ns < \(cutoffNs)
                              AND NOT EXISTS (SELECT 1 FROM docfs_items c WHERE c.parent_id = i.id)
                              AND NOT EXISTS (SELECT 1 FROM docfs_versions v WHERE v.item_id = i.id)
                              AND NOT EXISTS (SELECT 1 FROM docfs_changes l WHERE l.item_id = i.id) \(unescaped: names)
                            RETURNING 1)
                        SELECT count(*) FROM gone
                        """)
                    trimmed.tombstones += n
                    if n == 0 { break }
                }
                return trimmed
            }
        }
    }

    /// Drops change log entries made before `cutoffNs`, but never the newest one (the log's
    /// position must not go back), and moves `log_start` past them: a replica whose anchor is
    /// older rebuilds from a full listing. Returns how many entries went.
    @discardableResult
    package func trimChangeLog(before cutoffNs: Int64) async throws -> Int {
        let logger = self.logger
        let lock = try await writersLockQuery()
        return try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> Int in
                // Writers hold this lock while they append: the newest position is stable here.
                try await conn.perform(PostgresQuery(unsafeSQL: lock), logger: logger)
                let last = try await conn.query(
                    """
                    SELECT max(position) FROM docfs_changes
                    WHERE at_ns < \(cutoffNs) AND position < (SELECT max(position) FROM docfs_changes)
                    """, logger: logger)
                var end: Int64?
                for try await (p) in last.decode(Int64?.self) { end = p }
                guard let end else { return 0 }
                let deleted = try await conn.query(
                    "WITH gone AS (DELETE FROM docfs_changes WHERE position <= \(end) RETURNING 1) SELECT count(*) FROM gone",
                    logger: logger)
                var count: Int64 = 0
                for try await (n) in deleted.decode(Int64.self) { count = n }
                try await conn.perform(
                    """
                    INSERT INTO docfs_meta (key, value) VALUES ('log_start', \(String(end + 1)))
                    ON CONFLICT (key) DO UPDATE SET value = excluded.value
                    """, logger: logger)
                return Int(count)
            }
        }
    }
}
