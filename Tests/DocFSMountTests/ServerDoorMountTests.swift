import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// One replica's credentials against PostgreSQL's own traps (schema 14, `RemoteSchema+Guards`),
/// on a server set up as docs/REMOTE.md deploys it (an owner with CREATEROLE, no superuser):
/// temporary tables that would stand in for the server's inside its functions, a session that
/// holds the writers' lock, and the removal of a connected replica.
final class ServerDoorMountTests: ReplicaTestCase {
    static let layout = """
        folders:
          - path: Photos
            allowedContentTypes: [public.image]
          - path: Archive
            capabilities: [read, enumerate]
        """

    func makeRemoteWithLayout() throws -> RemoteMount {
        let layoutFile = NSTemporaryDirectory() + "docfs-layout-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).yaml"
        try Self.layout.write(toFile: layoutFile, atomically: true, encoding: .utf8)
        defer { unlink(layoutFile) }
        return try makeRemote(extraInitArguments: ["--layout", layoutFile])
    }

    /// The tree's owner is what the docs deploy, not the cluster's superuser.
    func assertOwnerIsNoSuperuser(_ r: RemoteMount, file: StaticString = #filePath, line: UInt = #line) throws {
        let row = try r.servers.psql(r.databaseURL, "SELECT rolsuper::text, rolcreaterole::text FROM pg_roles WHERE rolname = current_user")
        XCTAssertEqual(row.first?.first ?? nil, "false", "the owner is no superuser", file: file, line: line)
        XCTAssertEqual(row.first?.last ?? nil, "true", "the owner has CREATEROLE", file: file, line: line)
    }

    /// `sql` run as `role` in one session; the server's words (an error's, or the rows').
    func answer(_ r: RemoteMount, _ role: String, _ sql: String) -> String {
        do { return "\(try r.servers.psql(r.roleURL(role), sql))" } catch { return "\(error)" }
    }

