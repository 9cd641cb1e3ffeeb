/// Version 21 of the server's schema: recording a chunk's places and manifests costs what the
/// chunk holds, not what the tree holds.
///
/// Schema 20's `docfs_record_pack_places` and `docfs_record_manifests` asked, for a block, whether
/// a sound place of it is in a pack the caller counts on with `docfs_place_vouched` inside a
/// `NOT EXISTS`/`EXISTS` over `docfs_blocks`; PostgreSQL runs those as hash (anti-)joins that
/// call the function on every sound place of the table, so each call cost grew with the tree (a
/// `cp -r` of 2,000 small files: 32,000 calls of the function, half the server's time in the
/// upload). Here each statement first takes the sound places of the call's own hashes (by the
/// index on `hash`) and asks the function once per pack among them (`soundPlaces`); the rules,
/// the refusals and their order are schema 20's, unchanged.
extension RemoteSchema {
    package static let placeLookupsVersion = 21

    static let placeLookupStatements: [String] = [
        recordPackPlacesLookingOnce,
        recordManifestsLookingOnce,
        "REVOKE ALL ON FUNCTION docfs_record_pack_places(text, bigint, text[], bigint[], bigint[]) FROM PUBLIC",
    ]

    /// A statement's `sound` rows: the sound places (hash, length) of the blocks in `hashes` (a
    /// text[] of the function) that are in a pack the caller counts on, the packs asked once each.
    static func soundPlaces(_ hashes: String) -> String {
        """
        places AS MATERIALIZED (SELECT s.hash, s.length, s.pack_key FROM docfs_blocks s
                                         WHERE s.hash = ANY(\(hashes)) AND s.damaged_ns IS NULL),
                 vouched AS MATERIALIZED (SELECT p.pack_key FROM (SELECT DISTINCT pack_key FROM places) p
                                          WHERE docfs_place_vouched(p.pack_key)),
                 sound AS (SELECT places.hash, places.length FROM places JOIN vouched USING (pack_key))
        """
    }

    static let recordPackPlacesLookingOnce = """
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
            WITH \(soundPlaces("p_hashes"))
            SELECT b.h INTO bad FROM unnest(p_hashes, p_lengths) AS b(h, l)
             WHERE EXISTS (SELECT 1 FROM unnest(p_hashes, p_lengths) AS c(h, l) WHERE c.h = b.h AND c.l <> b.l)
                OR EXISTS (SELECT 1 FROM sound s WHERE s.hash = b.h AND s.length <> b.l)
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'block %: a place whose length is not the block''s', bad USING ERRCODE = 'DF014';
            END IF;
            -- A new place for a block (hash and length) that has no sound one this replica may
            -- count on; never in place of another.
            WITH \(soundPlaces("p_hashes"))
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns, role)
            SELECT DISTINCT ON (h) h, p_pack, o, l, docfs_now(), session_user
              FROM unnest(p_hashes, p_offsets, p_lengths) AS b(h, o, l)
             WHERE NOT EXISTS (SELECT 1 FROM sound s WHERE s.hash = b.h AND s.length = b.l)
            ON CONFLICT (hash, pack_key) DO NOTHING;
            GET DIAGNOSTICS added = ROW_COUNT;
            -- Places confirmed damaged were kept while they were their block's only one.
            DELETE FROM docfs_blocks d WHERE d.confirmed AND d.hash = ANY(p_hashes)
               AND EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = d.hash AND s.length = d.length AND s.pack_key <> d.pack_key);
            RETURN added;
        END
        $fn$
        """

    /// Schema 20's `docfs_record_manifests`, its lookup of the blocks had by `soundPlaces`.
    static let recordManifestsLookingOnce = """
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
            missing := ARRAY(WITH \(soundPlaces("hashes"))
                             SELECT DISTINCT m.h FROM (SELECT DISTINCT u.h, u.l FROM unnest(hashes, lengths) AS u(h, l)) m
                             WHERE NOT EXISTS (SELECT 1 FROM sound b WHERE b.hash = m.h AND b.length = m.l));
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
