import Foundation
import Logging
import PostgresNIO

/// A block marked damaged (schema 9): where it was read, and whether a manifest still names it.
package struct DamagedBlock: Sendable, Codable, Equatable {
    package var hash: String
    package var pack: String
    package var offset: Int64
    package var length: Int64
    /// Some manifest names it: a version needs the bytes (a replica holding them re-sends them).
    package var named: Bool
    package init(hash: String, pack: String, offset: Int64, length: Int64, named: Bool) {
        self.hash = hash
        self.pack = pack
        self.offset = offset
        self.length = length
        self.named = named
    }
}

/// A live item whose current contents name damaged blocks: what a replica holding its bytes sends.
package struct DamagedContent: Sendable, Equatable {
    package var itemID: Int64
    package var key: String
    package var hashes: [String]
    package init(itemID: Int64, key: String, hashes: [String]) {
        self.itemID = itemID
        self.key = key
        self.hashes = hashes
    }
}

/// A version (kept, not collected) that names a damaged block (`docfs remote check`).
package struct DamagedVersion: Sendable, Codable, Equatable {
    package var itemID: Int64
    package var path: String
    package var contentVersion: Int64
    package var current: Bool
    package var deleted: Bool
    package var key: String
    package var damagedBlocks: Int
}

// Damaged blocks (schema 9, `RemoteSchema+Damage`): a reader marks what it found damaged, the
// replicas ask which of their files need sending again, the owner's check lists the harm.
extension RemoteDatabase {
    /// Reports the place of a block where it was read as damaged (schema 16: a report flags
    /// the place; two roles' reports drop it unless it is the block's only one); false when no
    /// such place is there (moved or gone since). Through the server's function: the replica
    /// role may not UPDATE blocks.
    @discardableResult
    package func markBlockDamaged(hash: String, pack: String) async throws -> Bool {
        try await mapped { [self] in
            let rows = try await client.query("SELECT docfs_mark_block_damaged(\(hash), \(pack))", logger: logger)
            for try await (marked) in rows.decode(Bool.self) { return marked }
            return false
        }
    }

    /// Live items whose current contents name a block without a sound place (every place
    /// flagged: schema 16), with those blocks. A block with a sound place needs nothing sent.
    package func damagedContents() async throws -> [DamagedContent] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT i.id, i.content_key, array_agg(DISTINCT b.hash ORDER BY b.hash)
                FROM docfs_blocks b JOIN docfs_manifest_blocks mb ON mb.hash = b.hash
                       AND coalesce((to_jsonb(mb)->>'length')::bigint, b.length) = b.length
                     JOIN docfs_items i ON i.content_key = mb.key AND NOT i.deleted
                WHERE b.damaged_ns IS NOT NULL
                  AND NOT EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = b.hash AND s.length = b.length AND s.damaged_ns IS NULL)
                GROUP BY i.id, i.content_key ORDER BY i.id
                """, logger: logger)
            var out: [DamagedContent] = []
            for try await (id, key, hashes) in rows.decode((Int64, String, [String]).self) {
                out.append(DamagedContent(itemID: id, key: key, hashes: hashes))
            }
            return out
        }
    }

    /// Every place flagged damaged (reported by a reader or the owner's check), each with
    /// whether a manifest names its block.
    package func damagedBlocks() async throws -> [DamagedBlock] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT b.hash, b.pack_key, b.pack_offset, b.length,
                       EXISTS (SELECT 1 FROM docfs_manifest_blocks mb WHERE mb.hash = b.hash
                               AND coalesce((to_jsonb(mb)->>'length')::bigint, b.length) = b.length)
                FROM docfs_blocks b WHERE b.damaged_ns IS NOT NULL ORDER BY b.pack_key, b.pack_offset
                """, logger: logger)
            var out: [DamagedBlock] = []
            for try await (hash, pack, offset, length, named) in rows.decode((String, String, Int64, Int64, Bool).self) {
                out.append(DamagedBlock(hash: hash, pack: pack, offset: offset, length: length, named: named))
            }
            return out
        }
    }

    /// Versions not collected whose manifests name a block without a sound place, by path.
    package func damagedVersions() async throws -> [DamagedVersion] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                WITH unsound AS (SELECT b.hash, b.length FROM docfs_blocks b GROUP BY b.hash, b.length
                                 HAVING bool_and(b.damaged_ns IS NOT NULL)),
                     named AS (SELECT mb.key, mb.hash FROM docfs_manifest_blocks mb JOIN unsound u ON u.hash = mb.hash
                                 AND coalesce((to_jsonb(mb)->>'length')::bigint, u.length) = u.length)
                SELECT v.item_id, docfs_item_path(v.item_id), v.content_version,
                       i.content_version = v.content_version AND NOT i.deleted, i.deleted, v.content_key,
                       (SELECT count(DISTINCT n.hash) FROM named n WHERE n.key = v.content_key)
                FROM docfs_versions v JOIN docfs_items i ON i.id = v.item_id
                WHERE v.collected_ns IS NULL AND v.content_key IN (SELECT n.key FROM named n)
                ORDER BY 2, v.content_version
                """, logger: logger)
            var out: [DamagedVersion] = []
            for try await (id, path, version, current, deleted, key, count)
                in rows.decode((Int64, String, Int64, Bool, Bool, String, Int64).self)
            {
                out.append(
                    DamagedVersion(
                        itemID: id, path: "/" + path, contentVersion: version, current: current,
                        deleted: deleted, key: key, damagedBlocks: Int(count)))
            }
            return out
        }
    }

    /// Clears the reports of a place found sound where it is (the owner's check: a pack
    /// mended, or a false report).
    package func clearDamage(hash: String, pack: String) async throws {
        let logger = self.logger
        try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn in
                try await conn.perform("DELETE FROM docfs_block_reports WHERE hash = \(hash) AND pack_key = \(pack)", logger: logger)
                try await conn.perform(
                    """
                    UPDATE docfs_blocks SET damaged_ns = NULL, reports = 0, confirmed = false WHERE hash = \(hash) AND pack_key = \(pack)
                    """, logger: logger)
            }
        }
    }

    /// The owner's check read this place and found it damaged: it is dropped, unless it is its
    /// block's only place (then it stays flagged, until a sound place is recorded). False when
    /// no such place is there.
    @discardableResult
    package func confirmDamagedPlace(hash: String, pack: String) async throws -> Bool {
        try await mapped { [self] in
            let rows = try await client.query("SELECT docfs_confirm_damaged_place(\(hash), \(pack))", logger: logger)
            for try await (found) in rows.decode(Bool.self) { return found }
            return false
        }
    }
}
