import Foundation
import Logging
import PostgresNIO

/// A block in the bucket: its SHA-256 (hex), the pack object holding it and where; `version`,
/// the version of the pack object to read (schema 18; nil: whichever is current).
package struct StoredBlock: Sendable, Hashable, Codable {
    package var hash: String
    package var pack: String
    package var offset: Int64
    package var length: Int64
    package var version: String?
    package init(hash: String, pack: String, offset: Int64, length: Int64, version: String? = nil) {
        self.hash = hash
        self.pack = pack
        self.offset = offset
        self.length = length
        self.version = version
    }
}

/// A content version made of blocks: the key its versions name, its size, its blocks in order
/// (a block is its hash and its length, schema 20; `lengths` empty: not sent, and the server
/// takes each hash's length from the places the replica counts on, as before).
package struct BlockManifest: Sendable, Equatable {
    package var key: String
    package var size: Int64
    package var hashes: [String]
    package var lengths: [Int64]
    package init(key: String, size: Int64, hashes: [String], lengths: [Int64] = []) {
        self.key = key
        self.size = size
        self.hashes = hashes
        self.lengths = lengths
    }
}

/// A pack object and the bytes of it that blocks still use (gc).
package struct PackUsage: Sendable, Equatable {
    package var key: String
    package var liveBytes: Int64
    package var blocks: Int
}

// Blocks (schema 8, `RemoteSchema+Blocks`): what a replica asks before and after uploading
// packs, what a reader asks to find a version's blocks, what gc asks to drop and repack them.
extension RemoteDatabase {
    /// Which of these blocks the bucket already holds (another file's, another replica's). A
    /// block marked damaged is not held: the upload sends its bytes again (schema 9).
    package func knownBlocks(_ hashes: [String]) async throws -> Set<String> {
        guard !hashes.isEmpty else { return [] }
        return try await mapped { [self] in
            // Schema 16's `docfs_place_vouched`, inline so that an older server answers too
            // (there every pack is in the flat folder, which counts): a place in another
            // replica's folder is bytes its keys may still overwrite; `docfs_record_manifests`
            // holds the same rule.
            let rows = try await client.query(
                """
                SELECT DISTINCT b.hash FROM docfs_blocks b
                WHERE b.hash = ANY(\(hashes)) AND b.damaged_ns IS NULL
                  AND (strpos(substring(b.pack_key from '(?:^|/)packs/(.*)$'), '/') = 0
                       OR split_part(substring(b.pack_key from '(?:^|/)packs/(.*)$'), '/', 1)
                          IN (session_user::text, pg_get_userbyid((SELECT c.relowner FROM pg_class c WHERE c.oid = 'docfs_blocks'::regclass))))
                """, logger: logger)
            var out: Set<String> = []
            for try await (hash) in rows.decode(String.self) { out.insert(hash) }
            return out
        }
    }

    /// Records a pack this replica uploaded under its upload intent (`docfs_record_pack`), and
    /// its blocks: a block recorded before keeps its place, unless it was marked damaged (then it
    /// takes this one and loses its mark). A pack whose intent expired (gc may have taken it) is
    /// refused as worth retrying: the replica uploads it again. `version`: the version of the
    /// object the upload made (schema 18), which readers then ask for; nil: none (a bucket without
    /// versioning), recorded through the five-argument form an older server has too.
    package func recordPack(_ key: String, size: Int64, blocks: [StoredBlock], version: String? = nil) async throws {
        guard !blocks.isEmpty else { return }
        let logger = self.logger
        // A server before schema 18 has no version to record (its owner has not turned
        // versioning on through docfs): the pack is recorded as there.
        let version = version == nil ? nil : try await schemaVersion() >= RemoteSchema.packVersionsVersion ? version : nil
        try await mapped { [self] in
            if let version {
                try await client.perform(
                    """
                    SELECT docfs_record_pack(\(key), \(size), \(blocks.map(\.hash))::text[], \(blocks.map(\.offset))::bigint[],
                                             \(blocks.map(\.length))::bigint[], \(version)::text)
                    """, logger: logger)
            } else {
                try await client.perform(
                    """
                    SELECT docfs_record_pack(\(key), \(size), \(blocks.map(\.hash))::text[], \(blocks.map(\.offset))::bigint[],
                                             \(blocks.map(\.length))::bigint[])
                    """, logger: logger)
            }
        }
    }

