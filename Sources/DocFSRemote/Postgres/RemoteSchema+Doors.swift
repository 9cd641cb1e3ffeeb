/// Version 11 of the server's schema, part two: the other doors a replica writes through, and
/// one login role per replica.
///
/// - `docfs_record_intents(keys)` / `docfs_drop_intents(keys)`: the pack and manifest keys this
///   replica is about to write (gc spares them); keys under the tree's prefix only, each owned
///   by the replica that recorded it (another cannot renew, drop or read it).
/// - `docfs_record_pack(pack, size, hashes, offsets, lengths)`: a pack this replica uploaded
///   under its live intent, and its blocks (each inside the pack's size); a block recorded
///   before keeps its place unless marked damaged (then it heals).
/// - `docfs_record_manifests(manifests, done_packs)`: manifests (key under the tree's prefix,
///   naming this replica's operation, size the sum of its blocks, every block present and not
///   damaged), each with an intent, in one call; answers the blocks missing (nothing recorded
///   then: the replica uploads them and asks again); drops the given pack intents.
/// - `docfs_hello()`: a replica says it is here (`docfs remote replicas`).
/// - `docfs_replicas`: each replica role's last call and how many operations it sent.
/// - The replicas group (`docfs_meta.replicas_group`): SELECT on what replicas read, EXECUTE on
///   these functions, nothing else. `docfs remote add-replica` makes a login role in it.
extension RemoteSchema {
    static let manifestNamePattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-[0-9a-f]{16}$"

    static let doorTables: [String] = [
        "ALTER TABLE docfs_operations ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_changes ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_versions ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_upload_intents ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_manifests ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE docfs_manifests ADD COLUMN IF NOT EXISTS operation_id uuid",
        "CREATE INDEX IF NOT EXISTS docfs_manifests_operation ON docfs_manifests (operation_id)",
        """
        CREATE TABLE IF NOT EXISTS docfs_packs (
            key        text PRIMARY KEY,
            size       bigint NOT NULL,
            role       text,
            created_ns bigint NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS docfs_replicas (
            role         text PRIMARY KEY,
            last_seen_ns bigint,
            operations   bigint NOT NULL DEFAULT 0
        )
        """,
    ]