    func testTemporaryTablesNamedLikeTheServersChangeNoCheck() throws {
        let r = try makeRemoteWithLayout()
        try assertOwnerIsNoSuperuser(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        let honest = try makeSecond(r, name: "honest")
        XCTAssertEqual(r.fx.sh("printf 'from honest' > '\(honest.mnt)/shared/h.txt'").status, 0)
        try waitForQuiet(r, honest)
        let hostile = r.roleName("hostile")
        _ = try r.replicaArguments(role: "hostile")
        let photos = try XCTUnwrap(r.identifier(r.mnt + "/Photos"))
        let archive = try XCTUnwrap(r.identifier(r.mnt + "/Archive"))
        let shared = try XCTUnwrap(r.identifier(r.mnt + "/shared"))
        let honestOperation = try XCTUnwrap(
            r.servers.psql(
                r.databaseURL,
                "SELECT operation_id FROM docfs_changes WHERE role = '\(r.roleName("honest"))' LIMIT 1"
            ).first?.first ?? nil)
        let before = try r.serverTree()

        // As deployed: no TEMP for a replica (nor any role but the owner), no other tree's database.
        XCTAssert(
            answer(r, hostile, "CREATE TEMP TABLE docfs_layout (id integer)").contains("permission denied to create temporary tables"),
            answer(r, hostile, "CREATE TEMP TABLE docfs_layout (id integer)"))
        let publicRights = try r.servers.psql(r.databaseURL, RemoteSchemaText.publicMayConnect)
        XCTAssertEqual(publicRights.first?.first ?? nil, "false", "PUBLIC keeps no TEMP or CONNECT on the tree's database")
        // Another tree in the same cluster (set up by its own owner) lets none of this tree's replicas in.
        let otherTree = try makeRemote(mount: false)
        XCTAssert(
            answer(otherTree, hostile, "SELECT 1").contains("permission denied for database"),
            "another tree's database: \(answer(otherTree, hostile, "SELECT 1"))")

        // A server where TEMP survived (an owner who granted it): the functions read the server's
        // tables all the same, pg_temp coming last.
        _ = try r.servers.psql(r.databaseURL, "GRANT TEMPORARY ON DATABASE \(r.database) TO \(hostile)")
        let shadows = """
            CREATE TEMP TABLE docfs_layout (id integer, layout jsonb, updated_ns bigint);
            INSERT INTO docfs_layout VALUES (1, '{"folders": []}', 0);
            CREATE TEMP TABLE docfs_operations (operation_id uuid, kind text, item_id bigint, content_version bigint,
                metadata_version bigint, position bigint, applied_ns bigint, role text);
            CREATE TEMP TABLE docfs_manifests (key text, size bigint, created_ns bigint, role text, operation_id uuid);
            CREATE TEMP TABLE docfs_upload_intents (key text, created_ns bigint, role text);
            CREATE TEMP TABLE docfs_items (LIKE public.docfs_items);
            CREATE TEMP TABLE docfs_meta (key text, value text);
            """
        func apply(_ operation: String) -> String {
            answer(r, hostile, shadows + "SELECT docfs_apply('[\(operation)]');")
        }
        func op() -> String { UUID().uuidString.lowercased() }
        let text = apply(
            """
            {"op": "\(op())", "kind": "create", "parent": \(photos), "name": "note.txt", "item_kind": "file", "types": ["public.plain-text"]}
            """)
        XCTAssert(text.contains("false") && text.contains("takes only"), "a text file into an images-only folder: \(text)")
        let added = apply(
            """
            {"op": "\(op())", "kind": "create", "parent": \(archive), "name": "sneaked", "item_kind": "directory", "types": ["public.folder"]}
            """)
        XCTAssert(added.contains("false") && added.contains("does not allow adding"), "an add into a folder without add: \(added)")
        let reused = apply(
            """
            {"op": "\(honestOperation)", "kind": "create", "parent": \(shared), "name": "claimed.txt", "item_kind": "file"}
            """)
        XCTAssert(reused.contains("false") && reused.contains("belongs to another replica"), "another replica's operation id: \(reused)")
        let missing = "replica/manifests/\(op())-0123456789abcdef"
        let phantom = answer(
            r, hostile,
            shadows + """
                INSERT INTO docfs_manifests (key, size, created_ns, role) VALUES ('\(missing)', 5, 0, '\(hostile)');
                INSERT INTO docfs_upload_intents VALUES ('\(missing)', 0, '\(hostile)');
                SELECT docfs_apply('[{"op": "\(op())", "kind": "create", "parent": \(shared), "name": "phantom.bin", "item_kind": "file", "content_key": "\(missing)", "size": 5}]');
                """)
        XCTAssert(phantom.contains("false") && phantom.contains("is not on the server"), "a version naming a missing manifest: \(phantom)")

        // Nothing of it reached the server; the honest replica goes on, byte-exact.
        let after = try r.serverTree()
        XCTAssertEqual(Set(after.keys), Set(before.keys), "the tree is unchanged")
        XCTAssertEqual(r.fx.sh("printf 'later' > '\(honest.mnt)/shared/later.txt'").status, 0)
        eventually("the honest replica's write lands", timeout: 60) { (try? r.serverTree()["/shared/later.txt"]) != nil }
        eventually("and reaches the first replica", timeout: 60) { self.contents(r.mnt + "/shared/later.txt") == "later" }
        XCTAssertEqual(contents(r.mnt + "/shared/h.txt"), "from honest")
    }

    /// A psql session of `role` that runs `sql` and then stays open, idle (its stdin a pipe kept
    /// open): what it took is held until the server ends it or the returned closure does.
    func holdIdle(_ r: RemoteMount, role: String, _ sql: String) throws -> (log: String, end: () -> Void) {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: r.servers.pgBin + "/psql")
        holder.arguments = ["-X", "-q", "-d", r.roleURL(role)]
        holder.environment = ProcessInfo.processInfo.environment.merging(["PGAPPNAME": "docfs-idle-holder"]) { $1 }
        let input = Pipe()
        holder.standardInput = input
        let log = r.fx.dir + "/idle-holder.log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        holder.standardOutput = output
        holder.standardError = output
        try holder.run()
        input.fileHandleForWriting.write(Data((sql + "\n").utf8))
        return (
            log,
            {
                try? input.fileHandleForWriting.close()
                if holder.isRunning { kill(holder.processIdentifier, SIGKILL) }
                holder.waitUntilExit()
            }
        )
    }

