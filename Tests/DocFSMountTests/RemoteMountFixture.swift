import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// s3check.py's commands through the process Tests/remote/servers.sh keeps for them
/// (`s3check.py serve`, at DOCFS_TEST_S3CHECK_SOCKET): the same command, run in a child it forks,
/// without a boto3 import per call (most of a call's second on a loaded machine).
enum S3CheckSocket {
    /// The command's status and output; nil when there is no such process (the caller then runs
    /// s3check.py itself). An answer that does not come within `timeout` is a timed-out result.
    static func call(_ args: [String], env: [String: String], timeout: Double) -> ShellResult? {
        guard let path = ProcessInfo.processInfo.environment["DOCFS_TEST_S3CHECK_SOCKET"], !path.isEmpty,
            var request = try? JSONSerialization.data(withJSONObject: ["argv": args, "env": env])
        else { return nil }
        request.append(0x0A)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name = Array(path.utf8)
        guard name.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { return nil }
        let sent = request.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if n <= 0 { return false }
                offset += n
            }
            return true
        }
        // Not all of the line arrived: the child runs nothing without it.
        guard sent else { return nil }
        var answer = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else {
                return ShellResult(status: -1, stdout: "", stderr: "s3check.py serve: no answer within \(timeout) s", timedOut: true)
            }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&ready, 1, Int32(min(left, 1) * 1000))
            if r < 0 && errno != EINTR { break }
            if r <= 0 { continue }
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { break } // the child answered and exited
            answer.append(contentsOf: chunk[0..<n])
        }
        guard let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
            let status = (object["status"] as? NSNumber)?.int32Value
        else {
            return ShellResult(status: -1, stdout: "", stderr: "s3check.py serve answered: \(String(decoding: answer, as: UTF8.self))")
        }
        return ShellResult(status: status, stdout: object["stdout"] as? String ?? "", stderr: object["stderr"] as? String ?? "")
    }
}

/// The servers Tests/remote/servers.sh started (PostgreSQL and the signature-checking moto), as
/// the mounted remote tests see them. Every check of what reached the server goes through second
/// clients — `psql` and boto3 (Tests/remote/s3check.py) — never through docfs's own code, so a
/// bug docfs makes on both sides of a round trip cannot hide itself.
struct RemoteServers {
    static let skipMessage =
        "no test servers: run `make test`, or Tests/remote/servers.sh run -- env DOCFS_BIN=... swift test --skip-build --filter RemoteMountTests"

    /// The maintenance database's URL (…/postgres); tests make a database of their own beside it.
    let adminURL: String
    let pgBin: String
    let s3Endpoint: String
    let accessKey: String
    let secretKey: String
    let python: String
    let serversScript: String
    let serversDir: String
    /// Tests/remote/s3check.py, found beside this source file.
    let s3check: String

    static func fromEnvironment() throws -> RemoteServers {
        let env = ProcessInfo.processInfo.environment
        func need(_ name: String) throws -> String {
            guard let v = env[name], !v.isEmpty else { throw XCTSkip("\(name) is not set: \(skipMessage)") }
            return v
        }
        let servers = RemoteServers(
            adminURL: try need("DOCFS_TEST_PG_URL"), pgBin: try need("DOCFS_TEST_PG_BIN"),
            s3Endpoint: try need("DOCFS_TEST_S3_ENDPOINT"), accessKey: try need("DOCFS_TEST_S3_ACCESS_KEY"),
            secretKey: try need("DOCFS_TEST_S3_SECRET_KEY"), python: try need("DOCFS_TEST_S3_PYTHON"),
            serversScript: try need("DOCFS_TEST_SERVERS_SH"), serversDir: try need("DOCFS_TEST_SERVERS_DIR"),
            s3check: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("remote/s3check.py").path)
        // Never anything but loopback: these tests create and drop databases and buckets.
        for url in [servers.adminURL, servers.s3Endpoint] where !url.contains("@127.0.0.1:") && !url.contains("//127.0.0.1:") {
            throw XCTSkip("\(url) is not on 127.0.0.1")
        }
        return servers
    }

    /// The environment a client (boto3, or the docfs daemon) needs for the test S3 server.
    var s3Environment: [String: String] {
        [
            "AWS_ACCESS_KEY_ID": accessKey, "AWS_SECRET_ACCESS_KEY": secretKey, "AWS_REGION": "us-east-1",
            "DOCFS_TEST_S3_ENDPOINT": s3Endpoint,
        ]
    }

    /// The URL of database `name` on the test cluster.
    func databaseURL(_ name: String) -> String {
        guard let slash = adminURL.range(of: "/", options: .backwards) else { return adminURL }
        return adminURL[..<slash.lowerBound] + "/" + name
    }

