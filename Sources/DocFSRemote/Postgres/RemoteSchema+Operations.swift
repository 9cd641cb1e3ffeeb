/// Version 11 of the server's schema, part one: the operations as server functions.
///
/// `docfs_apply(ops jsonb)` is the one way a replica changes the tree: a chunk of its outbox in
/// one call (one round trip), each operation checked and applied here in order, each in a
/// subtransaction of its own, under the writers' lock. It returns each operation's result and
/// stops at the first one refused (the replica decides what that means for the rest, then sends
/// them again). It runs as its owner (`SECURITY DEFINER`, a fixed `search_path`): the replica
/// role may execute it and read the tables, never write them.
///
/// Every statement in it is planned for its own arguments and the tables as they are
/// (`plan_cache_mode = force_custom_plan`): a plan cached while a new tree's tables were nearly
/// empty scanned them whole for every name and parent once they had grown (a drain of 8,000
/// files spent 23.6 s in these functions with cached plans, 5.5 s without).
///
/// What it trusts of the caller: nothing. The caller's identity is `session_user` (the login
/// role), recorded on every operation, change and version; an operation id used by another
/// replica (applied, or named by another replica's manifest) is refused; names, kinds, modes,
/// owners, times, tags and types are checked; contents must be a manifest this replica recorded
/// (`RemoteSchema+Doors.swift`) of the size given; positions and times are the server's.
///
/// Refusals carry SQLSTATEs the replica sorts (`RemoteDatabase.operationError`): DF010 a
/// content version conflict (DETAIL: the current version), DF011 no such item, DF012 a folder
/// not empty, DF013 moved elsewhere first, DF014 invalid, DF015 an operation id reused for
/// another kind (DETAIL: that kind), DF016 the item's create is not on the server; DF003 an
/// operation or key of another replica, DF004 contents not recorded by this replica (refused for
/// good); DF001 the manifest is gone (send again); 23514 the layout's rules.
extension RemoteSchema {
    static let operationStatements: [String] = [
        "CREATE OR REPLACE FUNCTION docfs_now() RETURNS bigint LANGUAGE sql STABLE AS $fn$ SELECT \(serverNowSQL) $fn$",
        """
        CREATE OR REPLACE FUNCTION docfs_fail(p_state text, p_message text, p_detail text DEFAULT NULL) RETURNS void
        LANGUAGE plpgsql AS $fn$
        BEGIN
            RAISE EXCEPTION USING ERRCODE = p_state, MESSAGE = p_message, DETAIL = coalesce(p_detail, '');
        END
        $fn$
        """,
        // A name a Linux folder can hold: 1–255 bytes (the database's text is valid UTF-8, no NUL).
        """
        CREATE OR REPLACE FUNCTION docfs_valid_name(p_name text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $fn$
        BEGIN
            IF p_name IS NULL OR octet_length(p_name) NOT BETWEEN 1 AND 255 OR p_name IN ('.', '..')
               OR position('/' IN p_name) > 0 THEN
                PERFORM docfs_fail('DF014', format('"%s" is not a valid item name', left(coalesce(p_name, ''), 300)));
            END IF;
            RETURN p_name;
        END
        $fn$
        """,
        // `ItemNames.numbered`: "BASE N.EXT" cut to 255 bytes whole, the longer part first.
        """
        CREATE OR REPLACE FUNCTION docfs_numbered(p_name text, p_counter integer, p_folder boolean) RETURNS text
        LANGUAGE plpgsql IMMUTABLE AS $fn$
        DECLARE
            base text := p_name;
            ext text := '';
            marker text := ' ' || p_counter;
            back integer := position('.' IN reverse(p_name));
        BEGIN
            IF NOT p_folder AND back > 0 AND back < length(p_name) THEN
                base := left(p_name, length(p_name) - back);
                ext := right(p_name, back);
            END IF;
            WHILE octet_length(base) + octet_length(marker) + octet_length(ext) > 255 LOOP
                IF base <> '' AND (octet_length(base) >= greatest(octet_length(ext) - 1, 0) OR length(ext) <= 1) THEN
                    base := left(base, -1);
                ELSIF length(ext) > 1 THEN
                    ext := left(ext, -1);
                ELSE
                    ext := '';
                END IF;
            END LOOP;
            RETURN base || marker || ext;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_free_name(p_name text, p_folder boolean, p_parent bigint, p_except bigint) RETURNS text
        LANGUAGE plpgsql AS $fn$
        DECLARE
            candidate text := p_name;
            counter integer := 2;
        BEGIN
            LOOP
                IF NOT EXISTS (SELECT 1 FROM docfs_items WHERE parent_id = p_parent AND name = candidate AND NOT deleted
                               AND trashed_ns IS NULL AND id IS DISTINCT FROM p_except) THEN
                    RETURN candidate;
                END IF;
                candidate := docfs_numbered(p_name, counter, p_folder);
                counter := counter + 1;
            END LOOP;
        END
        $fn$
        """,
        // The item an operation names: by identifier, or by the create this replica sent for it.
        """
        CREATE OR REPLACE FUNCTION docfs_target(p_op jsonb, p_field text, p_me text) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            found_id bigint;
        BEGIN
            IF p_op->>(p_field || '_op') IS NOT NULL THEN
                SELECT o.item_id INTO found_id FROM docfs_operations o
                 WHERE o.operation_id = (p_op->>(p_field || '_op'))::uuid AND o.kind = 'create' AND o.role IS NOT DISTINCT FROM p_me;
                IF NOT FOUND THEN
                    PERFORM docfs_fail('DF016', 'its folder or the item itself was never created on the server');
                END IF;
                RETURN found_id;
            END IF;
            IF p_op->>p_field IS NULL THEN
                PERFORM docfs_fail('DF014', format('the operation has no %s', p_field));
            END IF;
            RETURN (p_op->>p_field)::bigint;
        END
        $fn$
        """,
        // A time as ext4 keeps one (from 1901 on), in nanoseconds.
        """
        CREATE OR REPLACE FUNCTION docfs_time(p_op jsonb, p_field text) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            t bigint := (p_op->>p_field)::bigint;
        BEGIN
            IF t IS NOT NULL AND t < -2147483648000000000 THEN
                PERFORM docfs_fail('DF014', format('%s %s is out of range', p_field, t));
            END IF;
            RETURN t;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_id_number(p_op jsonb, p_field text) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            v bigint := (p_op->>p_field)::bigint;
        BEGIN
            IF v IS NOT NULL AND v NOT BETWEEN 0 AND 4294967295 THEN
                PERFORM docfs_fail('DF014', format('%s %s is out of range', p_field, v));
            END IF;
            RETURN v;
        END
        $fn$
        """,
        // Tags, or a type chain: at most 256 words of 1–255 bytes.
        """
        CREATE OR REPLACE FUNCTION docfs_words(p_op jsonb, p_field text) RETURNS text[] LANGUAGE plpgsql AS $fn$
        DECLARE
            words text[];
        BEGIN
            IF p_op->p_field IS NULL OR jsonb_typeof(p_op->p_field) = 'null' THEN RETURN NULL; END IF;
            IF jsonb_typeof(p_op->p_field) <> 'array' OR jsonb_array_length(p_op->p_field) > 256 THEN
                PERFORM docfs_fail('DF014', format('%s is not a list of at most 256 words', p_field));
            END IF;
            words := ARRAY(SELECT jsonb_array_elements_text(p_op->p_field));
            IF EXISTS (SELECT 1 FROM unnest(words) w WHERE w IS NULL OR octet_length(w) NOT BETWEEN 1 AND 255) THEN
                PERFORM docfs_fail('DF014', format('%s holds a word that is empty or over 255 bytes', p_field));
            END IF;
            RETURN words;
        END
        $fn$
        """,
        // Contents a version may name: a manifest this replica recorded, of the size given.
        """
        CREATE OR REPLACE FUNCTION docfs_contents(p_key text, p_size bigint, p_me text) RETURNS void LANGUAGE plpgsql AS $fn$
        DECLARE
            m record;
        BEGIN
            IF p_key IS NULL OR p_size IS NULL OR p_size < 0 THEN
                PERFORM docfs_fail('DF014', 'a file''s version needs a content key and a size');
            END IF;
            SELECT role, size INTO m FROM docfs_manifests WHERE key = p_key;
            IF NOT FOUND THEN
                PERFORM docfs_fail('DF001', format('the manifest %s is not on the server (removed by docfs remote gc while this replica waited); sent again', p_key));
            END IF;
            IF m.role IS NOT NULL AND m.role IS DISTINCT FROM p_me THEN
                PERFORM docfs_fail('DF004', format('the contents %s were not recorded by this replica', p_key));
            END IF;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_live(p_id bigint) RETURNS docfs_items LANGUAGE plpgsql AS $fn$
        DECLARE
            it docfs_items;
        BEGIN
            SELECT * INTO it FROM docfs_items WHERE id = p_id AND NOT deleted FOR UPDATE;
            IF NOT FOUND THEN PERFORM docfs_fail('DF011', format('item %s is not on the server', p_id), p_id::text); END IF;
            RETURN it;
        END
        $fn$
        """,
        // The folder something goes into: alive (with its deleted ancestors brought back, each a
        // change: a replica put something in it after another deleted it) and a folder.
        """
        CREATE OR REPLACE FUNCTION docfs_destination(p_folder bigint, p_op uuid, p_me text) RETURNS void LANGUAGE plpgsql AS $fn$
        DECLARE
            r record;
            chain bigint[] := '{}';
            cursor_id bigint := p_folder;
            free text;
            cv bigint;
            mv bigint;
        BEGIN
            LOOP
                SELECT parent_id, name, deleted, kind INTO r FROM docfs_items WHERE id = cursor_id FOR UPDATE;
                IF NOT FOUND THEN PERFORM docfs_fail('DF011', format('item %s is not on the server', cursor_id), cursor_id::text); END IF;
                IF r.kind <> 'directory' THEN PERFORM docfs_fail('DF014', format('item %s is not a directory', cursor_id)); END IF;
                EXIT WHEN NOT r.deleted OR r.parent_id IS NULL;
                chain := cursor_id || chain;
                cursor_id := r.parent_id;
            END LOOP;
            FOREACH cursor_id IN ARRAY chain LOOP
                SELECT parent_id, name INTO r FROM docfs_items WHERE id = cursor_id;
                free := docfs_free_name(r.name, true, r.parent_id, cursor_id);
                UPDATE docfs_items SET deleted = false, trashed_ns = NULL, name = free, metadata_version = metadata_version + 1,
                       changed_ns = docfs_now() WHERE id = cursor_id RETURNING content_version, metadata_version INTO cv, mv;
                INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns, role)
                VALUES (cursor_id, 'create', p_op, cv, mv, docfs_now(), p_me);
            END LOOP;
        END
        $fn$
        """,
        createFunction, contentFunction, moveFunction, smallOperationsFunction, applyOneFunction, applyFunction,
    ]

