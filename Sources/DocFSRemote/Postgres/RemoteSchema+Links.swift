import DocFSWire

/// Version 12 of the server's schema: hard links, as a replica's store keeps them
/// (`LocalStore+Moves`). An item keeps its own row at its first name; each further name is a
/// row of its own in `docfs_items` (a *name row*: its place, `parent_id` and `name`, and
/// `link_of`, the item it names; nothing else of it is read). So a name takes its folder's
/// unique-name index, suffix rule, layout rules and capabilities like any item, the change log
/// names it, and the full listing holds it. Contents, owner, mode and times stay the item's: an
/// edit through any name is a version of that one item.
///
/// Three operations of `docfs_apply` change names (the others refuse a name row, and the name
/// operations refuse an item's own row):
/// - `link` (`item`, `parent`, `name`): a new name of a live file or symbolic link (not a folder,
///   not in the trash, not itself a name) in a live folder (not deleted, not in the trash: a
///   name is never what brings a folder back); a taken name gets the usual suffix.
/// - `unlink` (`item`: the name row): that name goes (a tombstone, as items).
/// - `move_name` (`item`, `parent`, `name`, `expected_parent`, `expected_name`): a rename or
///   move of that name, as `move`.
/// `delete` of an item that still has names (a replica that never saw them) removes the name it
/// had: the item takes the place of its oldest other name, which goes, as a replica's store does.
///
/// Version 13: one name in the trash. `trash` and `untrash` take a name row as they take an
/// item (`docfs_op_name_trash`): a trashed name keeps its folder and name with `trashed_ns` set,
/// as a trashed item does, so a replica shows it at the top of its trash remembering where it
/// came from; `untrash` puts it in a live folder (not deleted, not in the trash, not a name: a
/// name never brings a folder back) under a free name; `unlink` of a trashed name removes it.
extension RemoteSchema {
    // The first schema with names and the first with trashed names: `ServerSchemaVersions`
    // (DocFSWire), named once for this client and the replica's store.
    /// The oldest schema a replica works with (one without names: links are refused then).
    package static let oldestServed = 11

