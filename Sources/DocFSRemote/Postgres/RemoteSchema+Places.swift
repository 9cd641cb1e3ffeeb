/// Version 16 of the server's schema: blocks keep their places.
///
/// Before, a block was one row (`docfs_blocks`, keyed by its hash) and a mark of damage moved
/// it: the next place anyone recorded replaced it, whatever its length. One replica could so
/// take a sound block away from every file naming it. Now:
/// - `docfs_block_ids`: the block itself, its hash and its length, settled by its first place.
///   Manifests name it (the foreign key that keeps gc and a manifest from crossing).
/// - `docfs_blocks`: the block's places, one row per (hash, pack); a block may have several.
///   A place whose length is not its block's is refused when recorded (`docfs_block_place`,
///   SQLSTATE DF014), whoever records it.
/// - `docfs_block_reports`: who found which place damaged (owner's table). A mark is a report:
///   `docfs_mark_block_damaged` records it and flags the place (`damaged_ns`), which is then not
///   sound; it never moves the place nor lets another record replace it.
/// - A place is dropped only once confirmed damaged: by the readers of two replica roles, or by
///   the owner's `docfs remote check` (`docfs_confirm_damaged_place`), and never while it is
///   the block's only place (then it stays, `confirmed`, until a sound place is recorded).
/// - Dedup (`knownBlocks`, `docfs_record_manifests`) counts a block as had only where a place
///   is sound (not flagged) and in a pack the caller may count on (`docfs_place_vouched`: the
///   owner's, or the caller's own folder, never another replica's); a block without one is
///   healed by the next upload of its bytes, which adds a place.
/// - `docfs_blocks.reports`: how many roles reported the place; readers try the places of a
///   block soundest first (`RemoteDatabase.places`).
extension RemoteSchema {
    static let placeStatements: [String] = [
        """
        CREATE TABLE IF NOT EXISTS docfs_block_ids (
            hash       text PRIMARY KEY,
            length     bigint NOT NULL,
            created_ns bigint NOT NULL
        )
        """,
        // (No conflict target: run again after version 20, the key is the hash and the length.)
        "INSERT INTO docfs_block_ids (hash, length, created_ns) SELECT hash, length, created_ns FROM docfs_blocks ON CONFLICT DO NOTHING",
        // Manifests name the block, not one of its places (its foreign key below).
        """
        DO $do$
        DECLARE
            c record;
        BEGIN
            FOR c IN SELECT conname FROM pg_constraint
                     WHERE conrelid = 'docfs_manifest_blocks'::regclass AND contype = 'f'
                       AND confrelid = 'docfs_blocks'::regclass LOOP
                EXECUTE format('ALTER TABLE docfs_manifest_blocks DROP CONSTRAINT %I', c.conname);
            END LOOP;
        END
        $do$
        """,
        """
        DO $do$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'docfs_blocks'::regclass AND contype = 'p'
                           AND array_length(conkey, 1) = 2) THEN
                ALTER TABLE docfs_blocks DROP CONSTRAINT IF EXISTS docfs_blocks_pkey;
                ALTER TABLE docfs_blocks ADD PRIMARY KEY (hash, pack_key);
            END IF;
        END
        $do$
        """,
        // Manifests and places name the block. (Each step may run again: `docfs remote setup`
        // reapplies versions a restored or hand-edited docfs_schema_migrations no longer lists,
        // and every later one after them. Once version 20 keyed blocks by hash and length, its
        // own keys stay: it runs next.)
        """
        DO $do$
        BEGIN
            IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'docfs_block_ids'::regclass AND contype = 'p'
                       AND array_length(conkey, 1) = 1) THEN
                ALTER TABLE docfs_manifest_blocks DROP CONSTRAINT IF EXISTS docfs_manifest_blocks_block;
                ALTER TABLE docfs_manifest_blocks ADD CONSTRAINT docfs_manifest_blocks_block
                    FOREIGN KEY (hash) REFERENCES docfs_block_ids (hash);
                ALTER TABLE docfs_blocks DROP CONSTRAINT IF EXISTS docfs_blocks_block;
                ALTER TABLE docfs_blocks ADD CONSTRAINT docfs_blocks_block
                    FOREIGN KEY (hash) REFERENCES docfs_block_ids (hash) ON DELETE CASCADE;
            END IF;
        END
        $do$
        """,
        "ALTER TABLE docfs_blocks ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_blocks ADD COLUMN IF NOT EXISTS reports integer NOT NULL DEFAULT 0",
        "ALTER TABLE docfs_blocks ADD COLUMN IF NOT EXISTS confirmed boolean NOT NULL DEFAULT false",
        // A mark before this version: one report, by nobody known.
        "UPDATE docfs_blocks SET reports = 1 WHERE damaged_ns IS NOT NULL AND reports = 0",
        """
        CREATE TABLE IF NOT EXISTS docfs_block_reports (
            hash        text NOT NULL,
            pack_key    text NOT NULL,
            role        text NOT NULL,
            reported_ns bigint NOT NULL,
            PRIMARY KEY (hash, pack_key, role),
            FOREIGN KEY (hash, pack_key) REFERENCES docfs_blocks (hash, pack_key) ON DELETE CASCADE
        )
        """,
        // The record of schema 9, for replicas before 11, replaced places: gone.
        "DROP FUNCTION IF EXISTS docfs_record_blocks(text[], text[], bigint[], bigint[])",
        // Packs under the folder of the role that writes them (PREFIX/packs/<role>/<uuid>); the
        // flat folder is the owner's (gc's rewritten packs, and packs written before).
        """
        CREATE OR REPLACE FUNCTION docfs_pack_key_ok(p_pack text) RETURNS boolean LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            folder text;
        BEGIN
            IF p_pack IS NULL THEN RETURN false; END IF;
            SELECT m.value INTO folder FROM docfs_meta m WHERE m.key = 'packs_folder';
            IF folder IS NULL THEN
                RETURN p_pack ~ '(^|/)packs/([A-Za-z0-9_.-]{1,63}/)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                   AND p_pack !~ '/packs/\\.\\.?/';
            END IF;
            RETURN left(p_pack, length(folder)) = folder
               AND substr(p_pack, length(folder) + 1) ~ '^([A-Za-z0-9_.-]{1,63}/)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
               AND substr(p_pack, length(folder) + 1) !~ '^\\.\\.?/';
        END
        $fn$
        """,
        // What follows the tree's packs folder in a pack's key (`<uuid>`, or `<writer>/<uuid>`);
        // NULL for a key outside it. The folder is `docfs_meta.packs_folder` (PREFIX/packs/,
        // `packs/` for a tree at the bucket's root), else found by its name.
        """
        CREATE OR REPLACE FUNCTION docfs_pack_rest(p_pack text) RETURNS text LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            folder text;
        BEGIN
            SELECT m.value INTO folder FROM docfs_meta m WHERE m.key = 'packs_folder';
            IF folder IS NULL THEN RETURN substring(p_pack from '(?:^|/)packs/(.*)$'); END IF;
            IF left(p_pack, length(folder)) <> folder THEN RETURN NULL; END IF;
            RETURN substr(p_pack, length(folder) + 1);
        END
        $fn$
        """,
        // Whether the calling role's dedup may count on a place in this pack: one in the owner's
        // flat folder (gc's) or the owner's own folder, or one under the caller's folder. Another
        // replica's pack is the bytes its S3 keys may still overwrite (IAM has no portable "no
        // overwrite"), so a block had only there is uploaded again into the caller's own pack.
        """
        CREATE OR REPLACE FUNCTION docfs_place_vouched(p_pack text) RETURNS boolean LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            rest text := docfs_pack_rest(p_pack);
        BEGIN
            IF rest IS NULL THEN RETURN false; END IF;
            IF strpos(rest, '/') = 0 THEN RETURN true; END IF;
            RETURN split_part(rest, '/', 1) IN (session_user::text,
                pg_get_userbyid((SELECT c.relowner FROM pg_class c WHERE c.oid = 'public.docfs_blocks'::regclass)));
        END
        $fn$
        """,
        // Whether the calling role may write this pack: one under its own folder, or the owner
        // (the definer functions' role) one in the flat folder. Called from definer functions.
        """
        CREATE OR REPLACE FUNCTION docfs_pack_is_callers(p_pack text) RETURNS boolean LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            rest text := docfs_pack_rest(p_pack);
        BEGIN
            IF rest IS NULL THEN RETURN false; END IF;
            IF position('/' IN rest) = 0 THEN RETURN session_user = current_user; END IF;
            RETURN split_part(rest, '/', 1) = session_user;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_intents(p_keys text[]) RETURNS void LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            bad text;
        BEGIN
            IF coalesce(cardinality(p_keys), 0) > 10000 THEN
                RAISE EXCEPTION 'at most 10000 intents at once' USING ERRCODE = 'DF014';
            END IF;
            SELECT k INTO bad FROM unnest(p_keys) k WHERE NOT (docfs_pack_key_ok(k) OR docfs_manifest_key_ok(k)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'not a pack or manifest of this tree: %', left(coalesce(bad, 'NULL'), 300) USING ERRCODE = 'DF014';
            END IF;
            SELECT k INTO bad FROM unnest(p_keys) k WHERE docfs_pack_key_ok(k) AND NOT docfs_pack_is_callers(k) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the pack % is not under this replica''s folder (packs/%/)', left(bad, 300), session_user
                    USING ERRCODE = 'DF014';
            END IF;
            IF EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = ANY(p_keys) AND u.role IS DISTINCT FROM session_user) THEN
                RAISE EXCEPTION 'an intent of another replica' USING ERRCODE = 'DF003';
            END IF;
            INSERT INTO docfs_upload_intents (key, created_ns, role) SELECT DISTINCT k, docfs_now(), session_user FROM unnest(p_keys) k
            ON CONFLICT (key) DO UPDATE SET created_ns = excluded.created_ns;
        END
        $fn$
        """,
        // Every place is a place of its block: the block is made by its first place, and a
        // place of another length is refused (a block's identity is its hash and its length).
        """
        CREATE OR REPLACE FUNCTION docfs_block_place() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            settled bigint;
        BEGIN
            INSERT INTO docfs_block_ids (hash, length, created_ns) VALUES (NEW.hash, NEW.length, NEW.created_ns)
            ON CONFLICT (hash) DO NOTHING;
            SELECT i.length INTO settled FROM docfs_block_ids i WHERE i.hash = NEW.hash;
            IF settled IS DISTINCT FROM NEW.length THEN
                RAISE EXCEPTION 'block %: a place of % bytes, but the block has %', left(NEW.hash, 64), NEW.length, settled
                    USING ERRCODE = 'DF014';
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_block_place ON docfs_blocks",
        """
        CREATE TRIGGER docfs_block_place BEFORE INSERT OR UPDATE OF hash, length ON docfs_blocks
        FOR EACH ROW EXECUTE FUNCTION docfs_block_place()
        """,
        // Confirmed damaged (two roles' readers, or the owner's check): dropped, unless it is
        // the block's only place. The block's row is locked first, so that two places confirmed
        // at once do not each see the other and both go. The owner's only (not granted).
        """
        CREATE OR REPLACE FUNCTION docfs_confirm_damaged_place(p_hash text, p_pack text) RETURNS boolean LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        BEGIN
            PERFORM 1 FROM docfs_block_ids i WHERE i.hash = p_hash FOR NO KEY UPDATE;
            UPDATE docfs_blocks SET damaged_ns = coalesce(damaged_ns, docfs_now()), confirmed = true
             WHERE hash = p_hash AND pack_key = p_pack;
            IF NOT FOUND THEN RETURN false; END IF;
            DELETE FROM docfs_blocks b WHERE b.hash = p_hash AND b.pack_key = p_pack
               AND EXISTS (SELECT 1 FROM docfs_blocks o WHERE o.hash = p_hash AND o.pack_key <> p_pack);
            RETURN true;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_mark_block_damaged(p_hash text, p_pack text) RETURNS boolean LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            roles integer;
        BEGIN
            IF p_hash IS NULL OR p_hash !~ '\(hashPattern)' THEN
                RAISE EXCEPTION 'not a block hash: %', left(coalesce(p_hash, 'NULL'), 100) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF NOT docfs_pack_key_ok(p_pack) THEN
                RAISE EXCEPTION 'not a pack of this tree: %', left(coalesce(p_pack, 'NULL'), 300) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            PERFORM 1 FROM docfs_block_ids i WHERE i.hash = p_hash FOR NO KEY UPDATE;
            -- Only a place that exists, where it was read (gc may have moved it since).
            PERFORM 1 FROM docfs_blocks b WHERE b.hash = p_hash AND b.pack_key = p_pack;
            IF NOT FOUND THEN RETURN false; END IF;
            INSERT INTO docfs_block_reports (hash, pack_key, role, reported_ns) VALUES (p_hash, p_pack, session_user, docfs_now())
            ON CONFLICT DO NOTHING;
            SELECT count(*) INTO roles FROM docfs_block_reports r WHERE r.hash = p_hash AND r.pack_key = p_pack;
            UPDATE docfs_blocks SET damaged_ns = coalesce(damaged_ns, docfs_now()), reports = roles
             WHERE hash = p_hash AND pack_key = p_pack;
            IF roles >= 2 THEN PERFORM docfs_confirm_damaged_place(p_hash, p_pack); END IF;
            RETURN true;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_pack(p_pack text, p_size bigint, p_hashes text[], p_offsets bigint[], p_lengths bigint[])
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
            -- A block's identity is its hash and its length: a place of another length is refused
            -- (here, before anything is recorded, and by docfs_block_place for any insert).
            SELECT b.h INTO bad FROM unnest(p_hashes, p_lengths) AS b(h, l)
             WHERE EXISTS (SELECT 1 FROM docfs_block_ids i WHERE i.hash = b.h AND i.length <> b.l)
                OR EXISTS (SELECT 1 FROM unnest(p_hashes, p_lengths) AS c(h, l) WHERE c.h = b.h AND c.l <> b.l)
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'block %: a place whose length is not the block''s', bad USING ERRCODE = 'DF014';
            END IF;
            -- A new place for a block that has no sound one this replica may count on (a block
            -- another replica sent meanwhile into a vouched pack keeps its place; these bytes go
            -- with gc); never in place of another. One in another replica's pack does not count
            -- (`docfs_place_vouched`): this one is added beside it.
            -- A place of another length than its block's is refused (docfs_block_place).
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns, role)
            SELECT DISTINCT ON (h) h, p_pack, o, l, docfs_now(), session_user
              FROM unnest(p_hashes, p_offsets, p_lengths) AS b(h, o, l)
             WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = b.h AND s.damaged_ns IS NULL
                               AND docfs_place_vouched(s.pack_key))
            ON CONFLICT (hash, pack_key) DO NOTHING;
            GET DIAGNOSTICS added = ROW_COUNT;
            -- Places confirmed damaged were kept while they were their block's only one.
            DELETE FROM docfs_blocks d WHERE d.confirmed AND d.hash = ANY(p_hashes)
               AND EXISTS (SELECT 1 FROM docfs_blocks s WHERE s.hash = d.hash AND s.pack_key <> d.pack_key);
            RETURN added;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_manifests(p_manifests jsonb, p_done_packs text[]) RETURNS text[] LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
        SET plan_cache_mode = force_custom_plan AS $fn$
        DECLARE
            folder text;
            bad text;
            missing text[];
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
                OR (e->>'size')::numeric < 0
                OR EXISTS (SELECT 1 FROM jsonb_array_elements(e->'hashes') h WHERE jsonb_typeof(h) <> 'string' OR h #>> '{}' !~ '\(hashPattern)')
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists something that is not a block hash, or has no size', bad USING ERRCODE = 'DF014';
            END IF;
            -- The blocks and their sound places stay until this transaction ends (gc waits for it).
            PERFORM 1 FROM docfs_blocks b
             WHERE b.hash IN (SELECT jsonb_array_elements_text(e->'hashes') FROM jsonb_array_elements(p_manifests) e)
               AND b.damaged_ns IS NULL FOR KEY SHARE;
            -- Had: a sound place this caller may count on (`docfs_place_vouched`).
            missing := ARRAY(SELECT DISTINCT h FROM jsonb_array_elements(p_manifests) e, jsonb_array_elements_text(e->'hashes') h
                             WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks b WHERE b.hash = h AND b.damaged_ns IS NULL
                                               AND docfs_place_vouched(b.pack_key)));
            IF cardinality(missing) > 0 THEN RETURN missing; END IF;
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE (e->>'size')::bigint <> (SELECT coalesce(sum(i.length), 0) FROM jsonb_array_elements_text(e->'hashes') h
                                           JOIN docfs_block_ids i ON i.hash = h)
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
            WITH w AS (SELECT DISTINCT ON (e->>'key') e->>'key' AS key, (e->>'size')::bigint AS size, e->'hashes' AS hashes
                         FROM jsonb_array_elements(p_manifests) e),
            fresh AS (
                INSERT INTO docfs_manifests (key, size, created_ns, role, operation_id)
                SELECT w.key, w.size, docfs_now(), session_user,
                       substring(w.key from '([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-[0-9a-f]{16}$')::uuid FROM w
                ON CONFLICT (key) DO NOTHING RETURNING key)
            INSERT INTO docfs_manifest_blocks (key, ordinal, hash)
            SELECT f.key, b.n - 1, b.h FROM fresh f JOIN w ON w.key = f.key, jsonb_array_elements_text(w.hashes) WITH ORDINALITY AS b(h, n);
            INSERT INTO docfs_upload_intents (key, created_ns, role)
            SELECT DISTINCT e->>'key', docfs_now(), session_user FROM jsonb_array_elements(p_manifests) e
            ON CONFLICT (key) DO UPDATE SET created_ns = excluded.created_ns WHERE docfs_upload_intents.role IS NOT DISTINCT FROM session_user;
            DELETE FROM docfs_upload_intents WHERE key = ANY(p_done_packs) AND role IS NOT DISTINCT FROM session_user;
            RETURN '{}';
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_block_place() FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_pack_key_ok(text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_pack_is_callers(text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_place_vouched(text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_pack_rest(text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_intents(text[]) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_confirm_damaged_place(text, text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_mark_block_damaged(text, text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_pack(text, bigint, text[], bigint[], bigint[]) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_manifests(jsonb, text[]) FROM PUBLIC",
        "REVOKE ALL ON docfs_block_ids, docfs_block_reports FROM PUBLIC",
    ]
}