    static let serverNowSQL = "(extract(epoch from now()) * 1000000000)::bigint"

    static let createFunction = """
        CREATE OR REPLACE FUNCTION docfs_op_create(p_op jsonb, p_id uuid, p_me text) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
        #variable_conflict use_variable
        DECLARE
            parent bigint := docfs_target(p_op, 'parent', p_me);
            wanted text := docfs_valid_name(p_op->>'name');
            kind text := p_op->>'item_kind';
            target text := p_op->>'symlink_target';
            key text := p_op->>'content_key';
            bytes bigint := coalesce((p_op->>'size')::bigint, 0);
            mode bigint := coalesce((p_op->>'mode')::bigint, 420);
            replica text := p_op->>'replica';
            new_id bigint;
        BEGIN
            IF kind IS NULL OR kind NOT IN ('file', 'directory', 'symlink') THEN
                PERFORM docfs_fail('DF014', format('"%s" is not a kind of item', left(coalesce(kind, ''), 40)));
            END IF;
            IF mode NOT BETWEEN 0 AND 4095 THEN PERFORM docfs_fail('DF014', format('mode %s is out of range', mode)); END IF;
            IF (kind = 'symlink') <> (target IS NOT NULL)
               OR (target IS NOT NULL AND octet_length(target) NOT BETWEEN 1 AND 4095) THEN
                PERFORM docfs_fail('DF014', 'a symbolic link, and only one, has a target of 1 to 4095 bytes');
            END IF;
            IF kind = 'file' AND key IS NOT NULL THEN
                PERFORM docfs_contents(key, bytes, p_me);
            ELSIF key IS NOT NULL OR bytes <> 0 THEN
                PERFORM docfs_fail('DF014', 'only a file has contents, and no contents are no bytes');
            END IF;
            IF replica IS NOT NULL AND octet_length(replica) > 512 THEN replica := left(replica, 128); END IF;
            PERFORM docfs_destination(parent, p_id, p_me);
            INSERT INTO docfs_items (parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns,
                                     uid, gid, mode, tags, symlink_target, content_key, types)
            VALUES (parent, docfs_free_name(wanted, kind = 'directory', parent, NULL), kind, bytes,
                    coalesce(docfs_time(p_op, 'created_ns'), docfs_now()), coalesce(docfs_time(p_op, 'modified_ns'), docfs_now()),
                    docfs_now(), coalesce(docfs_time(p_op, 'modified_ns'), docfs_now()),
                    coalesce(docfs_id_number(p_op, 'uid'), 0), coalesce(docfs_id_number(p_op, 'gid'), 0), mode,
                    coalesce(docfs_words(p_op, 'tags'), '{}'), target, key, docfs_words(p_op, 'types'))
            RETURNING id INTO new_id;
            IF kind = 'file' THEN
                INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, replica, role)
                VALUES (new_id, 1, key, bytes, docfs_now(), replica, p_me);
            END IF;
            RETURN ARRAY[new_id, 1, 1];
        END
        $fn$
        """