    static let linkStatements: [String] = [
        "ALTER TABLE docfs_items ADD COLUMN IF NOT EXISTS link_of bigint REFERENCES docfs_items(id)",
        "CREATE INDEX IF NOT EXISTS docfs_items_link_of ON docfs_items (link_of) WHERE link_of IS NOT NULL",
        // A later name of an item is named by the `link` this replica sent for it, as an item by its create.
        """
        CREATE OR REPLACE FUNCTION docfs_target(p_op jsonb, p_field text, p_me text) RETURNS bigint LANGUAGE plpgsql AS $fn$
        DECLARE
            found_id bigint;
        BEGIN
            IF p_op->>(p_field || '_op') IS NOT NULL THEN
                SELECT o.item_id INTO found_id FROM docfs_operations o
                 WHERE o.operation_id = (p_op->>(p_field || '_op'))::uuid AND o.kind IN ('create', 'link')
                   AND o.role IS NOT DISTINCT FROM p_me;
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
        linkFunction, passNameFunction, applyOne(trashingNames: false),
        // The new functions are the owner's (PostgreSQL lets PUBLIC execute new ones; replicas call docfs_apply).
        """
        REVOKE ALL ON FUNCTION docfs_op_link(jsonb, uuid, text), docfs_pass_name(bigint, uuid, text) FROM PUBLIC
        """,
    ]

    static let linkFunction = """
        CREATE OR REPLACE FUNCTION docfs_op_link(p_op jsonb, p_id uuid, p_me text) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
        #variable_conflict use_variable
        DECLARE
            item_id bigint := docfs_target(p_op, 'item', p_me);
            parent bigint := docfs_target(p_op, 'parent', p_me);
            wanted text := docfs_valid_name(p_op->>'name');
            it docfs_items;
            folder docfs_items;
            new_id bigint;
        BEGIN
            SELECT * INTO it FROM docfs_items WHERE id = item_id FOR UPDATE;
            IF NOT FOUND OR it.deleted THEN
                PERFORM docfs_fail('DF011', format('item %s is not on the server', item_id), item_id::text);
            END IF;
            IF it.link_of IS NOT NULL THEN
                PERFORM docfs_fail('DF014', format('item %s is a name of item %s, not an item', item_id, it.link_of));
            END IF;
            IF it.parent_id IS NULL OR it.kind = 'directory' THEN
                PERFORM docfs_fail('DF014', format('item %s is a folder: folders cannot be hard-linked', item_id));
            END IF;
            IF it.trashed_ns IS NOT NULL THEN PERFORM docfs_fail('DF014', format('item %s is in the trash', item_id)); END IF;
            SELECT * INTO folder FROM docfs_items WHERE id = parent FOR UPDATE;
            IF NOT FOUND OR folder.deleted THEN
                PERFORM docfs_fail('DF011', format('folder %s is not on the server', parent), parent::text);
            END IF;
            IF folder.kind <> 'directory' OR folder.link_of IS NOT NULL THEN
                PERFORM docfs_fail('DF014', format('item %s is not a directory', parent));
            END IF;
            IF folder.trashed_ns IS NOT NULL THEN PERFORM docfs_fail('DF014', format('folder %s is in the trash', parent)); END IF;
            INSERT INTO docfs_items (parent_id, name, kind, size, created_ns, modified_ns, changed_ns, accessed_ns,
                                     uid, gid, mode, symlink_target, types, link_of)
            VALUES (parent, docfs_free_name(wanted, false, parent, NULL), it.kind, 0, it.created_ns, it.modified_ns,
                    docfs_now(), it.accessed_ns, it.uid, it.gid, it.mode, it.symlink_target, it.types, item_id)
            RETURNING id INTO new_id;
            RETURN ARRAY[new_id, 1, 1];
        END
        $fn$
        """

    /// An item's own name goes while it has others: it takes the place of its oldest other name,
    /// which goes (logged as that name's `unlink`). False: it has no other name.
    static let passNameFunction = """
        CREATE OR REPLACE FUNCTION docfs_pass_name(p_item bigint, p_op uuid, p_me text) RETURNS boolean LANGUAGE plpgsql AS $fn$
        DECLARE
            n docfs_items;
            cv bigint;
            mv bigint;
        BEGIN
            SELECT * INTO n FROM docfs_items WHERE link_of = p_item AND NOT deleted ORDER BY id LIMIT 1 FOR UPDATE;
            IF NOT FOUND THEN RETURN false; END IF;
            UPDATE docfs_items SET deleted = true, metadata_version = metadata_version + 1, changed_ns = docfs_now()
            WHERE id = n.id RETURNING content_version, metadata_version INTO cv, mv;
            INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns, role)
            VALUES (n.id, 'unlink', p_op, cv, mv, docfs_now(), p_me);
            UPDATE docfs_items SET parent_id = n.parent_id, name = n.name, trashed_ns = n.trashed_ns,
                   metadata_version = metadata_version + 1, changed_ns = docfs_now()
            WHERE id = p_item;
            RETURN true;
        END
        $fn$
        """

    static let trashedNameStatements: [String] = [
        nameTrashFunction, applyOne(trashingNames: true),
        "REVOKE ALL ON FUNCTION docfs_op_name_trash(jsonb, uuid, text, boolean) FROM PUBLIC",
    ]

    /// `trash` and `untrash` of a name row (version 13). Trashing a trashed name answers it as it
    /// is (another replica trashed it first), as for items.
    static let nameTrashFunction = """
        CREATE OR REPLACE FUNCTION docfs_op_name_trash(p_op jsonb, p_id uuid, p_me text, p_untrash boolean) RETURNS bigint[]
        LANGUAGE plpgsql AS $fn$
        #variable_conflict use_variable
        DECLARE
            name_id bigint := docfs_target(p_op, 'item', p_me);
            it docfs_items := docfs_live(name_id);
            named docfs_items;
            parent bigint;
            wanted text;
            folder docfs_items;
            cv bigint;
            mv bigint;
        BEGIN
            SELECT * INTO named FROM docfs_items WHERE id = it.link_of AND NOT deleted;
            IF NOT FOUND THEN PERFORM docfs_fail('DF011', format('item %s, named by %s, is not on the server', it.link_of, name_id)); END IF;
            IF NOT p_untrash THEN
                IF p_op->>'parent' IS NOT NULL OR p_op->>'parent_op' IS NOT NULL OR p_op->>'name' IS NOT NULL THEN
                    PERFORM docfs_fail('DF014', 'a trash takes no folder or name: a trashed name keeps where it came from');
                END IF;
                UPDATE docfs_items SET trashed_ns = coalesce(trashed_ns, docfs_now()), metadata_version = metadata_version + 1,
                       changed_ns = docfs_now()
                WHERE id = name_id RETURNING content_version, metadata_version INTO cv, mv;
                RETURN ARRAY[name_id, cv, mv];
            END IF;
            IF it.trashed_ns IS NULL THEN PERFORM docfs_fail('DF014', format('name %s is not in the trash', name_id)); END IF;
            parent := docfs_target(p_op, 'parent', p_me);
            wanted := docfs_valid_name(p_op->>'name');
            SELECT * INTO folder FROM docfs_items WHERE id = parent FOR UPDATE;
            IF NOT FOUND OR folder.deleted THEN
                PERFORM docfs_fail('DF011', format('folder %s is not on the server', parent), parent::text);
            END IF;
            IF folder.kind <> 'directory' OR folder.link_of IS NOT NULL THEN
                PERFORM docfs_fail('DF014', format('item %s is not a directory', parent));
            END IF;
            IF folder.trashed_ns IS NOT NULL THEN PERFORM docfs_fail('DF014', format('folder %s is in the trash', parent)); END IF;
            UPDATE docfs_items SET parent_id = parent, name = docfs_free_name(wanted, false, parent, name_id), trashed_ns = NULL,
                   metadata_version = metadata_version + 1, changed_ns = docfs_now()
            WHERE id = name_id RETURNING content_version, metadata_version INTO cv, mv;
            RETURN ARRAY[name_id, cv, mv];
        END
        $fn$
        """

    /// `docfs_apply_one` of version 11 (`RemoteSchema+Operations`), with the name operations;
    /// from version 13 (`trashingNames`) `trash` and `untrash` take a name row too.
    static func applyOne(trashingNames: Bool) -> String {
        let nameKinds = trashingNames ? "('unlink', 'move_name', 'trash', 'untrash')" : "('unlink', 'move_name')"
        let trashing =
            !trashingNames
            ? ""
            : """
            IF kind IN ('trash', 'untrash') AND target_of IS NOT NULL THEN
                done := docfs_op_name_trash(p_op, op_id, p_me, kind = 'untrash');
            END IF;
            """
        return """
            CREATE OR REPLACE FUNCTION docfs_apply_one(p_op jsonb, p_me text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
            DECLARE
                op_id uuid := (p_op->>'op')::uuid;
                kind text := p_op->>'kind';
                prior docfs_operations;
                done bigint[];
                pos bigint;
                target_id bigint;
                target_of bigint;
                it docfs_items;
            BEGIN
                IF op_id IS NULL OR kind IS NULL OR kind NOT IN ('create', 'content', 'move', 'delete', 'trash', 'untrash', 'attributes',
                                                                'link', 'unlink', 'move_name') THEN
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
                -- A name row is changed by the name operations only, an item's own row by the others.
                IF kind NOT IN ('create', 'link') THEN
                    target_id := docfs_target(p_op, 'item', p_me);
                    SELECT link_of INTO target_of FROM docfs_items WHERE id = target_id;
                    IF FOUND AND ((target_of IS NOT NULL AND kind NOT IN \(nameKinds)) OR (target_of IS NULL AND kind IN ('unlink', 'move_name'))) THEN
                        PERFORM docfs_fail('DF014', CASE WHEN target_of IS NULL
                            THEN format('item %s is an item, not one of its further names (a %s takes a name)', target_id, kind)
                            ELSE format('item %s is a further name of item %s (a %s takes an item)', target_id, target_of, kind) END);
                    END IF;
                END IF;
                IF kind = 'delete' THEN
                    SELECT * INTO it FROM docfs_items WHERE id = target_id AND NOT deleted FOR UPDATE;
                    IF FOUND AND it.kind <> 'directory' AND (p_op->>'expected_version' IS NULL OR it.content_version = (p_op->>'expected_version')::bigint)
                       AND docfs_pass_name(target_id, op_id, p_me) THEN
                        SELECT ARRAY[id, content_version, metadata_version] INTO done FROM docfs_items WHERE id = target_id;
                    END IF;
                END IF;
                \(trashing)
                IF done IS NULL THEN
                    done := CASE kind
                        WHEN 'create' THEN docfs_op_create(p_op, op_id, p_me)
                        WHEN 'content' THEN docfs_op_content(p_op, op_id, p_me)
                        WHEN 'move' THEN docfs_op_move(p_op, op_id, p_me, false)
                        WHEN 'move_name' THEN docfs_op_move(p_op, op_id, p_me, false)
                        WHEN 'untrash' THEN docfs_op_move(p_op, op_id, p_me, true)
                        WHEN 'link' THEN docfs_op_link(p_op, op_id, p_me)
                        WHEN 'unlink' THEN docfs_op_small(p_op, 'delete', p_me)
                        ELSE docfs_op_small(p_op, kind, p_me) END;
                END IF;
                INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns, role)
                VALUES (done[1], kind, op_id, done[2], done[3], docfs_now(), p_me) RETURNING position INTO pos;
                INSERT INTO docfs_operations (operation_id, kind, item_id, content_version, metadata_version, position, applied_ns, role)
                VALUES (op_id, kind, done[1], done[2], done[3], pos, docfs_now(), p_me);
                RETURN jsonb_build_object('ok', true, 'item', done[1], 'cv', done[2], 'mv', done[3], 'position', pos, 'replayed', false,
                                          'name', (SELECT name FROM docfs_items WHERE id = done[1]));
            END
            $fn$
            """
    }
}