    // MARK: psql

    private static let fieldSeparator = "\u{1f}", recordSeparator = "\u{1e}", nullMarker = "\u{2}"

    /// Runs one SQL statement with psql against `url` and returns its rows (nil for SQL NULL).
    /// Throws with psql's message when it fails (a server that is down, an SQL error).
    func psql(_ url: String, _ sql: String, timeout: Double = 30) throws -> [[String?]] {
        let r = runProcess(
            pgBin + "/psql",
            [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-F", Self.fieldSeparator, "-R", Self.recordSeparator,
                "-P", "null=\(Self.nullMarker)", "-d", url, "-c", sql,
            ],
            cwd: "/", env: ["PGCLIENTENCODING": "UTF8"], timeout: timeout, outDir: "/tmp")
        guard r.status == 0 else { throw FixtureError("psql failed: \(sql)\n\(r)") }
        var text = r.stdout
        if text.hasSuffix("\n") { text.removeLast() }
        guard !text.isEmpty else { return [] }
        return text.components(separatedBy: Self.recordSeparator).map { record in
            record.components(separatedBy: Self.fieldSeparator).map { $0 == Self.nullMarker ? nil : $0 }
        }
    }

    // MARK: boto3

    /// Runs s3check.py (see that file) and decodes its JSON answer.
    func s3check(_ args: [String], env: [String: String] = [:], timeout: Double = 120) throws -> Any {
        let environment = s3Environment.merging(env) { $1 }
        let r =
            S3CheckSocket.call(args, env: environment, timeout: timeout)
            ?? runProcess(python, [s3check] + args, cwd: "/", env: environment, timeout: timeout, outDir: "/tmp")
        guard r.status == 0, let json = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) else {
            throw FixtureError("s3check.py \(args.joined(separator: " ")) failed: \(r)")
        }
        return json
    }

    // MARK: PostgreSQL going away and coming back

    /// Stops the test cluster (fast shutdown; its data stays). `startPostgres` brings it back.
    func stopPostgres() throws { try serversCommand("pg-stop") }
    /// Starts the test cluster again on the same port (does nothing when it is running).
    func startPostgres() throws { try serversCommand("pg-start") }

    private func serversCommand(_ command: String) throws {
        let r = runProcess("/bin/sh", [serversScript, command, serversDir], cwd: "/", timeout: 60, outDir: "/tmp")
        guard r.status == 0 else { throw FixtureError("servers.sh \(command) failed: \(r)") }
    }
}

/// `docfs status MNT --json`, the fields scripts wait on.
struct SyncStatus: CustomStringConvertible {
    var online: Bool?
    var pending: Int?
    var pendingBytes: Int?
    var lastError: String?
    /// The JSON as printed (for failure messages).
    var raw: String
    var description: String { raw }
}

/// One live item on the server (not deleted, not trashed), with its path from the root.
struct ServerItem {
    var id: Int64
    var path: String
    var kind: String
    var size: Int64
    var contentKey: String?
    var symlinkTarget: String?
}

/// One entry of a local tree as s3check.py `tree` reads it with plain os calls.
struct LocalEntry: Decodable {
    var path: String
    var kind: String
    var size: Int64
    var sha256: String?
    var target: String?
}

/// A mounted store with a remote replica of its own: a fresh database on the test cluster and a
/// fresh bucket on the test S3 server (so tests never see each other's trees), `docfs init
/// --remote` through MountFixture, and the checks of what reached the server. `teardown()`
/// unmounts (MountFixture), then drops the database and deletes the bucket.
final class RemoteMount {
    let servers: RemoteServers
    let database: String
    let bucket: String
    let prefix = "replica"
    private(set) var fx: MountFixture!
    private var tornDown = false

    /// The tree's owner as docs/REMOTE.md deploys it: a login role with CREATEROLE that owns the
    /// database and is no superuser (it runs the set-up and add-replica; the first replica here
    /// logs in as it). The cluster's superuser only makes and drops the database and the role.
    let owner: String

    /// The tree's database URL, as its owner.
    var databaseURL: String { Self.url(servers.databaseURL(database), user: owner) }
    /// The tree's database URL as the cluster's superuser (for what only it may do: a restore).
    var superuserDatabaseURL: String { servers.databaseURL(database) }

    /// `url` with `user` as its user.
    static func url(_ url: String, user: String) -> String {
        url.replacingOccurrences(of: "//\(URLComponents(string: url)?.user ?? "")@", with: "//\(user)@")
    }
    var mnt: String { fx.mnt }