    /// A new content version if the file is still at the expected one (compare-and-swap); an
    /// edit against a delete keeps the edit (the file comes back with these contents).
    static let contentFunction = """
        CREATE OR REPLACE FUNCTION docfs_op_content(p_op jsonb, p_id uuid, p_me text) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
        #variable_conflict use_variable
        DECLARE
            item_id bigint := docfs_target(p_op, 'item', p_me);
            expected bigint := (p_op->>'expected_version')::bigint;
            key text := p_op->>'content_key';
            bytes bigint := (p_op->>'size')::bigint;
            modified bigint := coalesce(docfs_time(p_op, 'modified_ns'), docfs_now());
            replica text := left(p_op->>'replica', 128);
            it docfs_items;
            cv bigint;
            mv bigint;
        BEGIN
            PERFORM docfs_contents(key, bytes, p_me);
            SELECT * INTO it FROM docfs_items WHERE id = item_id FOR UPDATE;
            IF NOT FOUND OR (it.deleted AND (it.kind <> 'file' OR it.parent_id IS NULL)) THEN
                PERFORM docfs_fail('DF011', format('item %s is not on the server', item_id), item_id::text);
            END IF;
            IF it.kind <> 'file' THEN PERFORM docfs_fail('DF014', format('item %s is not a file', item_id)); END IF;
            IF it.deleted THEN
                PERFORM docfs_destination(it.parent_id, p_id, p_me);
                UPDATE docfs_items SET deleted = false, trashed_ns = NULL, name = docfs_free_name(it.name, false, it.parent_id, item_id),
                       content_key = key, size = bytes, content_version = content_version + 1,
                       metadata_version = metadata_version + 1, modified_ns = modified, changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
            ELSE
                IF expected IS NULL OR it.content_version <> expected THEN
                    PERFORM docfs_fail('DF010', format('item %s is at content version %s, not %s', item_id, it.content_version, expected),
                                       it.content_version::text);
                END IF;
                UPDATE docfs_items SET content_key = key, size = bytes, content_version = content_version + 1,
                       metadata_version = metadata_version + 1, modified_ns = modified, changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
            END IF;
            INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, replica, role)
            VALUES (item_id, cv, key, bytes, docfs_now(), replica, p_me);
            RETURN ARRAY[item_id, cv, mv];
        END
        $fn$
        """