    static let doorFunctions: [String] = [
        """
        CREATE OR REPLACE FUNCTION docfs_manifest_key_ok(p_key text) RETURNS boolean LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            folder text;
        BEGIN
            IF p_key IS NULL THEN RETURN false; END IF;
            SELECT left(m.value, length(m.value) - length('packs/')) || 'manifests/' INTO folder
              FROM docfs_meta m WHERE m.key = 'packs_folder';
            IF folder IS NULL THEN
                RETURN p_key ~ '(^|/)manifests/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-[0-9a-f]{16}$';
            END IF;
            RETURN left(p_key, length(folder)) = folder AND substr(p_key, length(folder) + 1) ~ '\(manifestNamePattern)';
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
            IF EXISTS (SELECT 1 FROM docfs_upload_intents u WHERE u.key = ANY(p_keys) AND u.role IS DISTINCT FROM session_user) THEN
                RAISE EXCEPTION 'an intent of another replica' USING ERRCODE = 'DF003';
            END IF;
            INSERT INTO docfs_upload_intents (key, created_ns, role) SELECT DISTINCT k, docfs_now(), session_user FROM unnest(p_keys) k
            ON CONFLICT (key) DO UPDATE SET created_ns = excluded.created_ns;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_drop_intents(p_keys text[]) RETURNS void LANGUAGE sql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
            DELETE FROM docfs_upload_intents WHERE key = ANY(p_keys) AND role IS NOT DISTINCT FROM session_user
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_pack(p_pack text, p_size bigint, p_hashes text[], p_offsets bigint[], p_lengths bigint[])
        RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
        SET plan_cache_mode = force_custom_plan AS $fn$
        DECLARE
            n integer := coalesce(cardinality(p_hashes), 0);
            recorded bigint;
            changed integer;
        BEGIN
            IF NOT docfs_pack_key_ok(p_pack) THEN
                RAISE EXCEPTION 'not a pack of this tree: %', left(coalesce(p_pack, 'NULL'), 300) USING ERRCODE = 'DF014';
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
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns)
            SELECT h, p_pack, o, l, docfs_now() FROM unnest(p_hashes, p_offsets, p_lengths) AS b(h, o, l)
            ON CONFLICT (hash) DO UPDATE SET pack_key = excluded.pack_key, pack_offset = excluded.pack_offset,
                length = excluded.length, created_ns = excluded.created_ns, damaged_ns = NULL
            WHERE docfs_blocks.damaged_ns IS NOT NULL;
            GET DIAGNOSTICS changed = ROW_COUNT;
            RETURN changed;
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
            -- The blocks stay until this transaction ends (gc's delete waits for it).
            PERFORM 1 FROM docfs_blocks b
             WHERE b.hash IN (SELECT jsonb_array_elements_text(e->'hashes') FROM jsonb_array_elements(p_manifests) e) FOR KEY SHARE;
            missing := ARRAY(SELECT DISTINCT h FROM jsonb_array_elements(p_manifests) e, jsonb_array_elements_text(e->'hashes') h
                             WHERE NOT EXISTS (SELECT 1 FROM docfs_blocks b WHERE b.hash = h AND b.damaged_ns IS NULL));
            IF cardinality(missing) > 0 THEN RETURN missing; END IF;
            SELECT e->>'key' INTO bad FROM jsonb_array_elements(p_manifests) e
             WHERE (e->>'size')::bigint <> (SELECT coalesce(sum(b.length), 0) FROM jsonb_array_elements_text(e->'hashes') h
                                           JOIN docfs_blocks b ON b.hash = h)
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
        """
        CREATE OR REPLACE FUNCTION docfs_hello() RETURNS void LANGUAGE sql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
            INSERT INTO docfs_replicas AS r (role, last_seen_ns) VALUES (session_user, docfs_now())
            ON CONFLICT (role) DO UPDATE SET last_seen_ns = excluded.last_seen_ns
        $fn$
        """,
        // Owners' work only (no replica is granted these).
        setLayoutFunction(lock: advisoryWritersLock),
        // Every function is the owner's unless granted below (PostgreSQL lets PUBLIC execute new ones).
        """
        DO $do$
        DECLARE
            f record;
        BEGIN
            FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = 'public' AND p.proname LIKE 'docfs\\_%' LOOP
                EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
            END LOOP;
        END
        $do$
        """,
        // The replicas group of this database (roles are the cluster's: one group per tree's database).
        """
        INSERT INTO docfs_meta (key, value)
        VALUES ('replicas_group', left('docfs_replicas_' || current_database(), 40) || '_' || left(md5(current_database() || coalesce(
                (SELECT value FROM docfs_meta WHERE key = 'tree_id'), '')), 8))
        ON CONFLICT (key) DO NOTHING
        """,
        replicasGroupGrants,
    ]

    /// `docfs_set_layout`: the owner's layout, a change of the root, under the writers' `lock`.
    /// `placedAtCommit` (schema 17): the position is given, and notified, as the transaction
    /// commits (`RemoteSchema+Positions`); the answer is then 0 unless the layout was set before.
    static func setLayoutFunction(lock: String, placedAtCommit: Bool = false) -> String {
        let notify = placedAtCommit ? "pos := 0;" : "PERFORM pg_notify('\(RemoteDatabase.notificationChannel)', pos::text);"
        return """
            CREATE OR REPLACE FUNCTION docfs_set_layout(p_op uuid, p_json text) RETURNS bigint LANGUAGE plpgsql
            SET search_path = pg_catalog, public, pg_temp AS $fn$
            DECLARE
                root docfs_items;
                pos bigint;
            BEGIN
                \(lock)
                SELECT position INTO pos FROM docfs_operations WHERE operation_id = p_op;
                IF FOUND THEN RETURN pos; END IF;
                INSERT INTO docfs_layout (id, layout, updated_ns) VALUES (1, p_json::jsonb, docfs_now())
                ON CONFLICT (id) DO UPDATE SET layout = excluded.layout, updated_ns = excluded.updated_ns;
                UPDATE docfs_items SET metadata_version = metadata_version + 1, changed_ns = docfs_now() WHERE parent_id IS NULL
                RETURNING * INTO root;
                INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns, role)
                VALUES (root.id, 'layout', p_op, root.content_version, root.metadata_version, docfs_now(), session_user)
                RETURNING position INTO pos;
                INSERT INTO docfs_operations (operation_id, kind, item_id, content_version, metadata_version, position, applied_ns, role)
                VALUES (p_op, 'layout', root.id, root.content_version, root.metadata_version, pos, docfs_now(), session_user);
                \(notify)
                RETURN pos;
            END
            $fn$
            """
    }

    /// Makes the replicas group if this role may (else `docfs remote add-replica` says so), gives
    /// it exactly a replica's privileges, and moves every replica role made before version 11
    /// (it could INSERT changes) into it with nothing of its own. Applied again by add-replica.
    static let replicasGroupGrants = """
        DO $do$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
            may_create boolean := (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user);
            earlier text[];
            targets text[];
            t text;
        BEGIN
            earlier := ARRAY(SELECT DISTINCT grantee::text FROM information_schema.role_table_grants
                             WHERE table_name = 'docfs_changes' AND privilege_type = 'INSERT' AND grantee <> current_user
                               AND grantee NOT IN (SELECT rolname FROM pg_roles WHERE rolsuper));
            FOREACH t IN ARRAY earlier LOOP
                EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', t);
                EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', t);
                EXECUTE format('REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM %I', t);
            END LOOP;
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) AND may_create THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', g);
            END IF;
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) THEN
                targets := ARRAY[g];
                FOREACH t IN ARRAY earlier LOOP EXECUTE format('GRANT %I TO %I', g, t); END LOOP;
            ELSE
                targets := earlier;  -- no group without CREATEROLE: each earlier replica role gets the same
            END IF;
            FOREACH t IN ARRAY targets LOOP
                EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %I', t);
                EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %I', t);
                EXECUTE format('GRANT USAGE ON SCHEMA public TO %I', t);
                EXECUTE format('GRANT SELECT ON docfs_items, docfs_versions, docfs_layout, docfs_changes, docfs_meta, '
                               'docfs_schema_migrations, docfs_blocks, docfs_manifests, docfs_manifest_blocks TO %I', t);
                EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_apply(jsonb), docfs_record_intents(text[]), docfs_drop_intents(text[]), '
                               'docfs_record_pack(text, bigint, text[], bigint[], bigint[]), docfs_record_manifests(jsonb, text[]), '
                               'docfs_mark_block_damaged(text, text), docfs_hello() TO %I', t);
                IF to_regprocedure('docfs_record_pack(text, bigint, text[], bigint[], bigint[], text)') IS NOT NULL THEN
                    -- Schema 18's: a pack with the version of its object.
                    EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_record_pack(text, bigint, text[], bigint[], bigint[], text) TO %I', t);
                END IF;
            END LOOP;
        END
        $do$
        """
}