    /// `docfs init STORE --remote ... --objects s3://BUCKET/replica --s3-endpoint ...` with the
    /// test credentials in init's environment (unless `initEnv` replaces them) plus
    /// `extraInitArguments`; the daemon gets `mountEnv` (default: the test credentials).
    /// `createBucket: false` leaves the bucket missing.
    init(
        servers: RemoteServers, extraInitArguments: [String] = [], initEnv: [String: String]? = nil,
        mountEnv: [String: String]? = nil, createBucket: Bool = true
    ) throws {
        if MountFixture.usesMemoryProvider { throw XCTSkip("a remote replica needs the store (DOCFS_TEST_PROVIDER=memory)") }
        self.servers = servers
        let unique = String(UInt64.random(in: 0...UInt64.max), radix: 36)
        database = "docfs_mount_\(unique)"
        bucket = "docfs-mount-\(unique)"
        owner = "owner_\(unique)"
        _ = try servers.psql(servers.adminURL, "CREATE ROLE \(owner) LOGIN CREATEROLE")
        _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(database) OWNER \(owner)")
        do {
            if createBucket { _ = try servers.s3check(["create-bucket", bucket]) }
            fx = try MountFixture(
                initArguments: remoteArguments + extraInitArguments,
                initEnv: initEnv ?? awsEnvironment(secret: servers.secretKey))
            fx.daemonEnv = mountEnv ?? awsEnvironment(secret: servers.secretKey)
        } catch {
            teardown()
            throw error
        }
    }

    deinit { teardown() }

    /// The --remote/--objects/--s3-endpoint arguments of this replica.
    var remoteArguments: [String] {
        [
            "--remote", databaseURL, "--objects", "s3://\(bucket)/\(prefix)", "--s3-endpoint", servers.s3Endpoint,
            "--region", "us-east-1",
        ]
    }

    /// The arguments of another replica of this tree, logging in as a role of its own: made with
    /// `docfs remote add-replica` (the owner's), named after `name` and this tree's database
    /// (roles are the cluster's, shared by every test's database).
    func replicaArguments(role name: String) throws -> [String] {
        let role = roleName(name)
        let added = fx.docfs(["remote", "add-replica", role] + remoteArguments, env: awsEnvironment(secret: servers.secretKey))
        guard added.status == 0 else { throw FixtureError("add-replica \(role): \(added)") }
        var arguments = remoteArguments
        arguments[1] = roleURL(role)
        return arguments
    }

    /// Runs `sql` in a psql session of its own named `name` (PGAPPNAME), left running: what it
    /// takes (a lock, a row) is held until the returned closure ends the session (safe to call
    /// twice).
    func holdInAPsqlSession(_ sql: String, name: String) throws -> () -> Void {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: servers.pgBin + "/psql")
        holder.arguments = ["-X", "-q", "-d", databaseURL, "-c", sql]
        holder.environment = ProcessInfo.processInfo.environment.merging(["PGAPPNAME": name]) { $1 }
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        let (servers, url) = (self.servers, databaseURL)
        return {
            _ = try? servers.psql(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(name)'")
            if holder.isRunning { kill(holder.processIdentifier, SIGKILL) }
            holder.waitUntilExit()
        }
    }

    /// The cluster-wide name of this tree's replica role `name`.
    func roleName(_ name: String) -> String { "\(name)_\(database.dropFirst("docfs_mount_".count))" }

    /// This tree's database URL with `role` as the user.
    func roleURL(_ role: String) -> String {
        Self.url(databaseURL, user: role)
    }