    /// A rename and/or move. With where the replica saw the item, a move made elsewhere first
    /// wins (DF013); a name taken there gets a suffix; never into itself.
    static let moveFunction = moveFunction(directoryMoveLock: "")

    /// `directoryMoveLock` (schema 17): taken before a folder moves to another folder, so that
    /// two such moves never pass each other's check against a folder going into itself.
    static func moveFunction(directoryMoveLock: String) -> String {
        let serialized =
            directoryMoveLock.isEmpty
            ? ""
            : """
            IF it.kind = 'directory' AND destination IS DISTINCT FROM it.parent_id THEN
                \(directoryMoveLock)
            END IF;
            """
        return """
            CREATE OR REPLACE FUNCTION docfs_op_move(p_op jsonb, p_id uuid, p_me text, p_untrash boolean) RETURNS bigint[]
            LANGUAGE plpgsql AS $fn$
            #variable_conflict use_variable
            DECLARE
                item_id bigint := docfs_target(p_op, 'item', p_me);
                destination bigint := docfs_target(p_op, 'parent', p_me);
                wanted text := docfs_valid_name(p_op->>'name');
                types text[] := docfs_words(p_op, 'types');
                it docfs_items := docfs_live(item_id);
                cv bigint;
                mv bigint;
            BEGIN
                IF it.parent_id IS NULL THEN PERFORM docfs_fail('DF014', 'the root cannot be moved'); END IF;
                IF p_untrash AND it.trashed_ns IS NULL THEN
                    PERFORM docfs_fail('DF014', format('item %s is not in the trash', item_id));
                END IF;
                IF NOT p_untrash AND p_op->>'expected_parent' IS NOT NULL AND p_op->>'expected_name' IS NOT NULL
                   AND (it.parent_id <> (p_op->>'expected_parent')::bigint OR it.name <> p_op->>'expected_name'
                        OR it.trashed_ns IS NOT NULL) THEN
                    PERFORM docfs_fail('DF013', format('item %s was moved elsewhere first', item_id), item_id::text);
                END IF;
                PERFORM docfs_destination(destination, p_id, p_me);
                \(serialized)
                IF it.kind = 'directory' AND EXISTS (
                    WITH RECURSIVE up(id, parent_id) AS (
                        SELECT i.id, i.parent_id FROM docfs_items i WHERE i.id = destination
                        UNION ALL SELECT i.id, i.parent_id FROM docfs_items i JOIN up ON i.id = up.parent_id)
                    SELECT 1 FROM up WHERE up.id = item_id) THEN
                    PERFORM docfs_fail('DF014', format('item %s cannot move into itself or its own subfolder', item_id));
                END IF;
                UPDATE docfs_items SET parent_id = destination, name = docfs_free_name(wanted, it.kind = 'directory', destination, item_id),
                       types = coalesce(types, docfs_items.types),
                       trashed_ns = CASE WHEN p_untrash THEN NULL ELSE trashed_ns END,
                       metadata_version = metadata_version + 1, changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
                RETURN ARRAY[item_id, cv, mv];
            END
            $fn$
            """
    }

