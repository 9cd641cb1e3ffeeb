/// Version 20 of the server's schema: a block is its hash and its length, end to end.
///
/// Schema 16 settled a block's length by its first place, whoever recorded it, and refused every
/// later place of another length. A replica could so record, in advance, a guessable block (a
/// run of zeros, a well-known small file) with a wrong length in its own pack: from then on every
/// other replica's upload of those bytes was refused, and with it the whole pack they were in.
/// The server never sees the bytes, so it cannot tell which length is true; it no longer has to:
/// - `docfs_block_ids` is keyed by (hash, length): a place of another length is a place of
///   another block, which no manifest of the others names (theirs name their own lengths).
/// - `docfs_manifest_blocks.length`: each manifest names its blocks by hash and length (filled
///   from the one length each hash had before). The manifest's size is the sum of those lengths.
/// - `docfs_record_manifests` takes each manifest's `lengths` beside its `hashes`; a replica
///   before this version sends none, and each hash then takes the length of a sound place it
///   counts on (else the oldest block of that hash), as before.
/// - Dedup counts a block as had only where a sound place of that hash *and length* is in a pack
///   the caller counts on (`docfs_place_vouched`); readers take only places of the length the
///   manifest names (`RemoteDatabase.manifest`).
/// - `docfs_record_pack_places` refuses a place whose length disagrees with one of the same hash
///   in the same call, or with a sound place in a pack the caller counts on (the owner's, checked
///   by gc, or the caller's own): a replica cannot contradict itself or the owner, and no one
///   else's record can refuse it.
/// - A place confirmed damaged is dropped only while its block (hash and length) has another.
extension RemoteSchema {
    package static let blockLengthsVersion = 20

    static let blockLengthStatements: [String] = [
        "ALTER TABLE docfs_manifest_blocks ADD COLUMN IF NOT EXISTS length bigint",
        // Before this version a hash had one length (docfs_block_ids was keyed by the hash).
        """
        UPDATE docfs_manifest_blocks mb SET length = i.length FROM docfs_block_ids i
         WHERE mb.length IS NULL AND i.hash = mb.hash
        """,
        "ALTER TABLE docfs_manifest_blocks DROP CONSTRAINT IF EXISTS docfs_manifest_blocks_block",
        "ALTER TABLE docfs_blocks DROP CONSTRAINT IF EXISTS docfs_blocks_block",
        """
        DO $do$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'docfs_block_ids'::regclass AND contype = 'p'
                           AND array_length(conkey, 1) = 2) THEN
                ALTER TABLE docfs_block_ids DROP CONSTRAINT IF EXISTS docfs_block_ids_pkey;
                ALTER TABLE docfs_block_ids ADD PRIMARY KEY (hash, length);
            END IF;
        END
        $do$
        """,
        "ALTER TABLE docfs_manifest_blocks ALTER COLUMN length SET NOT NULL",
        """
        ALTER TABLE docfs_manifest_blocks ADD CONSTRAINT docfs_manifest_blocks_block
            FOREIGN KEY (hash, length) REFERENCES docfs_block_ids (hash, length)
        """,
        """
        ALTER TABLE docfs_blocks ADD CONSTRAINT docfs_blocks_block
            FOREIGN KEY (hash, length) REFERENCES docfs_block_ids (hash, length) ON DELETE CASCADE
        """,
        "CREATE INDEX IF NOT EXISTS docfs_manifest_blocks_hash_length ON docfs_manifest_blocks (hash, length)",
        "DROP INDEX IF EXISTS docfs_manifest_blocks_hash",
        // Every place is a place of its block (hash and length), made by its first place.
        """
        CREATE OR REPLACE FUNCTION docfs_block_place() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        BEGIN
            INSERT INTO docfs_block_ids (hash, length, created_ns) VALUES (NEW.hash, NEW.length, NEW.created_ns)
            ON CONFLICT (hash, length) DO NOTHING;
            RETURN NEW;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_confirm_damaged_place(p_hash text, p_pack text) RETURNS boolean LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            len bigint;
        BEGIN
            PERFORM 1 FROM docfs_block_ids i WHERE i.hash = p_hash FOR NO KEY UPDATE;
            UPDATE docfs_blocks SET damaged_ns = coalesce(damaged_ns, docfs_now()), confirmed = true
             WHERE hash = p_hash AND pack_key = p_pack RETURNING length INTO len;
            IF NOT FOUND THEN RETURN false; END IF;
            DELETE FROM docfs_blocks b WHERE b.hash = p_hash AND b.pack_key = p_pack
               AND EXISTS (SELECT 1 FROM docfs_blocks o WHERE o.hash = p_hash AND o.length = len AND o.pack_key <> p_pack);
            RETURN true;
        END
        $fn$
        """,
        recordPackPlaces,
        recordManifestsWithLengths,
        "REVOKE ALL ON FUNCTION docfs_record_pack_places(text, bigint, text[], bigint[], bigint[]) FROM PUBLIC",
    ]

