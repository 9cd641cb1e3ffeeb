import Foundation

/// Version 15 of the server's schema: every argument a replica sends is bounded and checked, and
/// each replica role has quotas its owner sets (docs/REMOTE.md, "Bounds and quotas").
///
/// - `docfs_set_layout_mime(json)` is the owner's alone (a replica role may no longer call it):
///   the owner's `docfs remote setup` and `docfs init` resolve the layout's MIME words with the
///   same content-type table replicas use. The function takes only a JSON object of at most
///   16 KiB and 256 entries whose keys are MIME words the layout itself names and whose values
///   are content-type identifiers, none of the abstract words every item conforms to. What a
///   replica wrote there before is dropped: the owner's next setup writes it again.
/// - `docfs_apply(ops)`: at most 1024 operations, 32768 tags and 16 MiB of JSON per call, then
///   the call itself (`docfs_apply_unbounded`, which no replica may call directly).
/// - A manifest lists at most 4,194,304 blocks, one block per 64 KiB of its size (plus 16), and
///   one hash at most 262,144 times (a checked trigger on `docfs_manifest_blocks`, whoever
///   records it).
/// - `docfs_quotas`: per replica role (`*`: every role without a row of its own) the live upload
///   intents it may hold and the pack bytes it may record in 24 hours; NULL is no limit. A call
///   past one is refused with SQLSTATE 53400 (configuration_limit_exceeded), which a replica
///   takes as "retry later". The tables' owner has no quota.
extension RemoteSchema {
    static let maximumOperationsPerCall = 1024
    static let maximumTagsPerCall = 32768
    static let maximumCallBytes = 16 << 20
    static let maximumManifestBlocks = 4_194_304
    static let manifestBytesPerBlock = 65536
    static let maximumHashRepeats = 262_144
    static let defaultLiveIntents: Int64 = 20000
    static let defaultBytesPerDay: Int64 = 1 << 40
    static let maximumLayoutMIMEBytes = 16384
    static let maximumLayoutMIMEEntries = 256
    /// A MIME type as RFC 6838 names one (lowercase here: the layout's words are compared as written).
    static let mimeWordPattern = "^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$"
    static let identifierPattern = "^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$"
    /// Words every item (or every file) conforms to: a MIME word resolved to one of these would
    /// let anything into its folder.
    static let abstractTypes = [
        "public.item", "public.data", "public.content", "public.folder", "public.directory",
        "public.composite-content",
    ]

    /// A content-type identifier the server takes as a MIME word's meaning (`docfs_set_layout_mime`).
    package static func isConcreteIdentifier(_ word: String) -> Bool {
        guard let first = word.unicodeScalars.first, (1...255).contains(word.utf8.count), !abstractTypes.contains(word) else { return false }
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        return first != "." && first != "_" && first != "-" && word.unicodeScalars.allSatisfy { allowed.contains($0) }
    }

    /// The role is the owner of the server's tables (or a superuser): no quota.
    static let isOwnerSQL = """
        (session_user = (SELECT r.rolname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
                          WHERE c.oid = 'public.docfs_items'::regclass)
         OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = session_user AND r.rolsuper))
        """