    /// Delete (a tombstone stays; with the content version the replica deleted, a file changed
    /// since is kept: DF010), trash, and attributes.
    static let smallOperationsFunction = """
        CREATE OR REPLACE FUNCTION docfs_op_small(p_op jsonb, p_kind text, p_me text) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
        #variable_conflict use_variable
        DECLARE
            item_id bigint := docfs_target(p_op, 'item', p_me);
            it docfs_items := docfs_live(item_id);
            expected bigint := (p_op->>'expected_version')::bigint;
            mode bigint := (p_op->>'mode')::bigint;
            cv bigint;
            mv bigint;
        BEGIN
            IF it.parent_id IS NULL AND p_kind <> 'attributes' THEN PERFORM docfs_fail('DF014', format('the root cannot be given a %s', p_kind)); END IF;
            IF p_kind = 'delete' THEN
                IF expected IS NOT NULL AND it.kind = 'file' AND it.content_version <> expected THEN
                    PERFORM docfs_fail('DF010', format('item %s is at content version %s, not %s', item_id, it.content_version, expected),
                                       it.content_version::text);
                END IF;
                IF it.kind = 'directory' AND EXISTS (SELECT 1 FROM docfs_items c WHERE c.parent_id = item_id AND NOT c.deleted) THEN
                    PERFORM docfs_fail('DF012', format('folder %s is not empty', item_id), item_id::text);
                END IF;
                UPDATE docfs_items SET deleted = true, metadata_version = metadata_version + 1, changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
            ELSIF p_kind = 'trash' THEN
                UPDATE docfs_items SET trashed_ns = coalesce(trashed_ns, docfs_now()), metadata_version = metadata_version + 1,
                       changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
            ELSE
                IF mode IS NOT NULL AND mode NOT BETWEEN 0 AND 4095 THEN
                    PERFORM docfs_fail('DF014', format('mode %s is out of range', mode));
                END IF;
                UPDATE docfs_items SET
                    uid = coalesce(docfs_id_number(p_op, 'uid'), uid), gid = coalesce(docfs_id_number(p_op, 'gid'), gid),
                    mode = coalesce(mode, docfs_items.mode),
                    created_ns = coalesce(docfs_time(p_op, 'created_ns'), created_ns),
                    modified_ns = coalesce(docfs_time(p_op, 'modified_ns'), modified_ns),
                    accessed_ns = coalesce(docfs_time(p_op, 'accessed_ns'), accessed_ns),
                    tags = coalesce(docfs_words(p_op, 'tags'), tags),
                    favorite_rank = CASE WHEN (p_op->>'set_rank')::boolean THEN (p_op->>'favorite_rank')::bigint ELSE favorite_rank END,
                    metadata_version = metadata_version + 1, changed_ns = docfs_now()
                WHERE id = item_id RETURNING content_version, metadata_version INTO cv, mv;
            END IF;
            RETURN ARRAY[item_id, cv, mv];
        END
        $fn$
        """

