import Foundation
import XCTest

/// `docfs-scale replicas` (the load harness of `make bench-replicas`) at a small size against the
/// test servers: eight replica clients in one process, their calls through pgbouncer. Properties
/// only, never its figures: every client has every file made, took the change log in order (its
/// anchor never went back) and skipped none (every file at or below its anchor in its store), and
/// the server's change log, read with psql, holds exactly the files the writers made.
final class ReplicaFleetMountTests: XCTestCase {
    struct Tree {
        let servers: RemoteServers
        let database: String, bucket: String, role: String
        var direct: String { RemoteMount.url(servers.databaseURL(database), user: "\(role):fleet-secret") }

        init(_ servers: RemoteServers) throws {
            self.servers = servers
            let unique = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            (database, bucket, role) = ("docfs_fleet_\(unique)", "docfs-fleet-\(unique)", "fleet_\(unique)")
            // A password: pgbouncer logs in with SCRAM (Tests/remote/servers.sh).
            _ = try servers.psql(servers.adminURL, "CREATE ROLE \(role) LOGIN CREATEROLE PASSWORD 'fleet-secret'")
            _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(database) OWNER \(role)")
            _ = try servers.s3check(["create-bucket", bucket])
        }

        func drop() {
            _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(database) WITH (FORCE)")
            _ = try? servers.psql(servers.adminURL, "DROP ROLE IF EXISTS \(role)")
            _ = try? servers.s3check(["delete-bucket", bucket])
        }

        /// Runs the harness; its JSON report.
        func harness(_ arguments: [String], calls: String?) throws -> [String: Any] {
            let scale = (try DocFSBinary.path() as NSString).deletingLastPathComponent + "/docfs-scale"
            guard FileManager.default.isExecutableFile(atPath: scale) else { throw XCTSkip("no docfs-scale beside the docfs binary") }
            let work = NSTemporaryDirectory() + "docfs-fleet-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: work) }
            var env = servers.s3Environment
            env.removeValue(forKey: "DOCFS_TEST_S3_ENDPOINT")
            let r = runProcess(
                scale,
                ["replicas"] + arguments + [
                    "--remote", direct, "--objects", "s3://\(bucket)/tree", "--s3-endpoint", servers.s3Endpoint,
                    "--work", work + "/stores",
                ] + (calls.map { ["--calls", $0] } ?? []),
                cwd: work, env: env, timeout: 120, outDir: work)
            XCTAssertEqual(r.status, 0, "\(r)")
            let last = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
            guard let report = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any] else {
                throw FixtureError("docfs-scale printed no JSON report: \(r)")
            }
            return report
        }
    }

    /// pgbouncer's URL for the tree's database and role (nil: servers.sh started none).
    func pooled(_ tree: Tree) -> String? {
        guard let text = ProcessInfo.processInfo.environment["DOCFS_TEST_PGBOUNCER_URL"], !text.isEmpty,
            let slash = text.range(of: "/", options: .backwards)
        else { return nil }
        return RemoteMount.url(text[..<slash.lowerBound] + "/" + tree.database, user: "\(tree.role):fleet-secret")
    }

    func assertInOrder(_ report: [String: Any], clients: Int, file: StaticString = #filePath, line: UInt = #line) {
        let order = report["order"] as? [String: Any] ?? [:]
        XCTAssertEqual(report["clients"] as? Int, clients, "\(report)", file: file, line: line)
        for key in ["skipped", "wentBack", "notCaughtUp", "missing"] {
            XCTAssertEqual(order[key] as? Int, 0, "\(key): \(report)", file: file, line: line)
        }
        XCTAssertEqual(report["unopened"] as? Int, 0, "\(report)", file: file, line: line)
        XCTAssertEqual(report["offline"] as? Int, 0, "\(report)", file: file, line: line)
    }

    func testTwoWritersAmongEightClientsEveryClientTakesEveryChangeInOrder() throws {
        let tree = try Tree(try RemoteServers.fromEnvironment())
        defer { tree.drop() }
        let report = try tree.harness(
            ["writers", "--clients", "8", "--writers", "2", "--seconds", "2", "--burst", "10", "--timeout", "60"],
            calls: pooled(tree))
        assertInOrder(report, clients: 8)
        let writers = report["writers"] as? [String: Any] ?? [:]
        let files = writers["files"] as? Int ?? -1
        XCTAssertGreaterThanOrEqual(files, 20, "\(report)")
        XCTAssertEqual(writers["unsent"] as? Int, 0, "\(report)")
        XCTAssertEqual((report["order"] as? [String: Any])?["creates"] as? Int, files, "\(report)")
        // The server's own count, through psql: one create per file, each on the log once.
        let rows = try tree.servers.psql(
            tree.servers.databaseURL(tree.database),
            "SELECT count(*), count(DISTINCT position) FROM docfs_changes WHERE kind = 'create'")
        XCTAssertEqual(rows.first?.compactMap { $0.flatMap { Int($0) } }, [files, files], "\(report)")
    }

    func testEveryPollingClientBehindPgbouncerHasEachChange() throws {
        let tree = try Tree(try RemoteServers.fromEnvironment())
        defer { tree.drop() }
        guard let calls = pooled(tree) else { throw XCTSkip("DOCFS_TEST_PGBOUNCER_URL is not set") }
        let report = try tree.harness(
            ["fanout", "--clients", "8", "--changes", "3", "--timeout", "60", "--remote-listen", "none"], calls: calls)
        assertInOrder(report, clients: 8)
        let fanout = report["fanout"] as? [String: Any] ?? [:]
        XCTAssertEqual(fanout["missed"] as? Int, 0, "\(report)")
        XCTAssertEqual(fanout["changesNotEverywhere"] as? Int, 0, "\(report)")
        XCTAssertEqual(fanout["warmUpMissed"] as? Int, 0, "\(report)")
        // The warm-up file and the three timed ones.
        XCTAssertEqual((report["order"] as? [String: Any])?["creates"] as? Int, 4, "\(report)")
        XCTAssertEqual(report["listen"] as? String, "none", "\(report)")
    }
}
