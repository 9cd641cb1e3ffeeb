/// Version 17 of the server's schema: no global writers' lock. Writers of unrelated items commit
/// concurrently; a follower reading `position > anchor` still never skips a change.
///
/// Why a follower never skips: a change's position is not taken while its transaction runs but
/// as it commits. Inside a transaction a change row gets a *draft* position (negative, from
/// `docfs_change_drafts`: `docfs_change_position()`, the column's default), which no other
/// transaction can see. A deferred constraint trigger (`docfs_place_changes`, fired at COMMIT,
/// as the owner) takes the `positions` row of `docfs_locks`, gives the transaction's drafts their
/// positions from the log's sequence in the order they were made, and notifies; the row lock is
/// held until the commit is over, and PostgreSQL makes a commit visible before it releases the
/// transaction's locks. So positions are handed out in commit order: a transaction that gets
/// position N commits, visibly, before any other can take a position above N, and a snapshot
/// that sees position N sees every position below it. No still-running writer holds a position
/// a follower could pass (the trap of reading "below the oldest running transaction" and moving
/// the anchor by position does not arise: positions are never held by running transactions).
/// The same holds on a hot standby, which replays commits in the order they were logged.
///
/// What serializes now: only the commit's short placing step (the rows' positions and the
/// notification, which PostgreSQL serializes at commit anyway); writers of one item (the
/// item's row, `FOR UPDATE`: the second sees the first's result); items put into one
/// folder (its row: names and "a folder being deleted is empty" are checked under it); a role's
/// own calls (its `docfs_replicas` row: a retried chunk waits for the attempt still running
/// instead of racing it); and folders moved to another folder (the `moves` row, held to commit:
/// two such moves could otherwise each pass the "not into itself" check and make a cycle).
///
/// The writers' lock stays, shared: writers take `docfs_locks` in ROW EXCLUSIVE mode (and the
/// `writers` row `FOR KEY SHARE`, which an older docfs's gc takes `FOR UPDATE`); gc's trims take
/// the table in SHARE mode, which waits for the writers running and queues those coming (table
/// locks are granted in order, so a stream of writers cannot starve gc, as it could a row lock).
/// Replicas still have no privilege on `docfs_locks`. A change written by hand with the triggers
/// off (`session_replication_role = replica`, a superuser's) gets its position at once.
extension RemoteSchema {
    package static let positionsVersion = 17

    /// The writers' lock since version 17: shared among writers, exclusive against gc's trims.
    /// The call's changes are placed at its commit even where its session asked for its
    /// constraints at once (`SET CONSTRAINTS ALL IMMEDIATE` would hold the placing step from the
    /// first change on).
    static let sharedWritersLock = """
        LOCK TABLE docfs_locks IN ROW EXCLUSIVE MODE;
                    PERFORM 1 FROM docfs_locks WHERE name = 'writers' FOR KEY SHARE;
                    SET CONSTRAINTS docfs_changes_placed DEFERRED;
        """
    /// gc's trims since version 17 (a client's statement): no writer runs while they do.
    static let trimsLockQuery = "LOCK TABLE docfs_locks IN SHARE MODE"
    /// Taken by a folder's move to another folder, until commit.
    static let directoryMoveLock = "PERFORM 1 FROM docfs_locks WHERE name = 'moves' FOR UPDATE;"

    static let positionStatements: [String] = [
        "INSERT INTO docfs_locks (name) VALUES ('writers'), ('gc'), ('positions'), ('moves') ON CONFLICT (name) DO NOTHING",
        "CREATE SEQUENCE IF NOT EXISTS docfs_change_drafts",
        "REVOKE ALL ON SEQUENCE docfs_change_drafts FROM PUBLIC",
        // A draft inside a transaction whose commit will place it; a position at once where the
        // triggers are off (then nothing would place it).
        """
        CREATE OR REPLACE FUNCTION docfs_change_position() RETURNS bigint LANGUAGE plpgsql VOLATILE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        BEGIN
            IF current_setting('session_replication_role') = 'replica' THEN
                RETURN nextval('docfs_changes_position_seq');
            END IF;
            RETURN -nextval('docfs_change_drafts');
        END
        $fn$
        """,
        "ALTER TABLE docfs_changes ALTER COLUMN position SET DEFAULT docfs_change_position()",
        // One value at a time: a session's cached values would come out of commit order.
        "ALTER SEQUENCE docfs_changes_position_seq CACHE 1",
        // At commit: this transaction's drafts (no other transaction's are visible here) get
        // their positions in the order they were made, under the `positions` row, held to the
        // end of the commit. The first firing places them all; the others find their draft gone.
        """
        CREATE OR REPLACE FUNCTION docfs_place_changes() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            d record;
            placed bigint;
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM docfs_changes WHERE position = NEW.position) THEN RETURN NULL; END IF;
            PERFORM 1 FROM docfs_locks WHERE name = 'positions' FOR UPDATE;
            FOR d IN SELECT position, operation_id FROM docfs_changes WHERE position < 0 ORDER BY position DESC LOOP
                placed := nextval('docfs_changes_position_seq');
                UPDATE docfs_changes SET position = placed WHERE position = d.position;
                UPDATE docfs_operations SET position = placed WHERE operation_id = d.operation_id AND position = d.position;
            END LOOP;
            IF placed IS NOT NULL THEN PERFORM pg_notify('\(RemoteDatabase.notificationChannel)', placed::text); END IF;
            RETURN NULL;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_changes_placed ON docfs_changes",
        """
        CREATE CONSTRAINT TRIGGER docfs_changes_placed AFTER INSERT ON docfs_changes
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.position < 0) EXECUTE FUNCTION docfs_place_changes()
        """,
        moveFunction(directoryMoveLock: directoryMoveLock),
        // CREATE OR REPLACE drops a function's settings: schema 14's search path, again.
        "ALTER FUNCTION docfs_op_move(jsonb, uuid, text, boolean) SET search_path = pg_catalog, public, pg_temp",
        applyFunction(lock: sharedWritersLock, name: "docfs_apply_unbounded", placedAtCommit: true),
        setLayoutFunction(lock: sharedWritersLock, placedAtCommit: true),
        """
        REVOKE ALL ON FUNCTION docfs_change_position(), docfs_place_changes(), docfs_apply_unbounded(jsonb),
            docfs_op_move(jsonb, uuid, text, boolean), docfs_set_layout(uuid, text) FROM PUBLIC
        """,
    ]
}