    /// Schema 16's checks of a pack and its places (called by `docfs_record_pack`, schema 18),
    /// with blocks keyed by hash and length.
    static let recordPackPlaces = """
        CREATE OR REPLACE FUNCTION docfs_record_pack_places(p_pack text, p_size bigint, p_hashes text[], p_offsets bigint[],
                                                            p_lengths bigint[])
        RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
        SET plan_cache_mode = force_custom_plan AS $fn$
        DECLARE
            n integer := coalesce(cardinality(p_hashes), 0);
            recorded bigint;
            added integer;
            bad text;
        BEGIN
            IF NOT docfs_pack_key_ok(p_pack) THEN
                RAISE EXCEPTION 'not a pack of this tree: %', left(coalesce(p_pack, 'NULL'), 300) USING ERRCODE = 'DF014';
            END IF;
            IF NOT docfs_pack_is_callers(p_pack) THEN
                RAISE EXCEPTION 'the pack % is not under this replica''s folder (packs/%/)', left(p_pack, 300), session_user
                    USING ERRCODE = 'DF014';
            END IF;
            -- Under this replica's live intent: gc may have taken a pack whose intent expired.
            PERFORM 1 FROM docfs_upload_intents u WHERE u.key = p_pack AND u.role IS NOT DISTINCT FROM session_user FOR KEY SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the pack % has no upload intent of this replica (expired, or never recorded); sent again', p_pack
                    USING ERRCODE = 'DF001';
            END IF;
            IF p_size IS NULL OR p_size <= 0 OR p_size > 4294967296 THEN
                RAISE EXCEPTION 'not a pack size: %', p_size USING ERRCODE = 'DF014';
            END IF;
            IF coalesce(cardinality(p_offsets), 0) <> n OR coalesce(cardinality(p_lengths), 0) <> n OR n = 0 THEN
                RAISE EXCEPTION 'blocks: arrays of different lengths, or none' USING ERRCODE = 'DF014';
            END IF;
            FOR i IN 1 .. n LOOP
                IF p_hashes[i] IS NULL OR p_hashes[i] !~ '\(hashPattern)' THEN
                    RAISE EXCEPTION 'not a block hash: %', left(coalesce(p_hashes[i], 'NULL'), 100) USING ERRCODE = 'DF014';
                END IF;
                IF p_offsets[i] IS NULL OR p_offsets[i] < 0 OR p_lengths[i] IS NULL OR p_lengths[i] <= 0
                   OR p_offsets[i] + p_lengths[i] > p_size THEN
                    RAISE EXCEPTION 'not a place in a pack of % bytes: % bytes at %', p_size, p_lengths[i], p_offsets[i]
                        USING ERRCODE = 'DF014';
                END IF;
            END LOOP;
            INSERT INTO docfs_packs (key, size, role, created_ns) VALUES (p_pack, p_size, session_user, docfs_now())
            ON CONFLICT (key) DO NOTHING;
            SELECT size INTO recorded FROM docfs_packs WHERE key = p_pack;
            IF recorded <> p_size THEN
                RAISE EXCEPTION 'the pack % was recorded with % bytes, not %', p_pack, recorded, p_size USING ERRCODE = 'DF014';
            END IF;
            -- One hash has one length (its bytes'): a call naming two, or one that disagrees with a
            -- sound place this caller counts on (the owner's packs, checked by gc; its own), is
            -- refused. Another replica's place decides nothing here: its length is its block's.
            SELECT b.h INTO bad FROM unnest(p_hashes, p_lengths) AS b(h, l)
             WHERE EXISTS (SELECT 1 FROM unnest(p_hashes, p_lengths) AS c(h, l) WHERE c.h = b.h AND c.l <> b.l)
                OR EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = b.h AND s.length <> b.l AND s.damaged_ns IS NULL
                           AND docfs_place_vouched(s.pack_key))
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'block %: a place whose length is not the block''s', bad USING ERRCODE = 'DF014';
            END IF;
            -- A new place for a block (hash and length) that has no sound one this replica may
            -- count on; never in place of another.
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns, role)
            SELECT DISTINCT ON (h) h, p_pack, o, l, docfs_now(), session_user
              FROM unnest(p_hashes, p_offsets, p_lengths) AS b(h, o, l)
             WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = b.h AND s.length = b.l AND s.damaged_ns IS NULL
                               AND docfs_place_vouched(s.pack_key))
            ON CONFLICT (hash, pack_key) DO NOTHING;
            GET DIAGNOSTICS added = ROW_COUNT;
            -- Places confirmed damaged were kept while they were their block's only one.
            DELETE FROM docfs_blocks d WHERE d.confirmed AND d.hash = ANY(p_hashes)
               AND EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = d.hash AND s.length = d.length AND s.pack_key <> d.pack_key);
            RETURN added;
        END
        $fn$
        """

