/// Version 14 of the server's schema: one replica's credentials can neither mislead the server's
/// functions nor hold the other replicas up.
///
/// - Every function of the schema runs with `search_path = pg_catalog, public, pg_temp`: left
///   out, `pg_temp` is searched *first* for tables, and a replica's TEMP table named like one of
///   the server's would stand in for it inside the checks. The database's TEMP and CONNECT are
///   taken from PUBLIC; CONNECT is the replicas group's (and the owner's).
/// - The writers' lock is a row of `docfs_locks`, a table only the owner may read or lock
///   (`SELECT … FOR UPDATE` needs UPDATE on it): `docfs_apply`, `docfs_set_layout` and gc's trims
///   take it; gc's run holds another row of it; migrations lock `docfs_schema_migrations`. No
///   advisory key decides anything a replica could take itself. Change-log positions commit in
///   increasing order (one writer appends at a time).
/// - Each replica role gets a connection limit and `statement_timeout`, `lock_timeout`,
///   `idle_in_transaction_session_timeout` in this database (unless the owner set its own): a
///   session that holds the writers' lock (a call inside a transaction left open) or another lock
///   is ended, and the others' writes go on.
/// - The owner is made a member of `pg_signal_backend` where it may grant it (PostgreSQL 15 and
///   older with CREATEROLE): `remove-replica` ends a removed replica's sessions with it.
extension RemoteSchema {
    package static let guardsVersion = 14

    /// The writers' lock before version 14 (an advisory key: any role could take it).
    static let advisoryWritersLock = "PERFORM pg_advisory_xact_lock(\(RemoteDatabase.writeLock));"
    /// The writers' lock since version 14: a row replicas have no privilege on.
    static let writersLock = "PERFORM 1 FROM docfs_locks WHERE name = 'writers' FOR UPDATE;"
    /// The same, as a statement of a client's transaction (gc, the owner's).
    static let writersLockQuery = "SELECT 1 FROM docfs_locks WHERE name = 'writers' FOR UPDATE"
    /// gc's lock since version 14, asked on a connection of its own and held by its transaction.
    static let garbageLockQuery = "SELECT count(*) FROM (SELECT 1 FROM docfs_locks WHERE name = 'gc' FOR UPDATE SKIP LOCKED) AS taken"

    /// What a replica role gets unless its owner set otherwise (docs/REMOTE.md says how).
    package static let replicaConnectionLimit = 16
    package static let replicaSettings: [(name: String, value: String)] = [
        ("statement_timeout", "60s"), ("lock_timeout", "30s"), ("idle_in_transaction_session_timeout", "10s"),
    ]

    static let guardStatements: [String] = [
        "CREATE TABLE IF NOT EXISTS docfs_locks (name text PRIMARY KEY)",
        "INSERT INTO docfs_locks (name) VALUES ('writers'), ('gc') ON CONFLICT (name) DO NOTHING",
        "REVOKE ALL ON docfs_locks FROM PUBLIC",
        applyFunction(lock: writersLock),
        setLayoutFunction(lock: writersLock),
        // Every function, the trigger functions and the helpers the definer functions call among
        // them: none may find a table in pg_temp first.
        """
        DO $do$
        DECLARE
            f record;
        BEGIN
            FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = 'public' AND p.proname LIKE 'docfs\\_%' AND p.prokind = 'f' LOOP
                EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, public, pg_temp', f.sig);
                EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
            END LOOP;
        END
        $do$
        """,
        databaseGrants,
        replicaLimits(
            rolesSQL: """
                SELECT r.rolname::text FROM pg_auth_members am JOIN pg_roles r ON r.oid = am.member JOIN pg_roles g ON g.oid = am.roleid
                WHERE g.rolname = (SELECT value FROM docfs_meta WHERE key = 'replicas_group') AND NOT r.rolsuper
                """),
        signalGrant,
        largeObjectGrants,
    ]