    /// Records manifests (each with an intent, until a version names it) and drops the intents
    /// of the packs they are made of, in one call (`docfs_record_manifests`). A manifest may name
    /// blocks recorded before (found by `knownBlocks`); those gone or marked damaged meanwhile
    /// are answered and nothing is recorded (the replica uploads them and asks again). A
    /// manifest recorded before (a retried operation: its key names its contents, so the same
    /// bytes) stays as it was.
    package func recordManifests(_ manifests: [BlockManifest], donePacks: [String]) async throws -> Set<String> {
        guard !manifests.isEmpty || !donePacks.isEmpty else { return [] }
        // `lengths` left out when empty: a server before schema 20 reads none, and one after takes
        // a manifest without them as a replica before 20 sent it.
        struct Wire: Encodable { var key: String; var size: Int64; var hashes: [String]; var lengths: [Int64]? }
        let json = String(
            decoding: try JSONEncoder().encode(
                manifests.map { Wire(key: $0.key, size: $0.size, hashes: $0.hashes, lengths: $0.lengths.isEmpty ? nil : $0.lengths) }),
            as: UTF8.self)
        let logger = self.logger
        return try await mapped { [self] in
            let rows = try await client.query("SELECT docfs_record_manifests(\(json)::jsonb, \(donePacks)::text[])", logger: logger)
            var missing: Set<String> = []
            for try await (hashes) in rows.decode([String].self) { missing.formUnion(hashes) }
            return missing
        }
    }

    /// A version's size and blocks in order, each at its soundest place (schema 16: not
    /// flagged first, then the fewest reports, then the oldest) of the length the manifest names
    /// (schema 20: a place of another length is another block's); nil when `key` names no
    /// manifest (a whole object, uploaded before schema 8). A reader that finds a place damaged
    /// reports it and asks `places` for the block's others.
    package func manifest(key: String) async throws -> (size: Int64, blocks: [StoredBlock])? {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT m.size, b.hash, b.pack_key, b.pack_offset, b.length, b.version
                FROM docfs_manifests m LEFT JOIN docfs_manifest_blocks mb ON mb.key = m.key
                     LEFT JOIN LATERAL (SELECT p.hash, p.pack_key, p.pack_offset, p.length,
                                               to_jsonb(p)->>'pack_version' AS version FROM docfs_blocks p
                                        WHERE p.hash = mb.hash
                                          AND p.length = coalesce((to_jsonb(mb)->>'length')::bigint, p.length)
                                        ORDER BY p.damaged_ns IS NOT NULL, p.reports, p.created_ns, p.pack_key LIMIT 1) b ON true
                WHERE m.key = \(key) ORDER BY mb.ordinal
                """, logger: logger)
            var size: Int64?
            var blocks: [StoredBlock] = []
            for try await (total, hash, pack, offset, length, version)
                in rows.decode((Int64, String?, String?, Int64?, Int64?, String?).self)
            {
                size = total
                if let hash, let pack, let offset, let length {
                    blocks.append(StoredBlock(hash: hash, pack: pack, offset: offset, length: length, version: version))
                }
            }
            return size.map { ($0, blocks) }
        }
    }

    /// Every place of these blocks, soundest first (as `manifest` orders them).
    package func places(of hashes: [String]) async throws -> [String: [StoredBlock]] {
        guard !hashes.isEmpty else { return [:] }
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT hash, pack_key, pack_offset, length, to_jsonb(b)->>'pack_version' FROM docfs_blocks b WHERE hash = ANY(\(hashes))
                ORDER BY hash, damaged_ns IS NOT NULL, reports, created_ns, pack_key
                """, logger: logger)
            var out: [String: [StoredBlock]] = [:]
            for try await (hash, pack, offset, length, version) in rows.decode((String, String, Int64, Int64, String?).self) {
                out[hash, default: []].append(StoredBlock(hash: hash, pack: pack, offset: offset, length: length, version: version))
            }
            return out
        }
    }
}

