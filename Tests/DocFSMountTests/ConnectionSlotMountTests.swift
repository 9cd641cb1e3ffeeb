import Foundation
import XCTest

/// A replica the server has no connection slot for (its role's connection limit reached; the
/// server's max_connections answers the same way, SQLSTATE 53300) is no different from a replica
/// with no server: it mounts at once, works offline, says why in `docfs status`, and sends what
/// waited once a slot is free.
final class ConnectionSlotMountTests: ReplicaTestCase {
    func testNoConnectionSlotMountsOfflineAndSaysWhy() throws {
        let r = try makeRemote()
        let b = try makeSecond(r, name: "b")
        XCTAssertEqual(r.fx.docfs(["unmount", b.mnt], timeout: 60).status, 0)
        let role = r.roleName("b")
        _ = try r.servers.psql(r.databaseURL, "ALTER ROLE \(role) CONNECTION LIMIT 0")

        let started = Date()
        try mountSecond(r, b)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "the mount waited for the server")
        XCTAssertEqual(r.fx.sh("printf 'written with no slot' > '\(b.mnt)'/offline.txt").status, 0)
        XCTAssertEqual(contents(b.mnt + "/offline.txt"), "written with no slot")
        var last = ""
        eventually("B's status names the missing connection slot", timeout: 90) {
            last = r.fx.docfs(["status", b.mnt], timeout: 30).stdout
            return last.contains("no connection slot") && last.contains("offline")
        }
        XCTAssertTrue(last.contains("too many connections for role"), last)
        XCTAssertNil(contents(r.mnt + "/offline.txt"), "nothing reached the server without a connection")

        _ = try r.servers.psql(r.databaseURL, "ALTER ROLE \(role) CONNECTION LIMIT -1")
        eventually("A has B's file once B has a slot again", timeout: 120) { self.contents(r.mnt + "/offline.txt") == "written with no slot" }
    }
}
