/// Version 18 of the server's schema: a pack is the version of its object that was uploaded.
///
/// A replica's S3 keys may add objects under its own folder (`PREFIX/packs/ROLE/`) and nothing
/// else, but a PUT on a key that exists replaces it: those keys could replace, after the fact,
/// the bytes of every file that replica wrote, which the others read. With versioning on in the
/// bucket (the owner's set-up turns it on; the replica policy may not turn it off nor delete a
/// version) every PUT makes a version of its own, and the pack is recorded with the version its
/// upload made: readers ask for that version, which no replica's keys can change or remove. A
/// PUT over the key later makes another version, which no one reads.
///
/// - `docfs_packs.version_id`: the version the pack's upload made (NULL: a bucket without
///   versioning, or a pack recorded before); settled by its first record with one, never changed.
/// - `docfs_blocks.pack_version`: the same on each place in the pack, for readers (who SELECT
///   `docfs_blocks`) and gc's repacking (the owner's packs).
/// - `docfs_record_pack(pack, size, hashes, offsets, lengths, version)`: schema 16's checks and
///   places (`docfs_record_pack_places`, its body under another name), and the version: of a
///   version id's shape (1 to 1024 of `A-Za-z0-9+/=._-`), required once the owner recorded that
///   the bucket keeps versions (`docfs_meta.pack_versions` = `on`), and refused when the pack
///   was recorded with another one. The five-argument form records no version (and is refused
///   where one is required).
extension RemoteSchema {
    static let packVersionsVersion = 18
    /// 1 to 1024 of these (the length checked apart: PostgreSQL's regular expressions count to 255).
    static let versionIDPattern = "^[A-Za-z0-9+/=._-]+$"

    static let packVersionStatements: [String] = [
        "ALTER TABLE docfs_packs ADD COLUMN IF NOT EXISTS version_id text",
        "ALTER TABLE docfs_blocks ADD COLUMN IF NOT EXISTS pack_version text",
        // Schema 16's docfs_record_pack, word for word under another name: the checks and places.
        placeStatements.first { $0.contains("FUNCTION docfs_record_pack(") }!
            .replacingOccurrences(of: "FUNCTION docfs_record_pack(", with: "FUNCTION docfs_record_pack_places("),
        """
        CREATE OR REPLACE FUNCTION docfs_record_pack(p_pack text, p_size bigint, p_hashes text[], p_offsets bigint[],
                                                     p_lengths bigint[], p_version text)
        RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            added integer;
            recorded text;
        BEGIN
            IF p_version IS NOT NULL AND (p_version !~ '\(versionIDPattern)' OR length(p_version) > 1024 OR p_version = 'null') THEN
                RAISE EXCEPTION 'not a version id: %', left(p_version, 100) USING ERRCODE = 'DF014';
            END IF;
            added := docfs_record_pack_places(p_pack, p_size, p_hashes, p_offsets, p_lengths);
            -- After schema 16's checks (their refusals first); the raise undoes what they recorded.
            IF p_version IS NULL AND EXISTS (SELECT 1 FROM docfs_meta m WHERE m.key = 'pack_versions' AND m.value = 'on') THEN
                RAISE EXCEPTION 'the pack % has no version id: the bucket keeps versions, and a pack is recorded with the version its upload made',
                    left(coalesce(p_pack, 'NULL'), 300) USING ERRCODE = 'DF014';
            END IF;
            -- First record with a version settles it; a later one naming another is refused
            -- (it would point readers at bytes put over the key since).
            UPDATE docfs_packs SET version_id = p_version WHERE key = p_pack AND version_id IS NULL;
            SELECT version_id INTO recorded FROM docfs_packs WHERE key = p_pack;
            IF recorded IS DISTINCT FROM p_version AND p_version IS NOT NULL THEN
                RAISE EXCEPTION 'the pack % was recorded with another version', left(p_pack, 300) USING ERRCODE = 'DF014';
            END IF;
            UPDATE docfs_blocks SET pack_version = recorded WHERE pack_key = p_pack AND pack_version IS DISTINCT FROM recorded;
            RETURN added;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_record_pack(p_pack text, p_size bigint, p_hashes text[], p_offsets bigint[], p_lengths bigint[])
        RETURNS integer LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
            SELECT docfs_record_pack(p_pack, p_size, p_hashes, p_offsets, p_lengths, NULL::text)
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_record_pack_places(text, bigint, text[], bigint[], bigint[]) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_pack(text, bigint, text[], bigint[], bigint[], text) FROM PUBLIC",
        "REVOKE ALL ON FUNCTION docfs_record_pack(text, bigint, text[], bigint[], bigint[]) FROM PUBLIC",
        """
        DO $do$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
        BEGIN
            IF g IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) THEN
                EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_record_pack(text, bigint, text[], bigint[], bigint[], text) TO %I', g);
            END IF;
        END
        $do$
        """,
    ]
}