    /// One operation: a replay of this replica's answers what it did; another replica's id is
    /// refused; else it is applied, logged (the server's position and time) and recorded.
    static let applyOneFunction = """
        CREATE OR REPLACE FUNCTION docfs_apply_one(p_op jsonb, p_me text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
        DECLARE
            op_id uuid := (p_op->>'op')::uuid;
            kind text := p_op->>'kind';
            prior docfs_operations;
            done bigint[];
            pos bigint;
        BEGIN
            IF op_id IS NULL OR kind IS NULL OR kind NOT IN ('create', 'content', 'move', 'delete', 'trash', 'untrash', 'attributes') THEN
                PERFORM docfs_fail('DF014', format('not an operation: %s', left(p_op::text, 200)));
            END IF;
            SELECT * INTO prior FROM docfs_operations WHERE operation_id = op_id;
            IF FOUND THEN
                IF prior.role IS DISTINCT FROM p_me THEN
                    PERFORM docfs_fail('DF003', format('operation %s belongs to another replica', op_id));
                END IF;
                IF prior.kind <> kind THEN
                    PERFORM docfs_fail('DF015', format('operation %s was a %s', op_id, prior.kind), prior.kind);
                END IF;
                RETURN jsonb_build_object('ok', true, 'item', prior.item_id, 'cv', prior.content_version, 'mv', prior.metadata_version,
                                          'position', prior.position, 'replayed', true,
                                          'name', (SELECT name FROM docfs_items WHERE id = prior.item_id));
            END IF;
            IF EXISTS (SELECT 1 FROM docfs_manifests m WHERE m.operation_id = op_id AND m.role IS DISTINCT FROM p_me) THEN
                PERFORM docfs_fail('DF003', format('operation %s belongs to another replica', op_id));
            END IF;
            done := CASE kind
                WHEN 'create' THEN docfs_op_create(p_op, op_id, p_me)
                WHEN 'content' THEN docfs_op_content(p_op, op_id, p_me)
                WHEN 'move' THEN docfs_op_move(p_op, op_id, p_me, false)
                WHEN 'untrash' THEN docfs_op_move(p_op, op_id, p_me, true)
                ELSE docfs_op_small(p_op, kind, p_me) END;
            INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns, role)
            VALUES (done[1], kind, op_id, done[2], done[3], docfs_now(), p_me) RETURNING position INTO pos;
            INSERT INTO docfs_operations (operation_id, kind, item_id, content_version, metadata_version, position, applied_ns, role)
            VALUES (op_id, kind, done[1], done[2], done[3], pos, docfs_now(), p_me);
            RETURN jsonb_build_object('ok', true, 'item', done[1], 'cv', done[2], 'mv', done[3], 'position', pos, 'replayed', false,
                                      'name', (SELECT name FROM docfs_items WHERE id = done[1]));
        END
        $fn$
        """