// What gc asks about blocks (the owner's work).
extension RemoteDatabase {
    /// Drops the manifests of collected versions (their blocks stay while another names them).
    package func dropManifests(_ keys: [String]) async throws {
        guard !keys.isEmpty else { return }
        try await mapped { [self] in
            try await client.perform("DELETE FROM docfs_manifests WHERE key = ANY(\(keys))", logger: logger)
        }
    }

    /// Drops blocks no manifest names, with their places, recorded before `cutoffNs` (a replica
    /// records a pack's blocks as soon as it is in, before the manifests), but for those with a
    /// place in a pack an upload still runs for (its intent, renewed while it runs); returns
    /// how many and their bytes. The block row goes (schema 16), its places with it: a manifest
    /// naming it meanwhile makes the delete fail on its foreign key, so a named block never goes.
    /// A block is its hash and its length (schema 20; before, a hash had one length): a manifest
    /// naming the hash with another length keeps another block.
    package func dropUnnamedBlocks(before cutoffNs: Int64) async throws -> (count: Int, bytes: Int64) {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                WITH gone AS (DELETE FROM docfs_block_ids i
                              WHERE i.created_ns < \(cutoffNs)
                                AND NOT EXISTS (SELECT 1 FROM docfs_manifest_blocks mb WHERE mb.hash = i.hash
                                                AND coalesce((to_jsonb(mb)->>'length')::bigint, i.length) = i.length)
                                AND NOT EXISTS (SELECT 1 FROM docfs_blocks p WHERE p.hash = i.hash AND p.length = i.length
                                                AND (p.created_ns >= \(cutoffNs)
                                                     OR EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = p.pack_key)))
                              RETURNING length)
                SELECT count(*), coalesce(sum(length), 0)::bigint FROM gone
                """, logger: logger)
            var dropped = (count: 0, bytes: Int64(0))
            for try await (n, bytes) in rows.decode((Int64, Int64).self) { dropped = (Int(n), bytes) }
            // Packs recorded (schema 11) that no block is in any more: their sizes go too.
            try await client.perform(
                """
                DELETE FROM docfs_packs p WHERE p.created_ns < \(cutoffNs)
                  AND NOT EXISTS (SELECT 1 FROM docfs_blocks b WHERE b.pack_key = p.key)
                  AND NOT EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = p.key)
                """, logger: logger)
            return dropped
        }
    }

    /// Every pack some block is in, with the bytes blocks use.
    package func packUsage() async throws -> [String: PackUsage] {
        try await mapped { [self] in
            let rows = try await client.query(
                "SELECT pack_key, sum(length)::bigint, count(*) FROM docfs_blocks GROUP BY pack_key", logger: logger)
            var out: [String: PackUsage] = [:]
            for try await (key, bytes, n) in rows.decode((String, Int64, Int64).self) {
                out[key] = PackUsage(key: key, liveBytes: bytes, blocks: Int(n))
            }
            return out
        }
    }

    /// These packs' live bytes and blocks, and whether an upload intent names them, read in one
    /// statement (one snapshot): an upload moves a pack from "intent, no rows" to "rows" (its
    /// intent dropped only after), so gc never sees one of its packs with neither.
    package func packStates(_ keys: [String]) async throws -> [String: (usage: PackUsage, pending: Bool)] {
        guard !keys.isEmpty else { return [:] }
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT k, coalesce(b.bytes, 0)::bigint, coalesce(b.n, 0)::bigint,
                       EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = k)
                FROM unnest(\(keys)::text[]) AS k
                LEFT JOIN (SELECT pack_key, sum(length) AS bytes, count(*) AS n FROM docfs_blocks
                           WHERE pack_key = ANY(\(keys)) GROUP BY pack_key) b ON b.pack_key = k
                """, logger: logger)
            var out: [String: (usage: PackUsage, pending: Bool)] = [:]
            for try await (key, bytes, n, pending) in rows.decode((String, Int64, Int64, Bool).self) {
                out[key] = (PackUsage(key: key, liveBytes: bytes, blocks: Int(n)), pending)
            }
            return out
        }
    }

    /// The blocks of one pack (each with the pack's recorded version, schema 18).
    package func blocks(inPack key: String) async throws -> [StoredBlock] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT hash, pack_offset, length, to_jsonb(b)->>'pack_version' FROM docfs_blocks b WHERE pack_key = \(key) ORDER BY pack_offset
                """, logger: logger)
            var out: [StoredBlock] = []
            for try await (hash, offset, length, version) in rows.decode((String, Int64, Int64, String?).self) {
                out.append(StoredBlock(hash: hash, pack: key, offset: offset, length: length, version: version))
            }
            return out
        }
    }

    /// Points places at their copies in a new pack (gc's repacking), those still in `from`; each
    /// was checked against its hash, so the reports of damage go.
    package func moveBlocks(_ moved: [StoredBlock], from pack: String) async throws {
        guard !moved.isEmpty else { return }
        try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn in
                try await conn.perform(
                    """
                    DELETE FROM docfs_block_reports r WHERE r.pack_key = \(pack) AND r.hash = ANY(\(moved.map(\.hash)))
                    """, logger: logger)
                try await conn.perform(
                    """
                    UPDATE docfs_blocks b SET pack_key = m.p, pack_offset = m.o, damaged_ns = NULL, reports = 0, confirmed = false
                    FROM unnest(\(moved.map(\.hash))::text[], \(moved.map(\.pack))::text[], \(moved.map(\.offset))::bigint[]) AS m(h, p, o)
                    WHERE b.hash = m.h AND b.pack_key = \(pack)
                    """, logger: logger)
                // The new pack's version (schema 18; the owner's gc runs on a schema it migrated).
                if let version = moved.first?.version {
                    try await conn.perform(
                        """
                        UPDATE docfs_blocks SET pack_version = \(version) WHERE pack_key = \(moved[0].pack)
                        """, logger: logger)
                }
            }
        }
    }
}

extension RemoteDatabase {
    /// Drops manifests no version, item or upload intent names, recorded before `cutoffNs` (a
    /// replica that recorded its blocks and stopped before its versions). Returns how many.
    ///
    /// Under the writers' lock, which a replica's batch holds until it commits: the statement
    /// then sees every version committed so far. (The version's check holds the manifest's row,
    /// but a row lock only delays a DELETE: a delete that waited for a commit went on once it
    /// came, and the committed version named a manifest gone.)
    package func dropOrphanManifests(before cutoffNs: Int64) async throws -> Int {
        let logger = self.logger
        let lock = try await writersLockQuery()
        return try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn -> Int in
                try await conn.perform(PostgresQuery(unsafeSQL: lock), logger: logger)
                let rows = try await conn.query(
                    """
                    WITH gone AS (DELETE FROM docfs_manifests m WHERE m.created_ns < \(cutoffNs)
                                    AND NOT EXISTS (SELECT 1 FROM docfs_versions v WHERE v.content_key = m.key)
                                    AND NOT EXISTS (SELECT 1 FROM docfs_items i WHERE i.content_key = m.key)
                                    AND NOT EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = m.key)
                                  RETURNING 1)
                    SELECT count(*) FROM gone
                    """, logger: logger)
                var n: Int64 = 0
                for try await (c) in rows.decode(Int64.self) { n = c }
                return Int(n)
            }
        }
    }
}