    /// No TEMP for anyone, CONNECT for the replicas group only (the owner keeps its own). A role
    /// that does not own the database cannot: add-replica then says what to run.
    static let databaseGrants = """
        DO $do$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
        BEGIN
            EXECUTE format('REVOKE TEMPORARY, CONNECT ON DATABASE %I FROM PUBLIC', current_database());
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) THEN
                EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), g);
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'docfs: % may not change the privileges of database %', current_user, current_database();
        END
        $do$
        """

    /// Whether PUBLIC still has TEMP or CONNECT on this database (one boolean row).
    static let publicMayConnectQuery = """
        SELECT EXISTS (SELECT 1 FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                        WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type IN ('TEMPORARY', 'CONNECT'))
        """

    /// The limits of the replica roles `rolesSQL` selects, each one only where the owner has set
    /// none (so an owner's own value survives set-up and add-replica). Needs CREATEROLE.
    static func replicaLimits(rolesSQL: String) -> String {
        let settings = replicaSettings.map { "(\(quoteLiteral($0.name)), \(quoteLiteral($0.value)))" }.joined(separator: ", ")
        return """
            DO $do$
            DECLARE
                r text;
                s record;
                rid oid;
                dbid oid := (SELECT oid FROM pg_database WHERE datname = current_database());
            BEGIN
                IF NOT (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user) THEN RETURN; END IF;
                FOR r IN \(rolesSQL) LOOP
                    SELECT oid INTO rid FROM pg_roles WHERE rolname = r;
                    IF (SELECT rolconnlimit FROM pg_roles WHERE oid = rid) < 0 THEN
                        EXECUTE format('ALTER ROLE %I CONNECTION LIMIT \(replicaConnectionLimit)', r);
                    END IF;
                    FOR s IN SELECT * FROM (VALUES \(settings)) AS v(name, value) LOOP
                        IF NOT EXISTS (SELECT 1 FROM pg_db_role_setting d, unnest(d.setconfig) c
                                        WHERE d.setrole = rid AND d.setdatabase IN (0, dbid) AND split_part(c, '=', 1) = s.name) THEN
                            EXECUTE format('ALTER ROLE %I IN DATABASE %I SET %s = %L', r, current_database(), s.name, s.value);
                        END IF;
                    END LOOP;
                END LOOP;
            END
            $do$
            """
    }

    /// No large objects for PUBLIC: `lo_create` and its kin are PUBLIC's in every database, and
    /// what they store (pg_largeobject) is outside every quota. The functions are the bootstrap
    /// superuser's: only a superuser may take them back (a REVOKE by anyone else changes nothing,
    /// with a warning), so set-up does it when run as one; add-replica says what to run otherwise.
    static let largeObjectGrants = """
        DO $do$
        BEGIN
            IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
                EXECUTE '\(largeObjectRevoke)';
            END IF;
        END
        $do$
        """

    /// What a superuser runs in the tree's database (add-replica prints it while PUBLIC has them).
    package static let largeObjectRevoke = "REVOKE EXECUTE ON FUNCTION lo_create(oid), lo_creat(integer), lo_from_bytea(oid, bytea) FROM PUBLIC"

    /// Whether PUBLIC may still create large objects in this database (one boolean row).
    static let publicMayCreateLargeObjectsQuery = """
        SELECT has_function_privilege('public', 'pg_catalog.lo_create(oid)', 'EXECUTE')
            OR has_function_privilege('public', 'pg_catalog.lo_creat(integer)', 'EXECUTE')
            OR has_function_privilege('public', 'pg_catalog.lo_from_bytea(oid, bytea)', 'EXECUTE')
        """

    /// The owner a member of `pg_signal_backend`, where it may make itself one.
    static let signalGrant = """
        DO $do$
        BEGIN
            IF NOT pg_has_role(current_user, 'pg_signal_backend', 'USAGE') THEN
                EXECUTE format('GRANT pg_signal_backend TO %I', current_user);
            END IF;
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            RAISE WARNING 'docfs: % may not end other roles'' sessions: GRANT pg_signal_backend TO % (as a superuser)',
                current_user, current_user;
        END
        $do$
        """
}