    /// The scene of the lock-holding tests: the first replica's `/shared` uploaded, a second
    /// replica "writer" mounted and quiet, and a replica role `hostile` (not mounted) to act as.
    func sharedFolderWithAWriter(hostile name: String) throws -> (RemoteMount, Second, String) {
        let r = try makeRemote()
        try assertOwnerIsNoSuperuser(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        let writer = try makeSecond(r, name: "writer")
        try waitForQuiet(r, writer)
        _ = try r.replicaArguments(role: name)
        return (r, writer, r.roleName(name))
    }

    func testAReplicaHoldingLocksHoldsNoOtherReplicaUp() throws {
        let (r, writer, hostile) = try sharedFolderWithAWriter(hostile: "holder")
        // Its limits, set by add-replica in the tree's database.
        let limits = try r.servers.psql(
            r.databaseURL,
            """
            SELECT r.rolconnlimit::text, array_to_string(s.setconfig, ',') FROM pg_roles r
            JOIN pg_db_role_setting s ON s.setrole = r.oid JOIN pg_database d ON d.oid = s.setdatabase AND d.datname = current_database()
            WHERE r.rolname = '\(hostile)'
            """)
        let settings: String = (limits.first?.last ?? nil) ?? ""
        XCTAssertEqual(limits.first?.first ?? nil, "16", "a connection limit: \(limits)")
        for name in ["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"] {
            XCTAssert(settings.contains(name + "="), "\(name) is set: \(settings)")
        }
        // The writers' lock is no key and no row a replica may take itself.
        XCTAssert(answer(r, hostile, "SELECT 1 FROM docfs_locks FOR UPDATE").contains("permission denied"))
        XCTAssert(answer(r, hostile, "BEGIN; LOCK TABLE docfs_locks IN ACCESS EXCLUSIVE MODE; COMMIT").contains("permission denied"))

        // (pg_locks, not pg_stat_activity's state: the owner may not read another role's state.)
        // Everything it can take, in one transaction left open and idle: the old advisory key, a
        // table lock SELECT allows, and the writers' lock through a call of its own.
        let (log, end) = try holdIdle(
            r, role: hostile,
            """
            BEGIN; SELECT pg_advisory_lock(\(0x646f_6366_7301)); LOCK TABLE docfs_items IN ACCESS SHARE MODE; SELECT docfs_apply('[]');
            """)
        defer { end() }
        eventually("the holder's transaction is open", timeout: 30) {
            (try? r.count(
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.usename = '\(hostile)' AND l.locktype = 'advisory'"))
                == 1
        }
        if (try? r.count(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.usename = '\(hostile)' AND l.locktype = 'advisory'"))
            != 1
        {
            XCTFail(
                "the holder: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")\n"
                    + "\((try? r.servers.psql(r.databaseURL, "SELECT usename, state, query FROM pg_stat_activity WHERE datname = current_database()")) ?? [])"
            )
        }
        let started = Date()
        XCTAssertEqual(r.fx.sh("printf 'written meanwhile' > '\(writer.mnt)/shared/meanwhile.txt'").status, 0)
        // The old hold lasted as long as the holder liked (40 s in the issue); now the server ends
        // an idle transaction after idle_in_transaction_session_timeout (10 s): well under 40 s,
        // with the retry of a loaded machine.
        eventually("another replica's write lands while the holder holds", timeout: 35) {
            (try? r.serverTree()["/shared/meanwhile.txt"]) != nil
        }
        XCTAssertNotNil(try r.serverTree()["/shared/meanwhile.txt"], "landed after \(Date().timeIntervalSince(started)) s")
        eventually("the server ended the idle holder", timeout: 30) {
            (try? r.count("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(hostile)'")) == 0
        }
        eventually("and it reached the first replica byte-exact", timeout: 60) {
            self.contents(r.mnt + "/shared/meanwhile.txt") == "written meanwhile"
        }
    }

    /// A replica may `SET` its role's timeouts away in its own session (PostgreSQL cannot forbid
    /// it) and then hold what a call of its own locked: here a folder's row and, with its
    /// constraints made immediate, the `positions` row every commit takes. The server ends such a
    /// session once it outstays its role's limit (`docfs_end_overstayers`, schema 19), when a
    /// held-up replica asks; the other replicas' writes land.
    func testAReplicaThatLiftsItsOwnTimeoutsHoldsNoOneUp() throws {
        let (r, writer, hostile) = try sharedFolderWithAWriter(hostile: "lifter")
        let shared = try XCTUnwrap(r.identifier(r.mnt + "/shared"))
        // The owner reads other roles' session states (pg_read_all_stats, from set-up).
        XCTAssertEqual(
            try r.servers.psql(r.databaseURL, "SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')::text").first?.first ?? nil,
            "true")
        let (log, end) = try holdIdle(
            r, role: hostile,
            """
            SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; SET lock_timeout = 0;
            BEGIN;
            SELECT docfs_apply('[{"op": "\(UUID().uuidString.lowercased())", "kind": "create", "parent": \(shared), "name": "held", "item_kind": "directory", "mode": 493, "uid": 0, "gid": 0}]');
            SET CONSTRAINTS ALL IMMEDIATE;
            """)
        defer { end() }
        // Its transaction holds the positions row: it waits, idle, on nothing.
        let holding = "SELECT count(*) FROM pg_stat_activity WHERE usename = '\(hostile)' AND state = 'idle in transaction'"
        eventually("the lifter's transaction is open and idle", timeout: 30) { (try? r.count(holding)) == 1 }
        if (try? r.count(holding)) != 1 {
            XCTFail("the lifter: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
        let started = Date()
        XCTAssertEqual(r.fx.sh("printf 'written meanwhile' > '\(writer.mnt)/shared/meanwhile.txt'").status, 0)
        // Its idle limit is 10 s and a held-up call gives up after 5 s or its lock_timeout (30 s),
        // then asks: well within 90 s on a loaded machine, and never "as long as it liked".
        eventually("another replica's write lands while the lifter holds", timeout: 90) {
            (try? r.serverTree()["/shared/meanwhile.txt"]) != nil
        }
        XCTAssertNotNil(try r.serverTree()["/shared/meanwhile.txt"], "landed after \(Date().timeIntervalSince(started)) s")
        XCTAssertEqual(
            try r.count("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(hostile)'"), 0,
            "the server ended the lifter's session")
        XCTAssertNil(try r.serverTree()["/shared/held"], "what the ended session did was rolled back")
        eventually("and it reached the first replica byte-exact", timeout: 60) {
            self.contents(r.mnt + "/shared/meanwhile.txt") == "written meanwhile"
        }
        // Honest sessions are left alone: both replicas still write.
        XCTAssertEqual(r.fx.sh("printf 'after' > '\(writer.mnt)/shared/after.txt' && printf 'also' > mnt/shared/also.txt").status, 0)
        eventually("both replicas' later writes land", timeout: 60) {
            let tree = try? r.serverTree()
            return tree?["/shared/after.txt"] != nil && tree?["/shared/also.txt"] != nil
        }
        eventually("and reach the first replica", timeout: 60) { self.contents(r.mnt + "/shared/after.txt") == "after" }
    }

    func testANonSuperuserOwnerRemovesAConnectedReplica() throws {
        let r = try makeRemote()
        try assertOwnerIsNoSuperuser(r)
        XCTAssertEqual(r.fx.sh("mkdir mnt/shared && printf 'from A' > mnt/shared/a.txt").status, 0)
        try r.waitUntilUploaded()
        let leaving = try makeSecond(r, name: "leaving")
        let staying = try makeSecond(r, name: "staying")
        try waitForQuiet(r, leaving, others: [staying])
        let role = r.roleName("leaving")
        XCTAssertGreaterThan(
            try r.count("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(role)'"), 0,
            "the mounted replica holds sessions (its LISTEN at least)")
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let removed = r.fx.docfs(["remote", "remove-replica", role] + r.remoteArguments, env: env)
        XCTAssertEqual(removed.status, 0, "\(removed)")
        XCTAssert(removed.stdout.contains("session(s) ended"), "\(removed)")
        // Ended, and refused from now on: a new login, and a call of a session that got in.
        eventually("no session of the removed role is left", timeout: 30) {
            (try? r.count("SELECT count(*) FROM pg_stat_activity WHERE usename = '\(role)'")) == 0
        }
        XCTAssert(answer(r, role, "SELECT 1").contains("not permitted to log in"), answer(r, role, "SELECT 1"))
        XCTAssertEqual(r.fx.sh("printf 'kept here' > '\(leaving.mnt)/shared/late.txt'").status, 0)
        var fields: [String: Any]?
        eventually("the removed replica says why in its status", timeout: 60) {
            fields = statusFields(r, leaving.mnt)
            return (fields?["lastError"] as? String)?.contains("not permitted to log in") == true
        }
        XCTAssert((fields?["lastError"] as? String)?.contains("not permitted to log in") == true, "status: \(fields ?? [:])")
        XCTAssertFalse(
            r.fx.sh("grep -c 'not permitted to log in' '\(leaving.store)/docfs.log'").stdout.hasPrefix("0"),
            "its log says why: \(r.fx.sh("tail -20 '\(leaving.store)/docfs.log'").stdout)")
        // The others go on.
        XCTAssertEqual(r.fx.sh("printf 'goes on' > '\(staying.mnt)/shared/on.txt'").status, 0)
        eventually("the staying replica's write lands and reaches the first", timeout: 60) {
            self.contents(r.mnt + "/shared/on.txt") == "goes on"
        }
        XCTAssertNil(try r.serverTree()["/shared/late.txt"])
        XCTAssertEqual(contents(leaving.mnt + "/shared/late.txt"), "kept here", "its change stays in its outbox")
    }

    /// Large objects are outside every quota and PUBLIC's in every database; only a superuser may
    /// take them back. add-replica says so and what to run; once run, a replica may make none.
    func testLargeObjectsCloseWithTheRevokeAddReplicaPrints() throws {
        let r = try makeRemote()
        try assertOwnerIsNoSuperuser(r)
        let env = r.awsEnvironment(secret: r.servers.secretKey)
        let role = r.roleName("lo")
        let added = r.fx.docfs(["remote", "add-replica", role] + r.remoteArguments, env: env)
        XCTAssertEqual(added.status, 0, "\(added)")
        let revoke = "REVOKE EXECUTE ON FUNCTION lo_create(oid), lo_creat(integer), lo_from_bytea(oid, bytea) FROM PUBLIC"
        XCTAssert(added.stderr.contains(revoke), "add-replica says what a superuser runs: \(added.stderr)")
        XCTAssertFalse(
            answer(r, role, "SELECT lo_from_bytea(0, 'x')::text").contains("permission denied"),
            "before: the gap the warning names")

        _ = try r.servers.psql(r.superuserDatabaseURL, revoke)
        for sql in ["SELECT lo_from_bytea(0, 'x')", "SELECT lo_create(0)", "SELECT lo_creat(-1)"] {
            XCTAssert(answer(r, role, sql).contains("permission denied"), "\(sql): \(answer(r, role, sql))")
        }
        let again = r.fx.docfs(["remote", "add-replica", role] + r.remoteArguments, env: env)
        XCTAssertEqual(again.status, 0, "\(again)")
        XCTAssertFalse(again.stderr.contains("large objects"), "no warning once closed: \(again.stderr)")
        // The replicas' work goes on: a file written on the first replica lands.
        XCTAssertEqual(r.fx.sh("printf 'after' > mnt/after.txt").status, 0)
        try r.waitUntilUploaded()
    }
}

/// SQL the tests ask, beside the server's own (`RemoteSchema+Guards`).
enum RemoteSchemaText {
    static let publicMayConnect = """
        SELECT EXISTS (SELECT 1 FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a
                        WHERE d.datname = current_database() AND a.grantee = 0 AND a.privilege_type IN ('TEMPORARY', 'CONNECT'))::text
        """
}