    static let boundStatements: [String] = [
        """
        CREATE OR REPLACE FUNCTION docfs_set_layout_mime(p_json text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            words jsonb;
            layout jsonb;
            named text[];
            bad text;
        BEGIN
            IF p_json IS NULL OR octet_length(p_json) > \(maximumLayoutMIMEBytes) THEN
                RAISE EXCEPTION 'the layout''s MIME words: a JSON object of at most \(maximumLayoutMIMEBytes) bytes' USING ERRCODE = 'DF014';
            END IF;
            BEGIN
                words := p_json::jsonb;
            EXCEPTION WHEN others THEN
                RAISE EXCEPTION 'the layout''s MIME words are not JSON' USING ERRCODE = 'DF014';
            END;
            IF jsonb_typeof(words) IS DISTINCT FROM 'object' OR (SELECT count(*) FROM jsonb_object_keys(words)) > \(maximumLayoutMIMEEntries) THEN
                RAISE EXCEPTION 'the layout''s MIME words: a JSON object of at most \(maximumLayoutMIMEEntries) entries' USING ERRCODE = 'DF014';
            END IF;
            SELECT l.layout INTO layout FROM docfs_layout l WHERE l.id = 1;
            named := ARRAY(SELECT jsonb_array_elements_text(f->'allowedContentTypes')
                             FROM jsonb_array_elements(CASE WHEN jsonb_typeof(layout->'folders') = 'array' THEN layout->'folders' ELSE '[]' END) f
                            WHERE jsonb_typeof(f->'allowedContentTypes') = 'array');
            SELECT k INTO bad FROM jsonb_object_keys(words) k
             WHERE k !~ '\(mimeWordPattern)' OR NOT (k = ANY(named)) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the layout''s MIME words: % is not a MIME type the layout names', left(bad, 100) USING ERRCODE = 'DF014';
            END IF;
            SELECT e.key INTO bad FROM jsonb_each(words) e
             WHERE jsonb_typeof(e.value) IS DISTINCT FROM 'string' OR e.value #>> '{}' !~ '\(identifierPattern)'
                OR e.value #>> '{}' = ANY(ARRAY[\(abstractTypes.map(quoteLiteral).joined(separator: ", "))]) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the layout''s MIME words: % names no concrete content type', left(bad, 100) USING ERRCODE = 'DF014';
            END IF;
            INSERT INTO docfs_meta (key, value) VALUES ('layout_mime', words::text)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value;
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_set_layout_mime(text) FROM PUBLIC",
        // Written by any replica until now: the owner's setup writes it again.
        "DELETE FROM docfs_meta WHERE key = 'layout_mime'",
        """
        CREATE TABLE IF NOT EXISTS docfs_quotas (
            role          text PRIMARY KEY,
            live_intents  bigint CHECK (live_intents >= 0),
            bytes_per_day bigint CHECK (bytes_per_day >= 0)
        )
        """,
        "INSERT INTO docfs_quotas (role, live_intents, bytes_per_day) VALUES ('*', \(defaultLiveIntents), \(defaultBytesPerDay)) ON CONFLICT (role) DO NOTHING",
        "CREATE INDEX IF NOT EXISTS docfs_packs_role_at ON docfs_packs (role, created_ns)",
        "CREATE INDEX IF NOT EXISTS docfs_upload_intents_role ON docfs_upload_intents (role)",
        """
        CREATE OR REPLACE FUNCTION docfs_quota(p_role text, p_what text) RETURNS bigint LANGUAGE sql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
            SELECT CASE p_what WHEN 'live_intents' THEN q.live_intents ELSE q.bytes_per_day END
              FROM docfs_quotas q WHERE q.role IN (p_role, '*') ORDER BY q.role = '*' LIMIT 1
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_quota_intents() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            quota bigint;
            held bigint;
        BEGIN
            IF \(isOwnerSQL) THEN RETURN NULL; END IF;
            quota := docfs_quota(session_user, 'live_intents');
            IF quota IS NULL THEN RETURN NULL; END IF;
            SELECT count(*) INTO held FROM docfs_upload_intents u WHERE u.role = session_user;
            IF held > quota THEN
                RAISE EXCEPTION 'replica % holds % upload intents, over its quota of % (docfs remote quota)', session_user, held, quota
                    USING ERRCODE = 'configuration_limit_exceeded';
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_upload_intents_quota ON docfs_upload_intents",
        """
        CREATE TRIGGER docfs_upload_intents_quota AFTER INSERT ON docfs_upload_intents
        FOR EACH STATEMENT EXECUTE FUNCTION docfs_quota_intents()
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_quota_bytes() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            quota bigint;
            recorded numeric;
        BEGIN
            IF \(isOwnerSQL) THEN RETURN NULL; END IF;
            quota := docfs_quota(session_user, 'bytes_per_day');
            IF quota IS NULL THEN RETURN NULL; END IF;
            SELECT coalesce(sum(p.size), 0) INTO recorded FROM docfs_packs p
             WHERE p.role = session_user AND p.created_ns > docfs_now() - 86400000000000;
            IF recorded > quota THEN
                RAISE EXCEPTION 'replica % recorded % bytes of packs in 24 hours, over its quota of % (docfs remote quota)',
                    session_user, recorded, quota USING ERRCODE = 'configuration_limit_exceeded';
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_packs_quota ON docfs_packs",
        """
        CREATE TRIGGER docfs_packs_quota AFTER INSERT ON docfs_packs
        FOR EACH STATEMENT EXECUTE FUNCTION docfs_quota_bytes()
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_manifest_bounds() RETURNS trigger LANGUAGE plpgsql
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            bad text;
        BEGIN
            SELECT f.key INTO bad FROM fresh f JOIN docfs_manifests m ON m.key = f.key
             GROUP BY f.key, m.size
            HAVING count(*) > \(maximumManifestBlocks) OR count(*) > m.size / \(manifestBytesPerBlock) + 16 LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists more blocks than its size allows (one per \(manifestBytesPerBlock) bytes, \(maximumManifestBlocks) at most)', bad
                    USING ERRCODE = 'DF014';
            END IF;
            SELECT f.key INTO bad FROM fresh f GROUP BY f.key, f.hash HAVING count(*) > \(maximumHashRepeats) LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'the manifest % lists one block more than \(maximumHashRepeats) times', bad USING ERRCODE = 'DF014';
            END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_manifest_blocks_bounds ON docfs_manifest_blocks",
        """
        CREATE TRIGGER docfs_manifest_blocks_bounds AFTER INSERT ON docfs_manifest_blocks
        REFERENCING NEW TABLE AS fresh FOR EACH STATEMENT EXECUTE FUNCTION docfs_manifest_bounds()
        """,
        // The call's bounds before the call itself (whatever it became since: renamed, not
        // rewritten). Applied again (the migrations' rows gone), an earlier migration may have
        // made docfs_apply unbounded again: that one is renamed; the bounded one never is.
        """
        DO $do$
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                            WHERE n.nspname = 'public' AND p.proname = 'docfs_apply' AND p.prosrc LIKE '%docfs_apply_unbounded(p_ops)%') THEN
                DROP FUNCTION IF EXISTS docfs_apply_unbounded(jsonb);
                ALTER FUNCTION docfs_apply(jsonb) RENAME TO docfs_apply_unbounded;
            END IF;
        END
        $do$
        """,
        "REVOKE ALL ON FUNCTION docfs_apply_unbounded(jsonb) FROM PUBLIC",
        """
        CREATE OR REPLACE FUNCTION docfs_apply(p_ops jsonb) RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        BEGIN
            IF jsonb_typeof(p_ops) IS DISTINCT FROM 'array' OR jsonb_array_length(p_ops) > \(maximumOperationsPerCall) THEN
                RAISE EXCEPTION 'docfs_apply takes a list of at most \(maximumOperationsPerCall) operations' USING ERRCODE = 'DF014';
            END IF;
            IF octet_length(p_ops::text) > \(maximumCallBytes) THEN
                RAISE EXCEPTION 'docfs_apply takes at most \(maximumCallBytes) bytes of operations at once' USING ERRCODE = 'DF014';
            END IF;
            IF (SELECT coalesce(sum(jsonb_array_length(o->'tags')), 0) FROM jsonb_array_elements(p_ops) o
                 WHERE jsonb_typeof(o->'tags') = 'array') > \(maximumTagsPerCall) THEN
                RAISE EXCEPTION 'docfs_apply takes at most \(maximumTagsPerCall) tags at once' USING ERRCODE = 'DF014';
            END IF;
            RETURN docfs_apply_unbounded(p_ops);
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_apply(jsonb) FROM PUBLIC",
        // The replicas group: the bounded call, not the unbounded one nor the MIME words.
        """
        DO $do$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
            t text;
        BEGIN
            FOR t IN SELECT g UNION SELECT DISTINCT grantee::text FROM information_schema.role_routine_grants
                      WHERE routine_name IN ('docfs_apply_unbounded', 'docfs_set_layout_mime') AND grantee <> current_user LOOP
                IF t IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = t) THEN
                    EXECUTE format('REVOKE ALL ON FUNCTION docfs_apply_unbounded(jsonb), docfs_set_layout_mime(text) FROM %I', t);
                END IF;
            END LOOP;
            IF g IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) THEN
                EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_apply(jsonb) TO %I', g);
            END IF;
        END
        $do$
        """,
        // New functions are PUBLIC's to execute unless revoked (the replicas need none of these).
        "REVOKE ALL ON FUNCTION docfs_quota(text, text), docfs_quota_intents(), docfs_quota_bytes(), docfs_manifest_bounds() FROM PUBLIC",
    ]
}