    /// A chunk of operations in order, each in its own subtransaction; stops at the first refused
    /// (its error is the last result). Drops this replica's intents of the contents now named.
    static let applyFunction = applyFunction(lock: advisoryWritersLock)

    /// `placedAtCommit` (schema 17, `RemoteSchema+Positions`): positions are given as the
    /// transaction commits, which also notifies; a change made by this call answers position 0,
    /// and a role's calls run one at a time (a retried chunk waits for the attempt still running).
    static func applyFunction(lock: String, name: String = "docfs_apply", placedAtCommit: Bool = false) -> String {
        let ownCalls =
            !placedAtCommit
            ? ""
            : """
            INSERT INTO docfs_replicas AS r (role, last_seen_ns) VALUES (me, docfs_now())
            ON CONFLICT (role) DO UPDATE SET last_seen_ns = excluded.last_seen_ns;
            """
        let answer =
            !placedAtCommit
            ? "results := results || jsonb_build_array(result);"
            : """
            results := results || jsonb_build_array(CASE WHEN (result->>'replayed')::boolean THEN result
                                                             ELSE jsonb_set(result, '{position}', '0') END);
            """
        let notify =
            placedAtCommit
            ? ""
            : """
            IF last_position IS NOT NULL THEN PERFORM pg_notify('\(RemoteDatabase.notificationChannel)', last_position::text); END IF;
            """
        return """
            CREATE OR REPLACE FUNCTION \(name)(p_ops jsonb) RETURNS jsonb LANGUAGE plpgsql
            SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp
            SET plan_cache_mode = force_custom_plan AS $fn$
            DECLARE
                me text := session_user;
                results jsonb := '[]';
                result jsonb;
                named text[] := '{}';
                last_position bigint;
                st text;
                msg text;
                det text;
            BEGIN
                IF jsonb_typeof(p_ops) IS DISTINCT FROM 'array' OR jsonb_array_length(p_ops) > 4096 THEN
                    RAISE EXCEPTION 'docfs_apply takes a list of at most 4096 operations' USING ERRCODE = 'DF014';
                END IF;
                \(lock)
                \(ownCalls)
                FOR i IN 0 .. jsonb_array_length(p_ops) - 1 LOOP
                    BEGIN
                        result := docfs_apply_one(p_ops->i, me);
                    EXCEPTION WHEN OTHERS THEN
                        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
                        results := results || jsonb_build_array(jsonb_build_object('ok', false, 'state', st, 'message', msg, 'detail', det));
                        EXIT;
                    END;
                    \(answer)
                    IF NOT (result->>'replayed')::boolean THEN last_position := (result->>'position')::bigint; END IF;
                    IF p_ops->i->>'content_key' IS NOT NULL THEN named := named || (p_ops->i->>'content_key'); END IF;
                END LOOP;
                DELETE FROM docfs_upload_intents WHERE key = ANY(named) AND role IS NOT DISTINCT FROM me;
                INSERT INTO docfs_replicas AS r (role, last_seen_ns, operations) VALUES (me, docfs_now(), jsonb_array_length(results))
                ON CONFLICT (role) DO UPDATE SET last_seen_ns = excluded.last_seen_ns, operations = r.operations + excluded.operations;
                \(notify)
                RETURN results;
            END
            $fn$
            """
    }
}
