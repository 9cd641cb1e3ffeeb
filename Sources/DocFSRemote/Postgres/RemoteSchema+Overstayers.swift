/// Version 19 of the server's schema: a replica that lifts its own timeouts holds no one up.
///
/// Set-up gives each replica role `statement_timeout`, `lock_timeout` and
/// `idle_in_transaction_session_timeout` (version 14), but they are the session's defaults, and
/// any session may `SET` them again: a replica that sets `idle_in_transaction_session_timeout = 0`
/// could leave a call's transaction open and keep the rows it locked (a folder's row, the
/// `positions` row after `SET CONSTRAINTS ALL IMMEDIATE`, a block's key) for as long as it liked.
/// PostgreSQL cannot forbid the `SET`, so the server ends such a session itself:
/// `docfs_end_overstayers()` ends every session of a replica role in this database that has been
/// idle in a transaction, or running one statement, longer than its role's own limit (plus a
/// grace of two seconds): exactly the sessions PostgreSQL would have ended had the session kept
/// the limits the owner gave it. Any replica may call it (it ends only sessions that broke their
/// limits); the replicas call it when a call of theirs was held up (`RemoteDatabase+Overstayers`).
///
/// The function reads another role's session state from `pg_stat_activity`, which needs
/// `pg_read_all_stats` (a CREATEROLE owner on PostgreSQL 15 and older may make itself a member,
/// as for `pg_signal_backend`; otherwise a superuser grants it once). Without it the function
/// sees no state and ends nothing, and add-replica says what to run.
extension RemoteSchema {
    package static let overstayersVersion = 19

    /// Seconds past a role's own limit before its session is ended.
    static let overstayGraceMs = 2000

    /// The owner a member of `pg_read_all_stats`, where it may make itself one.
    static let statsGrant = """
        DO $do$
        BEGIN
            IF NOT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') THEN
                EXECUTE format('GRANT pg_read_all_stats TO %I', current_user);
            END IF;
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            RAISE WARNING 'docfs: % may not read other roles'' session states: GRANT pg_read_all_stats TO % (as a superuser)',
                current_user, current_user;
        END
        $do$
        """

    static let overstayerStatements: [String] = [
        // A role's limit in milliseconds (0: none), as set for it in this database or in all; a
        // value without a unit is in milliseconds, as PostgreSQL reads these settings.
        """
        CREATE OR REPLACE FUNCTION docfs_role_limit_ms(p_role oid, p_name text) RETURNS bigint LANGUAGE plpgsql STABLE
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            v text;
        BEGIN
            SELECT substr(c, length(p_name) + 2) INTO v
              FROM pg_db_role_setting d, unnest(d.setconfig) c
             WHERE d.setrole = p_role AND d.setdatabase IN (0, (SELECT oid FROM pg_database WHERE datname = current_database()))
               AND split_part(c, '=', 1) = p_name
             ORDER BY d.setdatabase DESC LIMIT 1;
            IF v IS NULL THEN RETURN 0; END IF;
            IF v ~ '^[0-9]+$' THEN RETURN v::bigint; END IF;
            RETURN (extract(epoch FROM v::interval) * 1000)::bigint;
        EXCEPTION WHEN OTHERS THEN
            RETURN 0;
        END
        $fn$
        """,
        """
        CREATE OR REPLACE FUNCTION docfs_end_overstayers() RETURNS integer LANGUAGE plpgsql SECURITY DEFINER
        SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
            s record;
            since timestamptz;
            limit_ms bigint;
            ended integer := 0;
        BEGIN
            IF g IS NULL OR NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g) THEN RETURN 0; END IF;
            FOR s IN SELECT a.pid, a.usesysid, a.usename, a.state, a.state_change, a.query_start
                       FROM pg_stat_activity a JOIN pg_roles r ON r.oid = a.usesysid
                      WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND NOT r.rolsuper
                        AND a.state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')
                        AND pg_has_role(a.usesysid, g, 'MEMBER') LOOP
                IF s.state = 'active' THEN
                    limit_ms := docfs_role_limit_ms(s.usesysid, 'statement_timeout');
                    since := s.query_start;
                ELSE
                    limit_ms := docfs_role_limit_ms(s.usesysid, 'idle_in_transaction_session_timeout');
                    since := s.state_change;
                END IF;
                IF limit_ms > 0 AND since IS NOT NULL
                   AND clock_timestamp() - since > (limit_ms + \(overstayGraceMs)) * interval '1 millisecond' THEN
                    BEGIN
                        IF pg_terminate_backend(s.pid) THEN
                            ended := ended + 1;
                            RAISE LOG 'docfs: ended session % of replica %: % since %, past its role''s limit of % ms',
                                s.pid, s.usename, s.state, since, limit_ms;
                        END IF;
                    EXCEPTION WHEN insufficient_privilege THEN
                        RAISE WARNING 'docfs: % may not end session % of replica % (GRANT pg_signal_backend TO %)',
                            current_user, s.pid, s.usename, current_user;
                    END;
                END IF;
            END LOOP;
            RETURN ended;
        END
        $fn$
        """,
        "REVOKE ALL ON FUNCTION docfs_role_limit_ms(oid, text), docfs_end_overstayers() FROM PUBLIC",
        overstayersGrant,
        statsGrant,
    ]

    /// The replicas group may call it (applied again by add-replica, which may make the group).
    static let overstayersGrant = """
        DO $do$
        DECLARE
            g text := (SELECT value FROM docfs_meta WHERE key = 'replicas_group');
        BEGIN
            IF g IS NOT NULL AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = g)
               AND to_regprocedure('docfs_end_overstayers()') IS NOT NULL THEN
                EXECUTE format('GRANT EXECUTE ON FUNCTION docfs_end_overstayers() TO %I', g);
            END IF;
        END
        $do$
        """
}
