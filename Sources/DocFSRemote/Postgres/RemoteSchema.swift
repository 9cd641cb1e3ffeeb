/// The server's tables, as versioned migrations. `RemoteDatabase.migrate()` applies the missing
/// ones in one transaction under an advisory lock (two replicas migrating at once wait for each
/// other), records each in `docfs_schema_migrations`, and refuses a server whose schema is newer
/// than `RemoteSchema.latest`. Applying them again does nothing.
///
/// Tables (version 1):
/// - `docfs_items`: one row per item, ever. `id` is the permanent identifier
///   (`bigint GENERATED ALWAYS AS IDENTITY`, never reused); the root is the one row without a
///   parent. Deleted items stay as tombstones (`deleted`) so the change log can name them.
///   Identifiers start at 3 after the root's 1 (2 is a replica's trash).
///   `content_version` counts contents (compare-and-swap target); `metadata_version` counts
///   every change. Times are nanoseconds since 1970.
/// - `docfs_versions`: every content version's object key and size (history, conflicts, GC later).
/// - `docfs_layout`: the layout (folder rules, types) as JSON, one row.
/// - `docfs_changes`: the append-only change log; `position` (bigserial) is the sync anchor.
/// - `docfs_operations`: the client-supplied id of every applied operation and what it did, so a
///   retried request is answered from here and never applied twice.
///
/// Version 2 (several replicas, garbage collection):
/// - `docfs_meta`: key/value facts about the server. `log_start` is the first change log position
///   still kept (`docfs remote gc` trims older entries); a replica whose anchor is older rebuilds
///   from a full listing.
/// - `docfs_versions.collected_ns`: when `docfs remote gc` removed the version's object (NULL:
///   still in the bucket).
/// - `docfs_changes_at`: the log by time, for trimming.
///
/// Version 3 (the server keeps the layout's rules itself):
/// - `docfs_items.types`: the item's content type and what it conforms to, nearest first, as the
///   replica that named it typed it (NULL: not given).
/// - `docfs_admission()`, a trigger on every insert, move, rename and restore of a live item:
///   refuses (SQLSTATE 23514, check_violation) an item put into a folder whose layout entry
///   (`docfs_layout`) does not allow adding, or that takes only `allowedContentTypes` the item's
///   `types` do not include (a plain subfolder passes unless `subfolders: false`; inside a
///   package nothing is checked; MIME-type words, which only a replica can resolve, pass). So a
///   replica with an old layout cannot put in what the others refuse.
///
/// Version 4 (`RemoteSchema+Capabilities.swift`: the server keeps the items' capabilities):
/// - `docfs_items.caps`, `contents_caps`: capability words (NULL: all), set by the server when an
///   item is made — a layout folder's own `capabilities` and `contents`, any other item its
///   folder's contents words — and kept when it moves, as a replica's store keeps them.
/// - `docfs_item_rules()`, a trigger on every change of a live item: writing needs `write` (and
///   a type the layout does not make view-only), renaming `rename`, moving `reparent`, trashing
///   `trash`, deleting `delete`; refused with check_violation as above. A replica undoes a
///   refused rename, move, trash or delete (the item follows the server) and puts a refused
///   edit in a conflicted copy.
/// - `docfs_admission()` again: allowed types given as MIME types are checked as the content
///   types a replica resolved them to (`docfs_meta.layout_mime`, set by each replica at start).
///
/// Version 5 (garbage collection that cannot race an upload):
/// - `docfs_upload_intents`: the object keys a replica is about to write, recorded (in the
///   server's time) before the upload starts and again right before the versions naming them are
///   committed, removed after. `docfs remote gc` never removes an object a live intent names;
///   intents older than the intent lifetime (a replica that never came back) are dropped.
///
/// Version 6 (`RemoteSchema+Replicas.swift`: a server that trusts no replica with its rules):
/// the rules trigger on every column, no client-set flag, the layout's MIME words written through
/// a function, the tree's identity (`docfs_meta.tree_id`), and a replica role's grants.
///
/// Version 7 (verified downloads): `docfs_versions.sha256`, the SHA-256 of the object as the
/// replica that uploaded it read it; a replica checks every download against it (`expectedSHA256`).
///
/// Version 8 (`RemoteSchema+Blocks.swift`): contents as blocks in packs.
///
/// Version 9 (`RemoteSchema+Damage.swift`): a block found damaged is marked, no longer "had" for
/// dedup, and healed by the next upload of its bytes.
///
/// Version 10 (`RemoteSchema+Manifests.swift`): a version can only name a manifest that exists.
///
/// Version 11 (`RemoteSchema+Operations.swift`, `RemoteSchema+Doors.swift`): the server is the
/// only door. Replicas write nothing but through the server's functions, which check every field;
/// one login role per replica, in the tree's replicas group, recorded on what it sends.
///
/// Version 12 (`RemoteSchema+Links.swift`): hard links, a file's further names as name rows
/// (`docfs_items.link_of`) with operations of their own.
///
/// Version 13 (`RemoteSchema+Links.swift`): one name of several in the trash (`trash`/`untrash`
/// of a name row).
///
/// Version 14 (`RemoteSchema+Guards.swift`): `search_path` with `pg_temp` last for every function,
/// no TEMP or CONNECT for PUBLIC, the writers' lock a row replicas cannot lock, replica roles
/// with a connection limit and timeouts.
///
/// Version 15 (`RemoteSchema+Bounds.swift`): every argument bounded and checked (the layout's MIME
/// words the owner's alone, calls and manifests capped), and per-role quotas.
///
/// Version 16 (`RemoteSchema+Places.swift`): blocks keep their places. A mark is a report; a
/// block has one or more places, dropped only when confirmed damaged and never the last; a
/// place whose length is not its block's is refused.
///
/// Version 17 (`RemoteSchema+Positions.swift`): no global writers' lock. Change-log positions are
/// given as each transaction commits, in commit order; writers of unrelated items run at once.
///
/// Version 18 (`RemoteSchema+PackVersions.swift`): a pack is recorded with the version of its
/// object its upload made (a bucket that keeps versions), and read as that version: a PUT over
/// the key later changes nothing anyone reads.
///
/// Version 19 (`RemoteSchema+Overstayers.swift`): a replica session idle in a transaction, or in
/// one statement, past its role's own limits (which it may have lifted with `SET`) is ended.
///
/// Version 20 (`RemoteSchema+BlockLengths.swift`): a block is its hash and its length, end to end
/// (manifests name both); no replica's record of a block can refuse another replica's upload.
///
/// Version 21 (`RemoteSchema+PlaceLookups.swift`): recording places and manifests looks at the
/// places of the call's own blocks only, each pack asked once (a call no longer grows with the tree).
package enum RemoteSchema {
    package static let latest = 21

    static let nowNs = "(extract(epoch from clock_timestamp()) * 1000000000)::bigint"

    static let migrations: [(version: Int, statements: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE docfs_items (
                    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    parent_id        bigint REFERENCES docfs_items(id),
                    name             text NOT NULL,
                    kind             text NOT NULL CHECK (kind IN ('file', 'directory', 'symlink')),
                    size             bigint NOT NULL DEFAULT 0,
                    created_ns       bigint NOT NULL,
                    modified_ns      bigint NOT NULL,
                    changed_ns       bigint NOT NULL,
                    accessed_ns      bigint NOT NULL,
                    uid              bigint NOT NULL,
                    gid              bigint NOT NULL,
                    mode             integer NOT NULL,
                    tags             text[] NOT NULL DEFAULT '{}',
                    favorite_rank    bigint,
                    symlink_target   text,
                    content_key      text,
                    content_version  bigint NOT NULL DEFAULT 1,
                    metadata_version bigint NOT NULL DEFAULT 1,
                    trashed_ns       bigint,
                    deleted          boolean NOT NULL DEFAULT false,
                    CHECK ((parent_id IS NULL) = (name = ''))
                )
                """,
                // One live name per folder (trashed and deleted items do not hold their names).
                "CREATE UNIQUE INDEX docfs_items_live_name ON docfs_items (parent_id, name) WHERE NOT deleted AND trashed_ns IS NULL",
                "CREATE UNIQUE INDEX docfs_items_one_root ON docfs_items ((parent_id IS NULL)) WHERE parent_id IS NULL",
                "CREATE INDEX docfs_items_parent ON docfs_items (parent_id)",
                """
                INSERT INTO docfs_items (parent_id, name, kind, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode)
                VALUES (NULL, '', 'directory', \(nowNs), \(nowNs), \(nowNs), \(nowNs), 0, 0, 493)
                """,
                // Identifier 2 is never given: a replica's store keeps its trash folder there, and the
                // server's identifiers are the replica's rows.
                "ALTER TABLE docfs_items ALTER COLUMN id RESTART WITH 3",
                """
                CREATE TABLE docfs_versions (
                    item_id         bigint NOT NULL REFERENCES docfs_items(id),
                    content_version bigint NOT NULL,
                    content_key     text,
                    size            bigint NOT NULL,
                    created_ns      bigint NOT NULL,
                    PRIMARY KEY (item_id, content_version)
                )
                """,
                """
                CREATE TABLE docfs_layout (
                    id         integer PRIMARY KEY CHECK (id = 1),
                    layout     jsonb NOT NULL,
                    updated_ns bigint NOT NULL
                )
                """,
                """
                CREATE TABLE docfs_changes (
                    position         bigserial PRIMARY KEY,
                    item_id          bigint NOT NULL REFERENCES docfs_items(id),
                    kind             text NOT NULL,
                    operation_id     uuid NOT NULL,
                    content_version  bigint NOT NULL,
                    metadata_version bigint NOT NULL,
                    at_ns            bigint NOT NULL
                )
                """,
                """
                CREATE TABLE docfs_operations (
                    operation_id     uuid PRIMARY KEY,
                    kind             text NOT NULL,
                    item_id          bigint NOT NULL,
                    content_version  bigint NOT NULL,
                    metadata_version bigint NOT NULL,
                    position         bigint NOT NULL,
                    applied_ns       bigint NOT NULL
                )
                """,
            ]
        ),
        (
            2,
            [
                """
                CREATE TABLE docfs_meta (
                    key   text PRIMARY KEY,
                    value text NOT NULL
                )
                """,
                "INSERT INTO docfs_meta (key, value) VALUES ('log_start', '1')",
                "ALTER TABLE docfs_versions ADD COLUMN collected_ns bigint",
                "CREATE INDEX docfs_changes_at ON docfs_changes (at_ns)",
                "CREATE INDEX docfs_versions_key ON docfs_versions (content_key)",
            ]
        ),
        (
            3,
            [
                "ALTER TABLE docfs_items ADD COLUMN types text[]",
                admissionFunction,
                """
                CREATE TRIGGER docfs_items_admission BEFORE INSERT OR UPDATE OF parent_id, name, trashed_ns, types ON docfs_items
                FOR EACH ROW WHEN (NEW.parent_id IS NOT NULL AND NOT NEW.deleted AND NEW.trashed_ns IS NULL)
                EXECUTE FUNCTION docfs_admission()
                """,
            ]
        ),
        (4, capabilityStatements),
        (
            5,
            [
                """
                CREATE TABLE docfs_upload_intents (
                    key        text PRIMARY KEY,
                    created_ns bigint NOT NULL
                )
                """
            ]
        ),
        (6, replicaRuleStatements),
        (
            7,
            [
                // The SHA-256 of each version's object as its replica sent it: downloads are checked.
                "ALTER TABLE docfs_versions ADD COLUMN IF NOT EXISTS sha256 text"
            ]
        ),
        (8, blockStatements),
        (9, damageStatements),
        (10, manifestStatements),
        (11, doorTables + operationStatements + doorFunctions),
        (12, linkStatements),
        (13, trashedNameStatements),
        (14, guardStatements),
        (15, boundStatements),
        (16, placeStatements),
        (17, positionStatements),
        (18, packVersionStatements),
        (19, overstayerStatements),
        (20, blockLengthStatements),
        (21, placeLookupStatements),
    ]

    /// The layout's rules for a new place of an item, in the server (see version 3 above): the
    /// same rules the replicas apply (`LocalStore+Attributes`), from the server's own layout.
    static let admissionFunction = admission(resolvingMIME: false)

    /// Version 4's: MIME words resolved through `docfs_meta.layout_mime` (set by the replicas).
    static let admissionFunctionResolvingMIME = admission(resolvingMIME: true)

    static func admission(resolvingMIME: Bool) -> String {
        let resolve =
            !resolvingMIME
            ? ""
            : """
            SELECT m.value::jsonb INTO mime FROM docfs_meta m WHERE m.key = 'layout_mime';
            allowed := ARRAY(SELECT CASE WHEN a LIKE '%/%' THEN coalesce(mime->>a, a) ELSE a END FROM unnest(allowed) a);
            """
        return """
            CREATE OR REPLACE FUNCTION docfs_admission() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, public, pg_temp AS $fn$
            DECLARE
                layout jsonb;
                names text[] := '{}';
                cursor_id bigint := NEW.parent_id;
                above record;
                in_package boolean := false;
                folder_path text;
                own jsonb;
                rule jsonb;
                allowed text[];
                depth integer := 0;
                mime jsonb;
            BEGIN
                SELECT l.layout INTO layout FROM docfs_layout l WHERE l.id = 1;
                IF layout IS NULL OR jsonb_typeof(layout->'folders') IS DISTINCT FROM 'array' THEN RETURN NEW; END IF;
                LOOP
                    SELECT i.parent_id, i.name, i.types INTO above FROM docfs_items i WHERE i.id = cursor_id;
                    EXIT WHEN NOT FOUND OR above.parent_id IS NULL OR depth > 4096;
                    IF above.types IS NOT NULL AND cardinality(above.types) > 0 AND above.types[1] <> 'public.folder' THEN
                        in_package := true;
                    END IF;
                    names := above.name || names;
                    cursor_id := above.parent_id;
                    depth := depth + 1;
                END LOOP;
                folder_path := array_to_string(names, '/');
                SELECT f INTO own FROM jsonb_array_elements(layout->'folders') f WHERE f->>'path' = folder_path LIMIT 1;
                IF own IS NOT NULL AND jsonb_typeof(own->'capabilities') = 'array' AND NOT (own->'capabilities') ? 'add' THEN
                    RAISE EXCEPTION 'the server''s layout does not allow adding items to /%', folder_path
                        USING ERRCODE = 'check_violation';
                END IF;
                IF in_package OR NEW.types IS NULL OR cardinality(NEW.types) = 0 THEN RETURN NEW; END IF;
                FOR n IN REVERSE coalesce(cardinality(names), 0) .. 1 LOOP
                    SELECT f INTO rule FROM jsonb_array_elements(layout->'folders') f
                     WHERE f->>'path' = array_to_string(names[1:n], '/') AND jsonb_typeof(f->'allowedContentTypes') = 'array' LIMIT 1;
                    EXIT WHEN rule IS NOT NULL;
                END LOOP;
                IF rule IS NULL THEN RETURN NEW; END IF;
                allowed := ARRAY(SELECT jsonb_array_elements_text(rule->'allowedContentTypes'));
                \(resolve)
                -- A MIME word no replica has resolved: left to the replicas.
                IF EXISTS (SELECT 1 FROM unnest(allowed) a WHERE a LIKE '%/%') THEN RETURN NEW; END IF;
                IF NEW.kind = 'directory' AND NEW.types[1] = 'public.folder' AND coalesce((rule->>'subfolders')::boolean, true) THEN
                    RETURN NEW;
                END IF;
                IF NOT (NEW.types && allowed) THEN
                    RAISE EXCEPTION 'the server''s layout: /% takes only % (not %)', rule->>'path',
                        array_to_string(allowed, ', '), NEW.types[1] USING ERRCODE = 'check_violation';
                END IF;
                RETURN NEW;
            END
            $fn$
            """
    }

}
