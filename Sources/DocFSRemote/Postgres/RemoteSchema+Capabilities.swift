/// Version 4 of the server's schema: each item's capabilities, kept by the server from its own
/// layout, and checked on every change (see `RemoteSchema`'s list of versions).
extension RemoteSchema {
    static let capabilityStatements: [String] = [
        // MIME words of allowedContentTypes, resolved by the replicas into docfs_meta.layout_mime.
        admissionFunctionResolvingMIME,
        // Capability words as the layout gives them (NULL: all), as a replica's store keeps them
        // per item: an item takes its folder's `contents` words when it is made and keeps them
        // when it moves; a folder passes its own on to what is made inside it.
        "ALTER TABLE docfs_items ADD COLUMN caps jsonb",
        "ALTER TABLE docfs_items ADD COLUMN contents_caps jsonb",
        """
        CREATE FUNCTION docfs_allows(words jsonb, word text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $fn$
            SELECT jsonb_typeof(words) IS DISTINCT FROM 'array'
                OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(words) w WHERE lower(w) IN (word, 'all'))
        $fn$
        """,
        """
        CREATE FUNCTION docfs_item_path(p_id bigint) RETURNS text LANGUAGE plpgsql STABLE AS $fn$
        DECLARE
            names text[] := '{}';
            cursor_id bigint := p_id;
            above record;
            depth integer := 0;
        BEGIN
            LOOP
                SELECT i.parent_id, i.name INTO above FROM docfs_items i WHERE i.id = cursor_id;
                EXIT WHEN NOT FOUND OR above.parent_id IS NULL OR depth > 4096;
                names := above.name || names;
                cursor_id := above.parent_id;
                depth := depth + 1;
            END LOOP;
            RETURN array_to_string(names, '/');
        END
        $fn$
        """,
        """
        CREATE FUNCTION docfs_item_at(p_path text) RETURNS bigint LANGUAGE plpgsql STABLE AS $fn$
        DECLARE
            cursor_id bigint;
            part text;
        BEGIN
            SELECT i.id INTO cursor_id FROM docfs_items i WHERE i.parent_id IS NULL;
            FOREACH part IN ARRAY string_to_array(p_path, '/') LOOP
                SELECT i.id INTO cursor_id FROM docfs_items i
                 WHERE i.parent_id = cursor_id AND i.name = part AND NOT i.deleted AND i.trashed_ns IS NULL;
                IF NOT FOUND THEN RETURN NULL; END IF;
            END LOOP;
            RETURN cursor_id;
        END
        $fn$
        """,
        // A new item's capabilities: its folder's contents words, or a layout folder's own.
        """
        CREATE FUNCTION docfs_item_caps() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            layout jsonb;
            inherited jsonb;
            parent_path text;
            entry jsonb;
        BEGIN
            IF NEW.parent_id IS NULL THEN RETURN NEW; END IF;
            SELECT i.contents_caps INTO inherited FROM docfs_items i WHERE i.id = NEW.parent_id;
            NEW.caps := inherited;
            NEW.contents_caps := CASE WHEN NEW.kind = 'directory' THEN inherited END;
            IF NEW.kind = 'directory' THEN
                SELECT l.layout INTO layout FROM docfs_layout l WHERE l.id = 1;
                IF jsonb_typeof(layout->'folders') = 'array' THEN
                    parent_path := docfs_item_path(NEW.parent_id);
                    SELECT f INTO entry FROM jsonb_array_elements(layout->'folders') f
                     WHERE f->>'path' = CASE WHEN parent_path = '' THEN NEW.name ELSE parent_path || '/' || NEW.name END LIMIT 1;
                    IF entry IS NOT NULL THEN
                        NEW.caps := entry->'capabilities';
                        NEW.contents_caps := entry->'contents';
                    END IF;
                END IF;
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        // A change of a live item needs the capability a replica checks for it: writing its
        // contents `write` (and a type the layout does not make view-only), renaming `rename`,
        // moving `reparent`, trashing `trash`, deleting `delete` (a name the server suffixes in a
        // move, `docfs.suffixed_by_server`, is no rename). The contents a file's creating
        // program wrote (`docfs.initial_contents` set for the transaction) are let in, as on a
        // replica, where the program that creates a file writes it whatever its capabilities.
        """
        CREATE FUNCTION docfs_item_rules() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            layout jsonb;
            refused text;
        BEGIN
            IF OLD.deleted OR OLD.parent_id IS NULL THEN RETURN NEW; END IF;
            IF NEW.deleted THEN
                IF NOT docfs_allows(OLD.caps, 'delete') THEN refused := 'deleting'; END IF;
            ELSIF OLD.trashed_ns IS NULL AND NEW.trashed_ns IS NOT NULL THEN
                IF NOT docfs_allows(OLD.caps, 'trash') THEN refused := 'trashing'; END IF;
            ELSIF OLD.trashed_ns IS NULL THEN
                IF NEW.parent_id IS DISTINCT FROM OLD.parent_id AND NOT docfs_allows(OLD.caps, 'reparent') THEN
                    refused := 'moving to another folder';
                ELSIF NEW.name <> OLD.name AND NOT docfs_allows(OLD.caps, 'rename')
                      AND coalesce(current_setting('docfs.suffixed_by_server', true), '') <> 'on' THEN
                    refused := 'renaming';
                ELSIF NEW.content_version <> OLD.content_version
                      AND coalesce(current_setting('docfs.initial_contents', true), '') <> 'on' THEN
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
        // A server made before version 4: the layout's folders get their words, and what is
        // inside them their contents words (shallow folders first, so nested ones win).
        """
        DO $do$
        DECLARE
            layout jsonb;
            entry jsonb;
            target bigint;
        BEGIN
            SELECT l.layout INTO layout FROM docfs_layout l WHERE l.id = 1;
            IF jsonb_typeof(layout->'folders') IS DISTINCT FROM 'array' THEN RETURN; END IF;
            FOR entry IN SELECT f FROM jsonb_array_elements(layout->'folders') f ORDER BY length(f->>'path') LOOP
                target := docfs_item_at(entry->>'path');
                CONTINUE WHEN target IS NULL;
                UPDATE docfs_items SET caps = entry->'capabilities', contents_caps = entry->'contents' WHERE id = target;
                WITH RECURSIVE below(id) AS (
                    SELECT i.id FROM docfs_items i WHERE i.parent_id = target
                    UNION ALL SELECT i.id FROM docfs_items i JOIN below b ON i.parent_id = b.id)
                UPDATE docfs_items SET caps = entry->'contents',
                       contents_caps = CASE WHEN kind = 'directory' THEN entry->'contents' END
                 WHERE id IN (SELECT id FROM below);
            END LOOP;
        END
        $do$
        """,
        """
        CREATE TRIGGER docfs_items_caps BEFORE INSERT ON docfs_items
        FOR EACH ROW EXECUTE FUNCTION docfs_item_caps()
        """,
        """
        CREATE TRIGGER docfs_items_rules BEFORE UPDATE OF content_version, name, parent_id, trashed_ns, deleted ON docfs_items
        FOR EACH ROW EXECUTE FUNCTION docfs_item_rules()
        """,
    ]
}
