/// Version 9 of the server's schema: damaged blocks heal.
///
/// - `docfs_blocks.damaged_ns`: when a reader (or `docfs remote check`) found the block's bytes
///   in its pack not matching its SHA-256, or the pack or its range gone (NULL: not known
///   damaged). A marked block is not "had": `knownBlocks` leaves it out, so the next upload of
///   those bytes sends them.
/// - `docfs_mark_block_damaged(hash, pack)`: marks a block at the place the reader read it (a
///   block gc moved meanwhile is not marked). The replica role may not UPDATE `docfs_blocks`, so
///   this, and the next function, run as their owner, checking their arguments themselves.
/// - `docfs_record_blocks(hashes, packs, offsets, lengths)`: records uploaded blocks; a block
///   recorded before and marked damaged takes the new place and loses its mark, any other stays.
/// - `docfs_meta.packs_folder`: `PREFIX/packs/`, written by `docfs remote setup` (and the first
///   init): a recorded pack must lie there. A server set up before knows only the key's shape.
extension RemoteSchema {
    /// A block's hash: SHA-256 as 64 lowercase hex digits.
    static let hashPattern = "^[0-9a-f]{64}$"
    /// A pack's key after its folder: a lowercase UUID.
    static let packNamePattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

    static let damageStatements: [String] = [
        "ALTER TABLE docfs_blocks ADD COLUMN IF NOT EXISTS damaged_ns bigint",
        "CREATE INDEX IF NOT EXISTS docfs_blocks_damaged ON docfs_blocks (hash) WHERE damaged_ns IS NOT NULL",
        // Which live items name a damaged block's manifest (replicas ask when idle).
        "CREATE INDEX IF NOT EXISTS docfs_items_content_key ON docfs_items (content_key)",
        """
        CREATE OR REPLACE FUNCTION docfs_pack_key_ok(p_pack text) RETURNS boolean LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            folder text;
        BEGIN
            IF p_pack IS NULL THEN RETURN false; END IF;
            SELECT m.value INTO folder FROM docfs_meta m WHERE m.key = 'packs_folder';
            IF folder IS NULL THEN
                RETURN p_pack ~ '(^|/)packs/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
            END IF;
            RETURN left(p_pack, length(folder)) = folder AND substr(p_pack, length(folder) + 1) ~ '\(packNamePattern)';
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_mark_block_damaged(p_hash text, p_pack text) RETURNS boolean LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        BEGIN
            IF p_hash IS NULL OR p_hash !~ '\(hashPattern)' THEN
                RAISE EXCEPTION 'not a block hash: %', p_hash USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF NOT docfs_pack_key_ok(p_pack) THEN
                RAISE EXCEPTION 'not a pack of this tree: %', p_pack USING ERRCODE = 'invalid_parameter_value';
            END IF;
            -- Only a block that exists, at the place it was read (gc may have moved it since).
            UPDATE docfs_blocks SET damaged_ns = coalesce(damaged_ns, \(nowNs))
             WHERE hash = p_hash AND pack_key = p_pack;
            RETURN FOUND;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_blocks(p_hashes text[], p_packs text[], p_offsets bigint[], p_lengths bigint[])
        RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            n integer := coalesce(cardinality(p_hashes), 0);
            changed integer;
        BEGIN
            IF coalesce(cardinality(p_packs), 0) <> n OR coalesce(cardinality(p_offsets), 0) <> n
               OR coalesce(cardinality(p_lengths), 0) <> n THEN
                RAISE EXCEPTION 'blocks: arrays of different lengths' USING ERRCODE = 'invalid_parameter_value';
            END IF;
            FOR i IN 1 .. n LOOP
                IF p_hashes[i] IS NULL OR p_hashes[i] !~ '\(hashPattern)' THEN
                    RAISE EXCEPTION 'not a block hash: %', p_hashes[i] USING ERRCODE = 'invalid_parameter_value';
                END IF;
                IF NOT docfs_pack_key_ok(p_packs[i]) THEN
                    RAISE EXCEPTION 'not a pack of this tree: %', p_packs[i] USING ERRCODE = 'invalid_parameter_value';
                END IF;
                IF p_offsets[i] IS NULL OR p_offsets[i] < 0 OR p_lengths[i] IS NULL OR p_lengths[i] <= 0 THEN
                    RAISE EXCEPTION 'not a place in a pack: % bytes at %', p_lengths[i], p_offsets[i]
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
            END LOOP;
            -- A damaged block takes the new place (and loses its mark); a sound one keeps its own.
            INSERT INTO docfs_blocks (hash, pack_key, pack_offset, length, created_ns)
            SELECT h, p, o, l, \(nowNs) FROM unnest(p_hashes, p_packs, p_offsets, p_lengths) AS b(h, p, o, l)
            ON CONFLICT (hash) DO UPDATE SET pack_key = excluded.pack_key, pack_offset = excluded.pack_offset,
                length = excluded.length, created_ns = excluded.created_ns, damaged_ns = NULL
            WHERE docfs_blocks.damaged_ns IS NOT NULL;
            GET DIAGNOSTICS changed = ROW_COUNT;
            RETURN changed;
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_mark_block_damaged(text, text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_blocks(text[], text[], bigint[], bigint[]) FROM PUBLIC",
        // A replica role made before (it could INSERT blocks) keeps recording them once upgraded,
        // even by a migration that does not grant roles again (an owner's `docfs init`).
        """
        DO $do$
        DECLARE
            r record;
        BEGIN
            FOR r IN SELECT DISTINCT grantee FROM information_schema.role_table_grants
                     WHERE table_name = 'docfs_blocks' AND privilege_type = 'INSERT' AND grantee <> current_user LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_mark_block_damaged(text, text), '
                               'docfs_record_blocks(text[], text[], bigint[], bigint[]) TO %I', r.grantee);
            END LOOP;
        END
        $do$
        """,
    ]
}