    /// `docfs_record_manifests` with each manifest's block lengths (`lengths`, beside `hashes`).
    static let recordManifestsWithLengths = """
        CREATE OR REPLACE FUNCTION docfs_record_manifests(p_manifests jsonb, p_done_packs text[]) RETURNS text[] LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
        SET plan_cache_mode = force_custom_plan AS $fn$
        DECLARE
            folder text;
            bad text;
            missing text[];
            keys text[];
            ordinals bigint[];
            hashes text[];
            lengths bigint[];
        BEGIN
            IF jsonb_typeof(p_manifests) IS DISTINCT FROM 'array' OR jsonb_array_length(p_manifests) > 4096 THEN
                RAISE EXCEPTION 'a list of at most 4096 manifests' USING ERRCODE = 'DF014';
            END IF;
            -- Set-wise (one statement per rule, not per manifest): a chunk's manifests in one call.
            SELECT left(m.value, length(m.value) - length('packs/')) || 'manifests/' INTO folder
              FROM docfs_meta m WHERE m.key = 'packs_folder';
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE e->>'key' IS NULL OR NOT CASE WHEN folder IS NULL THEN e->>'key' ~ '(^|/)manifests/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-[0-9a-f]{16}$'
                 ELSE left(e->>'key', length(folder)) = folder AND substr(e->>'key', length(folder) + 1) ~ '\(manifestNamePattern)' END
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'not a manifest of this tree: %', left(coalesce(bad, 'NULL'), 300) USING ERRCODE = 'DF014';
            END IF;
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE jsonb_typeof(e->'hashes') IS DISTINCT FROM 'array' OR jsonb_typeof(e->'size') IS DISTINCT FROM 'number'
                OR (e->>'size')::numeric < 0 OR (e->>'size')::numeric > 9223372036854775807
                OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'hashes') h WHERE jsonb_typeof(h) <> 'string' OR h #>> '{}' !~ '\(hashPattern)')
                OR (e ? 'lengths' AND (jsonb_typeof(e->'lengths') IS DISTINCT FROM 'array'
                    OR jsonb_array_length(e->'lengths') <> jsonb_array_length(e->'hashes')
                    OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'lengths') l
                               WHERE jsonb_typeof(l) <> 'number' OR (l #>> '{}')::numeric <= 0
                                  OR (l #>> '{}')::numeric > 4294967296 OR (l #>> '{}')::numeric <> trunc((l #>> '{}')::numeric))))
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists something that is not a block hash or length, or has no size', bad
                    USING ERRCODE = 'DF014';
            END IF;
            -- Schema 15's bounds (docfs_manifest_bounds checks them again on insert), before any
            -- work that grows with the count: blocks for the size, and repeats of one hash.
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE jsonb_array_length(e->'hashes') > \(maximumManifestBlocks)
                OR jsonb_array_length(e->'hashes') > (e->>'size')::numeric / \(manifestBytesPerBlock) + 16
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists more blocks than its size allows (one per \(manifestBytesPerBlock) bytes, \(maximumManifestBlocks) at most)', bad
                    USING ERRCODE = 'DF014';
            END IF;
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE jsonb_array_length(e->'hashes') > \(maximumHashRepeats)
               AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(e->'hashes') h GROUP BY h HAVING count(*) > \(maximumHashRepeats))
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists one block more than \(maximumHashRepeats) times', bad USING ERRCODE = 'DF014';
            END IF;
            -- Each manifest's blocks, by hash and length. Without `lengths` (a replica before
            -- schema 20) a hash takes the length of a sound place the caller counts on, else that
            -- of its oldest block: asked once per hash, not per listing.
            WITH listed AS (
                SELECT e->>'key' AS k, b.n - 1 AS n, b.h,
                       CASE WHEN e ? 'lengths' THEN (e->'lengths'->>((b.n - 1)::int))::bigint END AS given
                  FROM jsonb_array_elements(p_manifests) e, jsonb_array_elements_text(e->'hashes') WITH ORDINALITY AS b(h, n)),
            legacy AS (
                SELECT d.h, coalesce((SELECT s.length FROM docfs_blocks s WHERE s.hash = d.h AND s.damaged_ns IS NULL
                                        AND docfs_place_vouched(s.pack_key) ORDER BY s.created_ns LIMIT 1),
                                     (SELECT i.length FROM docfs_block_ids i WHERE i.hash = d.h ORDER BY i.created_ns LIMIT 1)) AS l
                  FROM (SELECT DISTINCT h FROM listed WHERE given IS NULL) d)
            SELECT array_agg(x.k ORDER BY x.k, x.n), array_agg(x.n ORDER BY x.k, x.n), array_agg(x.h ORDER BY x.k, x.n),
                   array_agg(x.l ORDER BY x.k, x.n)
              INTO keys, ordinals, hashes, lengths
              FROM (SELECT DISTINCT ON (listed.k, listed.n) listed.k, listed.n, listed.h, coalesce(listed.given, legacy.l) AS l
                      FROM listed LEFT JOIN legacy ON legacy.h = listed.h) x;
            -- The blocks and their sound places stay until this transaction ends (gc waits for it).
            PERFORM 1 FROM docfs_blocks b WHERE b.hash IN (SELECT DISTINCT unnest(hashes)) AND b.damaged_ns IS NULL FOR KEY SHARE;
            -- Had: a sound place of that hash and length this caller may count on (`docfs_place_vouched`).
            missing := ARRAY(SELECT DISTINCT m.h FROM (SELECT DISTINCT u.h, u.l FROM unnest(hashes, lengths) AS u(h, l)) m
                             WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks b WHERE b.hash = m.h AND b.length = m.l
                                               AND b.damaged_ns IS NULL AND docfs_place_vouched(b.pack_key)));
            IF cardinality(missing) > 0 THEN RETURN missing; END IF;
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE (e->>'size')::bigint <> (SELECT coalesce(sum(m.l), 0) FROM unnest(keys, lengths) AS m(k, l) WHERE m.k = e->>'key')
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % holds another number of bytes in its blocks than its size', bad USING ERRCODE = 'DF014';
            END IF;
            -- Another replica's operation (its id is in the key), or its manifest, cannot be claimed.
            WITH w AS (SELECT e->>'key' AS key,
                              substring(e->>'key' from '([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-[0-9a-f]{16}$')::uuid AS op
                         FROM jsonb_array_elements(p_manifests) e)
            SELECT w.op::text INTO bad FROM w
             WHERE EXISTS (SELECT 1 FROM docfs_operations o WHERE o.operation_id = w.op AND o.role IS DISTINCT FROM session_user)
                OR EXISTS (SELECT 1 FROM docfs_manifests x WHERE x.operation_id = w.op AND x.role IS DISTINCT FROM session_user
                           AND x.role IS NOT NULL)
                OR EXISTS (SELECT 1 FROM docfs_manifests x WHERE x.key = w.key AND x.role IS DISTINCT FROM session_user
                           AND x.role IS NOT NULL)
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'operation % belongs to another replica', bad USING ERRCODE = 'DF003';
            END IF;
            -- One recorded before without a role (before schema 11): this replica's now.
            UPDATE docfs_manifests x SET role = session_user,
                   operation_id = substring(x.key from '([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-[0-9a-f]{16}$')::uuid
             WHERE x.role IS NULL AND x.key IN (SELECT e->>'key' FROM jsonb_array_elements(p_manifests) e);
            WITH w AS (SELECT DISTINCT ON (e->>'key') e->>'key' AS key, (e->>'size')::bigint AS size
                         FROM jsonb_array_elements(p_manifests) e),
            fresh AS (
                INSERT INTO docfs_manifests (key, size, created_ns, role, operation_id)
                SELECT w.key, w.size, docfs_now(), session_user,
                       substring(w.key from '([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-[0-9a-f]{16}$')::uuid FROM w
                ON CONFLICT (key) DO NOTHING RETURNING key)
            INSERT INTO docfs_manifest_blocks (key, ordinal, hash, length)
            SELECT m.k, m.n, m.h, m.l FROM fresh f JOIN unnest(keys, ordinals, hashes, lengths) AS m(k, n, h, l) ON m.k = f.key;
            INSERT INTO docfs_upload_intents (key, created_ns, role)
            SELECT DISTINCT e->>'key', docfs_now(), session_user FROM jsonb_array_elements(p_manifests) e
            ON CONFLICT (key) DO UPDATE SET created_ns = excluded.created_ns WHERE docfs_upload_intents.role IS NOT DISTINCT FROM session_user;
            DELETE FROM docfs_upload_intents WHERE key = ANY(p_done_packs) AND role IS NOT DISTINCT FROM session_user;
            RETURN '{}';
        END
        $fn$
        """
}