    /// The S3 variables docfs reads, with `secret` as the secret key.
    func awsEnvironment(secret: String) -> [String: String] {
        ["AWS_ACCESS_KEY_ID": servers.accessKey, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1"]
    }

    func teardown() {
        guard !tornDown else { return }
        tornDown = true
        fx?.teardown()
        // A test that stopped PostgreSQL and failed before starting it again must not leave the
        // next test without a server.
        try? servers.startPostgres()
        _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
        _ = try? servers.psql(servers.adminURL, "DROP ROLE IF EXISTS \(owner)")
        // moto keeps every object in memory: give it back (the 200 MiB test's object among them).
        _ = try? servers.s3check(["delete-bucket", bucket])
    }

    // MARK: status

    /// `docfs status MNT --json`, decoded; throws with the command's output when it fails or
    /// prints no JSON object.
    func status() throws -> SyncStatus {
        let r = fx.docfs(["status", fx.mnt, "--json"], timeout: 30)
        guard r.status == 0, let object = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] else {
            throw FixtureError("docfs status \(fx.mnt) --json: \(r)")
        }
        return SyncStatus(
            online: object["online"] as? Bool, pending: (object["pending"] as? NSNumber)?.intValue,
            pendingBytes: (object["pendingBytes"] as? NSNumber)?.intValue,
            lastError: object["lastError"] as? String, raw: r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Polls `docfs status --json` (every 0.2 s) until `condition` holds and returns that status.
    /// The timeout only keeps a broken engine from hanging the run; on it, throws with the last
    /// status (or the error of the last attempt) and the end of the daemon's log.
    @discardableResult
    func waitForStatus(_ what: String, timeout: Double, _ condition: (SyncStatus) -> Bool) throws -> SyncStatus {
        let deadline = Date().addingTimeInterval(timeout)
        var last = "no status yet"
        repeat {
            do {
                let s = try status()
                if condition(s) { return s }
                last = s.raw
            } catch {
                last = "\(error)"
            }
            usleep(200_000)
        } while Date() < deadline
        throw FixtureError("timed out after \(Int(timeout)) s waiting for \(what); last status: \(last)\nlog (end):\n\(logTail())")
    }

    /// Waits until the outbox is empty: everything done locally is on the server.
    @discardableResult
    func waitUntilUploaded(timeout: Double = 120) throws -> SyncStatus {
        try waitForStatus("pending == 0", timeout: timeout) { $0.pending == 0 }
    }

    /// `docfs unmount MNT [extra...]`. The daemon is this test process's child, and a child that
    /// exited stays a zombie (which still answers kill(pid, 0), what `docfs unmount` waits on)
    /// until it is reaped: so the daemon is reaped here while the command runs.
    func unmount(_ extra: [String] = [], timeout: Double = 120) throws -> ShellResult {
        let tag = UUID().uuidString.prefix(8)
        let out = "\(fx.dir)/.unmount-out-\(tag)", err = "\(fx.dir)/.unmount-err-\(tag)"
        defer { try? FileManager.default.removeItem(atPath: out); try? FileManager.default.removeItem(atPath: err) }
        let child = try Child(fx.bin, ["unmount", fx.mnt] + extra, cwd: fx.dir, stdout: out, stderr: err)
        let deadline = Date().addingTimeInterval(timeout)
        while !child.hasExited && Date() < deadline {
            _ = fx.daemon?.hasExited
            usleep(20_000)
        }
        let timedOut = !child.hasExited
        if timedOut {
            child.signalGroup(SIGKILL)
            child.wait(seconds: nil)
        }
        return ShellResult(
            status: timedOut ? -1 : child.status, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "", timedOut: timedOut)
    }

    func logTail(_ lines: Int = 40) -> String {
        fx.log.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
    }

    /// Log lines at level info or above (StreamLogHandler: "TIMESTAMP LEVEL LABEL : ...") that
    /// contain one of `needles` (case-insensitive): what a user sees in the log at the default level.
    func logLines(mentioningAnyOf needles: [String]) -> [String] {
        fx.log.split(separator: "\n").map(String.init).filter { line in
            let level = line.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? ""
            guard level != "trace", level != "debug" else { return false }
            return needles.contains { line.range(of: $0, options: .caseInsensitive) != nil }
        }
    }

    // MARK: items in the mount

    /// An extended attribute of `path` (absolute) as text, or nil when it has none.
    func xattr(_ path: String, _ name: String) -> String? {
        // Swift's Glibc module does not export getxattr(2): look it up as renameat2Errno does.
        typealias GetXattr = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "getxattr") else { return nil }
        let getxattr = unsafeBitCast(symbol, to: GetXattr.self)
        return fx.guarded("getxattr \(path) \(name)") {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = getxattr(path, name, &buffer, buffer.count)
            return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
        }
    }

    /// `user.docfs.identifier` of `path` as a number (nil when it has none or it is not one).
    func identifier(_ path: String) -> Int64? { xattr(path, "user.docfs.identifier").flatMap { Int64($0) } }

    func inode(_ path: String) -> UInt64? {
        let (st, e) = fx.stat(path)
        return e == 0 ? UInt64(st.st_ino) : nil
    }

    // MARK: the server, read with psql and boto3

    /// Every live item under the root (not deleted, not trashed), by path ("/a/b").
    func serverTree() throws -> [String: ServerItem] {
        let rows = try servers.psql(
            databaseURL,
            """
            WITH RECURSIVE t(id, path, kind, size, content_key, symlink_target) AS (
                SELECT id, ''::text, kind, size, content_key, symlink_target FROM docfs_items WHERE parent_id IS NULL
              UNION ALL
                SELECT c.id, t.path || '/' || c.name, c.kind, c.size, c.content_key, c.symlink_target
                FROM docfs_items c JOIN t ON c.parent_id = t.id
                WHERE NOT c.deleted AND c.trashed_ns IS NULL
            )
            SELECT id, path, kind, size, content_key, symlink_target FROM t WHERE path <> ''
            """)
        var tree = [String: ServerItem]()
        for row in rows {
            guard row.count == 6, let id = row[0].flatMap({ Int64($0) }), let path = row[1], let kind = row[2],
                let size = row[3].flatMap({ Int64($0) })
            else { throw FixtureError("unexpected psql row \(row)") }
            tree[path] = ServerItem(id: id, path: path, kind: kind, size: size, contentKey: row[4], symlinkTarget: row[5])
        }
        return tree
    }

    /// One number from an SQL query on the replica's database.
    func count(_ sql: String) throws -> Int {
        let rows = try servers.psql(databaseURL, sql)
        guard let v = rows.first?.first.flatMap({ $0 }).flatMap({ Int($0) }) else { throw FixtureError("no number from \(sql): \(rows)") }
        return v
    }

    /// Every object in the bucket (key, size, ETag), listed by boto3, but the tree marker
    /// (`PREFIX/docfs-tree.json`, checked by ServerSetupMountTests).
    func objects() throws -> [(key: String, size: Int64, etag: String)] {
        guard let list = try servers.s3check(["list", bucket]) as? [[String: Any]] else { throw FixtureError("bad list answer") }
        return list.map { ($0["key"] as? String ?? "", ($0["size"] as? NSNumber)?.int64Value ?? -1, $0["etag"] as? String ?? "") }
            .filter { $0.key != "\(prefix)/docfs-tree.json" }
    }

    /// Multipart uploads started and neither completed nor aborted.
    func unfinishedUploads() throws -> [String] {
        guard let list = try servers.s3check(["uploads", bucket]) as? [[String: Any]] else { throw FixtureError("bad uploads answer") }
        return list.compactMap { $0["key"] as? String }
    }

    /// Every manifest on the server (versions made of blocks): its blocks in order, as
    /// [pack, offset, length].
    func manifests() throws -> [String: [[Any]]] {
        let rows = try servers.psql(
            databaseURL,
            """
            SELECT m.key, b.pack_key, b.pack_offset, b.length FROM docfs_manifests m
            LEFT JOIN docfs_manifest_blocks mb ON mb.key = m.key LEFT JOIN docfs_blocks b ON b.hash = mb.hash
            ORDER BY m.key, mb.ordinal
            """)
        var out: [String: [[Any]]] = [:]
        for row in rows {
            guard let key = row[0] else { continue }
            if out[key] == nil { out[key] = [] }
            if let pack = row[1], let offset = row[2].flatMap({ Int($0) }), let length = row[3].flatMap({ Int($0) }) {
                out[key]!.append([pack, offset, length])
            }
        }
        return out
    }

    /// size and sha256 of each version's contents (an object, or blocks cut from their packs),
    /// read back with boto3.
    func digests(_ keys: [String]) throws -> [String: (size: Int64, sha256: String)] {
        guard !keys.isEmpty else { return [:] }
        let all = try manifests()
        let blockKeys = keys.filter { all[$0] != nil }
        let objectKeys = keys.filter { all[$0] == nil }
        var out: [String: (size: Int64, sha256: String)] = [:]
        for request in [objectKeys as Any, Dictionary(uniqueKeysWithValues: blockKeys.map { ($0, all[$0]!) }) as Any] {
            if let list = request as? [String], list.isEmpty { continue }
            if let map = request as? [String: [[Any]]], map.isEmpty { continue }
            let file = fx.dir + "/keys-\(UUID().uuidString).json"
            try JSONSerialization.data(withJSONObject: request).write(to: URL(fileURLWithPath: file))
            defer { try? FileManager.default.removeItem(atPath: file) }
            guard let answer = try servers.s3check(["digest", bucket, file]) as? [String: [String: Any]] else {
                throw FixtureError("bad digest answer")
            }
            for (key, d) in answer { out[key] = ((d["size"] as? NSNumber)?.int64Value ?? -1, d["sha256"] as? String ?? "") }
        }
        return out
    }

    // MARK: the local tree

    /// The tree under `root` (absolute; the mount or a source folder) read with plain os calls
    /// in a second process, with each file's sha256.
    func localTree(_ root: String) throws -> [String: LocalEntry] {
        let pid = fx.daemonPID, mnt = fx.mnt
        let r = runProcess(
            servers.python, [servers.s3check, "tree", root], cwd: "/", timeout: 120, outDir: "/tmp",
            onTimeout: { MountFixture.abort(pid: pid, mnt: mnt) })
        guard r.status == 0, let entries = try? JSONDecoder().decode([LocalEntry].self, from: Data(r.stdout.utf8)) else {
            throw FixtureError("s3check.py tree \(root): \(r)")
        }
        return Dictionary(entries.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// Asserts that the server's live tree is the mount's tree: the same paths and kinds, sizes
    /// and link targets, and each file's object (read with boto3) has the local bytes. Returns
    /// the server tree for further checks.
    @discardableResult
    func assertServerMatchesMount(file: StaticString = #filePath, line: UInt = #line) throws -> [String: ServerItem] {
        try assertServerMatches(try localTree(fx.mnt), file: file, line: line)
    }

    /// The same check against a tree read elsewhere (paths from the mount's root).
    @discardableResult
    func assertServerMatches(_ local: [String: LocalEntry], file: StaticString = #filePath, line: UInt = #line) throws -> [String: ServerItem] {
        let server = try serverTree()
        let missing = Set(local.keys).subtracting(server.keys).sorted()
        let extra = Set(server.keys).subtracting(local.keys).sorted()
        XCTAssert(missing.isEmpty, "\(missing.count) local items are not on the server: \(missing.prefix(10))", file: file, line: line)
        XCTAssert(extra.isEmpty, "\(extra.count) server items are not in the mount: \(extra.prefix(10))", file: file, line: line)

        var keysToRead = [String: LocalEntry]()
        for (path, l) in local.sorted(by: { $0.key < $1.key }) {
            guard let s = server[path] else { continue }
            XCTAssertEqual(s.kind, l.kind, "kind of \(path)", file: file, line: line)
            switch l.kind {
            case "file":
                XCTAssertEqual(s.size, l.size, "size of \(path) on the server", file: file, line: line)
                if let key = s.contentKey {
                    XCTAssert(key.hasPrefix(prefix + "/"), "\(path)'s object \(key) is outside the prefix \(prefix)/", file: file, line: line)
                    keysToRead[key] = l
                } else {
                    // An empty file may have no object; any other file must have one.
                    XCTAssertEqual(l.size, 0, "\(path) (\(l.size) bytes) has no content_key on the server", file: file, line: line)
                }
            case "symlink":
                XCTAssertEqual(s.symlinkTarget, l.target, "target of \(path) on the server", file: file, line: line)
            default:
                break
            }
        }
        let read = try digests(Array(keysToRead.keys))
        for (key, l) in keysToRead.sorted(by: { $0.value.path < $1.value.path }) {
            guard let d = read[key] else { XCTFail("no object \(key) for \(l.path)", file: file, line: line); continue }
            XCTAssertEqual(d.size, l.size, "object size of \(l.path) (\(key))", file: file, line: line)
            XCTAssertEqual(d.sha256, l.sha256, "object bytes of \(l.path) (\(key))", file: file, line: line)
        }
        return server
    }

    /// Asserts that the mount holds exactly the tree under `source` (paths, kinds, bytes, targets),
    /// placed under `folder` of the mount ("" for its root).
    func assertMountHolds(_ source: String, under folder: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let want = try localTree(source)
        let got = try localTree(folder.isEmpty ? fx.mnt : fx.m(folder))
        XCTAssertEqual(got.keys.sorted(), want.keys.sorted(), "the mount's \(folder) differs from \(source)", file: file, line: line)
        for (path, w) in want {
            guard let g = got[path] else { continue }
            XCTAssert(
                g.kind == w.kind && g.size == w.size && g.sha256 == w.sha256 && g.target == w.target,
                "\(folder)\(path) in the mount: \(g), expected \(w)", file: file, line: line)
        }
    }

    /// Asserts nothing reached the server twice: no item row (deleted ones included) beyond the
    /// `expectedItems` live ones made, no two rows for one (parent, name), and one object per
    /// *upload*: versions of one file sent together (its create and content versions in one
    /// outbox chunk, by design) may name one object, but no object is named by two items, no
    /// object lacks a version (an upload sent twice leaves one), every version's object is there,
    /// and no multipart upload is left open.
    func assertNothingDoubled(expectedItems: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let rows = try count("SELECT count(*) FROM docfs_items WHERE parent_id IS NOT NULL")
        XCTAssertEqual(rows, expectedItems, "item rows on the server (deleted ones included) for \(expectedItems) items made", file: file, line: line)
        let doubled = try servers.psql(
            databaseURL,
            """
            SELECT parent_id, name, count(*) FROM docfs_items WHERE parent_id IS NOT NULL
            GROUP BY parent_id, name HAVING count(*) > 1 ORDER BY 1, 2 LIMIT 10
            """)
        XCTAssertEqual(doubled.count, 0, "(parent_id, name) with more than one row: \(doubled)", file: file, line: line)

        let shared = try servers.psql(
            databaseURL,
            """
            SELECT content_key, count(DISTINCT item_id) FROM docfs_versions WHERE content_key IS NOT NULL
            GROUP BY content_key HAVING count(DISTINCT item_id) > 1 ORDER BY 1 LIMIT 10
            """)
        XCTAssertEqual(shared.count, 0, "objects named by versions of more than one item: \(shared)", file: file, line: line)
        // Versions name objects (before schema 8) or manifests, whose blocks are in packs.
        let versionKeys = Set(
            try servers.psql(databaseURL, "SELECT DISTINCT content_key FROM docfs_versions WHERE content_key IS NOT NULL")
                .compactMap { $0.first ?? nil })
        let manifests = try manifests()
        let packKeys = packKeys(of: manifests)
        let objectKeys = Set(try objects().map(\.key))
        let orphans = objectKeys.subtracting(versionKeys).subtracting(packKeys).sorted()
        let lost = versionKeys.subtracting(objectKeys).subtracting(manifests.keys).sorted()
        let lostPacks = packKeys.subtracting(objectKeys).sorted()
        XCTAssert(
            orphans.isEmpty,
            "\(orphans.count) objects no version or block refers to (\(objectKeys.count) objects, \(versionKeys.count) keys named): \(orphans.prefix(5))",
            file: file, line: line)
        XCTAssert(lost.isEmpty, "\(lost.count) versions whose object or manifest is missing: \(lost.prefix(5))", file: file, line: line)
        XCTAssert(lostPacks.isEmpty, "\(lostPacks.count) packs blocks are in are missing: \(lostPacks.prefix(5))", file: file, line: line)
        let unnamed = try count(
            "SELECT count(*) FROM docfs_manifests m WHERE NOT EXISTS (SELECT 1 FROM docfs_versions v WHERE v.content_key = m.key)")
        XCTAssertEqual(unnamed, 0, "manifests no version names (recorded twice?)", file: file, line: line)
        let open = try unfinishedUploads()
        XCTAssert(open.isEmpty, "multipart uploads left open: \(open.prefix(5))", file: file, line: line)
    }

    /// After a kill -9: a pack that was in the bucket before the daemon died but whose blocks it
    /// never recorded is named by nothing but its upload intent (at most the packs in flight,
    /// `BlockUploader.parallelPacks`). It is `docfs remote gc`'s to collect once the intent
    /// expires: the intents are dated back past their lifetime (as the owner may) and gc runs,
    /// which must delete exactly those packs. Returns how many there were.
    @discardableResult
    func collectPacksLeftByAKill(file: StaticString = #filePath, line: UInt = #line) throws -> Int {
        let named = packKeys(of: try manifests())
        let intents = Set(try servers.psql(databaseURL, "SELECT key FROM docfs_upload_intents").compactMap { $0.first ?? nil })
        let left = try objects().map(\.key).filter { $0.contains("/packs/") && !named.contains($0) }
        let unexplained = left.filter { !intents.contains($0) }
        XCTAssert(unexplained.isEmpty, "packs nothing names, not even an upload intent: \(unexplained)", file: file, line: line)
        XCTAssertLessThanOrEqual(left.count, 2, "packs left by one kill (at most the two in flight): \(left)", file: file, line: line)
        guard !left.isEmpty else { return 0 }
        _ = try servers.psql(databaseURL, "UPDATE docfs_upload_intents SET created_ns = created_ns - 3600000000000")
        let report = try gc(["--grace", "0", "--keep-versions", "1h", "--keep-log", "1h"])
        XCTAssertEqual(
            (report["packsDeleted"] as? NSNumber)?.intValue, left.count, "gc deletes the packs the kill left: \(report)", file: file, line: line)
        return left.count
    }

    /// The packs the blocks of `manifests` (as `manifests()` gives them) are in.
    func packKeys(of manifests: [String: [[Any]]]) -> Set<String> {
        Set(manifests.values.flatMap { $0.compactMap { $0.first as? String } })
    }

    /// `docfs remote gc STORE --json` with `arguments`: its report; a failed run throws.
    func gc(_ arguments: [String]) throws -> [String: Any] {
        let run = fx.docfs(["remote", "gc", fx.store, "--json"] + arguments, env: awsEnvironment(secret: servers.secretKey), timeout: 120)
        guard run.status == 0, let report = (try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8))) as? [String: Any] else {
            throw FixtureError("docfs remote gc \(arguments): \(run)")
        }
        return report
    }

    /// The tree's database saved as an operator backs it up (`pg_dump -Fc`); the dump's path.
    func dumpDatabase() throws -> String {
        let dump = fx.dir + "/server-\(UUID().uuidString.prefix(8)).dump"
        let dumped = runProcess(servers.pgBin + "/pg_dump", ["-Fc", "-f", dump, "-d", databaseURL], cwd: "/", timeout: 60, outDir: "/tmp")
        guard dumped.status == 0 else { throw FixtureError("pg_dump: \(dumped)") }
        return dump
    }

    /// The tree's database dropped and made again from `dump` (`pg_restore`): its identifiers
    /// and change log positions go back to the backup's. Mounts of it should be unmounted first.
    func restoreDatabase(from dump: String) throws {
        _ = try servers.psql(servers.adminURL, "DROP DATABASE \(database) WITH (FORCE)")
        _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(database) OWNER \(owner)")
        let restored = runProcess(servers.pgBin + "/pg_restore", ["-d", databaseURL, dump], cwd: "/", timeout: 60, outDir: "/tmp")
        guard restored.status == 0 else { throw FixtureError("pg_restore: \(restored)") }
    }

    /// A line of the daemon's `/proc/PID/status` in bytes: `VmRSS` (resident now), `VmHWM` (its peak).
    func daemonMemory(_ field: String) -> Int? {
        guard let pid = fx.daemonPID,
            let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("\(field):") }),
            let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return nil }
        return kb * 1024
    }

    /// Sets the daemon's peak (VmHWM) to what it holds now (writing 5 to /proc/PID/clear_refs),
    /// so that a later peak measures one piece of work; false where the kernel does not allow it.
    func resetDaemonPeakMemory() -> Bool {
        guard let pid = fx.daemonPID else { return false }
        return (try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)) != nil
    }
}

