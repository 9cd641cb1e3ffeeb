/// Version 6 of the server's schema: a server that trusts no replica with its rules.
///
/// - `docfs_item_rules()` fires on every update of an item (any column) and decides itself what
///   a change is: contents (`content_version`, `content_key` or `size`) need `write`, except the
///   same object named again (versions sent together share one upload: no byte changes) and the
///   first contents of a file made empty (what its creating program wrote); a rename needs
///   `rename`, except a move whose name the server suffixed ("NAME 2.EXT"); an item's identifier
///   and kind never change. No setting a client makes lets anything through.
/// - `docfs_set_layout_mime(json)`: the one thing a replica writes in `docfs_meta` (the MIME
///   words of the layout as it resolves them), through a function that writes only that key.
/// - `docfs_meta.tree_id`: the tree's identity, also written in the bucket beside its objects
///   (`TreeMarker`), so that a prefix serves one tree and a restored database is noticed.
///
/// Since version 11 a replica role writes nothing itself: it calls the server's functions
/// (`RemoteSchema+Doors`, the replicas group's grants).
extension RemoteSchema {
    static let replicaRuleStatements: [String] = [
        """
        CREATE OR REPLACE FUNCTION docfs_item_rules() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            layout jsonb;
            refused text;
            ext text := '';
            base text;
            middle text;
        BEGIN
            IF NEW.id <> OLD.id OR NEW.kind <> OLD.kind THEN
                RAISE EXCEPTION 'the server''s layout does not allow changing the identifier or kind of /%', docfs_item_path(OLD.id)
                    USING ERRCODE = 'check_violation';
            END IF;
            IF OLD.deleted OR OLD.parent_id IS NULL THEN RETURN NEW; END IF;
            IF NEW.deleted THEN
                IF NOT docfs_allows(OLD.caps, 'delete') THEN refused := 'deleting'; END IF;
            ELSIF OLD.trashed_ns IS NULL AND NEW.trashed_ns IS NOT NULL THEN
                IF NOT docfs_allows(OLD.caps, 'trash') THEN refused := 'trashing'; END IF;
            ELSIF OLD.trashed_ns IS NULL THEN
                IF NEW.parent_id IS DISTINCT FROM OLD.parent_id AND NOT docfs_allows(OLD.caps, 'reparent') THEN
                    refused := 'moving to another folder';
                ELSIF NEW.name <> OLD.name AND NOT docfs_allows(OLD.caps, 'rename') THEN
                    -- A move that kept its name, suffixed by the server because the name was taken there.
                    IF OLD.kind <> 'directory' THEN ext := coalesce(substring(OLD.name from '.(\\.[^.]*)$'), ''); END IF;
                    base := left(OLD.name, length(OLD.name) - length(ext));
                    middle := substr(NEW.name, length(base) + 1, greatest(0, length(NEW.name) - length(base) - length(ext)));
                    IF NEW.parent_id IS NOT DISTINCT FROM OLD.parent_id OR left(NEW.name, length(base)) <> base
                       OR right(NEW.name, length(ext)) <> ext OR middle !~ '^ [0-9]+$' THEN
                        refused := 'renaming';
                    END IF;
                END IF;
                IF refused IS NULL
                   AND (NEW.content_version <> OLD.content_version OR NEW.content_key IS DISTINCT FROM OLD.content_key
                        OR NEW.size <> OLD.size)
                   AND NOT (NEW.content_key IS NOT DISTINCT FROM OLD.content_key AND NEW.size = OLD.size)
                   AND NOT (OLD.content_version = 1 AND OLD.size = 0 AND NEW.content_version = 2) THEN
                    IF NOT docfs_allows(OLD.caps, 'write') THEN
                        refused := 'writing';
                    ELSIF OLD.types IS NOT NULL THEN
                        SELECT l.layout INTO layout FROM docfs_layout l WHERE l.id = 1;
                        IF jsonb_typeof(layout->'types') = 'array' AND EXISTS (
                            SELECT 1 FROM jsonb_array_elements(layout->'types') t
                             WHERE coalesce((t->>'viewOnly')::boolean, false) AND t->>'identifier' = OLD.types[1]) THEN
                            refused := 'writing (' || OLD.types[1] || ' is view-only)';
                        END IF;
                    END IF;
                END IF;
            END IF;
            IF refused IS NOT NULL THEN
                RAISE EXCEPTION 'the server''s layout does not allow % /%', refused, docfs_item_path(OLD.id)
                    USING ERRCODE = 'check_violation';
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_items_rules ON docfs_items",
        """
        CREATE TRIGGER docfs_items_rules BEFORE UPDATE ON docfs_items
        FOR EACH ROW EXECUTE FUNCTION docfs_item_rules()
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_set_layout_mime(p_json text) RETURNS void LANGUAGE sql SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp AS $fn$
            INSERT INTO docfs_meta (key, value) VALUES ('layout_mime', p_json)
            ON CONFLICT (key) DO UPDATE SET value = excluded.value
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_set_layout_mime(text) FROM PUBLIC",
        "INSERT INTO docfs_meta (key, value) VALUES ('tree_id', gen_random_uuid()::text) ON CONFLICT (key) DO NOTHING",
    ]

    /// `"name"` with inner quotes doubled: a role name as an SQL identifier.
    static func quoteIdentifier(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
    /// `'text'` with inner quotes doubled (standard_conforming_strings is on since PostgreSQL 9.1).
    static func quoteLiteral(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "''") + "'" }
}