/// Writes a source tree under `root` (outside the mount): `folders` folders (names with a space
/// and a non-ASCII letter), each with `subfolders` subfolders of `filesPerFolder` small files
/// (0 to 4 KiB, seeded bytes), plus an empty file, a relative symbolic link and a file of each
/// size in `bigFiles`. Returns the number of items made (folders, files and the link).
@discardableResult
func makeSourceTree(_ root: String, folders: Int, subfolders: Int, filesPerFolder: Int, bigFiles: [Int] = []) throws -> Int {
    let fm = FileManager.default
    var items = 0, seed: UInt64 = 1
    func write(_ path: String, _ count: Int) throws {
        try Data(testBytes(count, seed: seed)).write(to: URL(fileURLWithPath: path))
        seed += 1; items += 1
    }
    try fm.createDirectory(atPath: root, withIntermediateDirectories: true)
    for f in 0..<folders {
        let folder = "\(root)/dossier \(f) é"
        try fm.createDirectory(atPath: folder, withIntermediateDirectories: false); items += 1
        for s in 0..<subfolders {
            let sub = "\(folder)/sub-\(s)"
            try fm.createDirectory(atPath: sub, withIntermediateDirectories: false); items += 1
            for i in 0..<filesPerFolder { try write("\(sub)/file-\(i).txt", Int(seed * 977 % 4096)) }
        }
    }
    try write("\(root)/empty", 0)
    try fm.createSymbolicLink(atPath: "\(root)/link", withDestinationPath: "dossier 0 é/sub-0/file-0.txt"); items += 1
    for (n, size) in bigFiles.enumerated() { try write("\(root)/big-\(n).bin", size) }
    return items
}

/// Base class of the mounted remote tests: the servers from the environment (skipped without
/// them), and `makeRemote` for a replica torn down with the test.
class RemoteMountTestCase: XCTestCase {
    var servers: RemoteServers!
    private var remotes: [RemoteMount] = []

    override func setUpWithError() throws {
        try super.setUpWithError()
        servers = try RemoteServers.fromEnvironment()
        _ = try DocFSBinary.path()
    }

    override func tearDown() {
        for r in remotes.reversed() { r.teardown() }
        remotes = []
        super.tearDown()
    }

    /// A store with a fresh remote (database and bucket), mounted unless `mount` is false.
    func makeRemote(
        extraInitArguments: [String] = [], initEnv: [String: String]? = nil,
        mountEnv: [String: String]? = nil, createBucket: Bool = true, mount: Bool = true
    ) throws -> RemoteMount {
        let r = try RemoteMount(
            servers: servers, extraInitArguments: extraInitArguments, initEnv: initEnv,
            mountEnv: mountEnv, createBucket: createBucket)
        remotes.append(r)
        if mount { try r.fx.mount() }
        return r
    }
}
