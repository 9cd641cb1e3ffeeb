import Foundation
import XCTest
@testable import DocFSReplica
import DocFSRemote
import DocFSStore

/// Where a mount LISTENs (`docfs init --remote-listen`), as the store keeps it and a mount reads it.
final class ListenTargetTests: XCTestCase {
    let environment = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "HOME": "/nonexistent"]

    func link(listen: String?) -> RemoteLink {
        var link = RemoteLink(
            postgres: "postgres://laptop:pw-laptop@bouncer.example:6432/docs", bucket: "b", prefix: "p",
            endpoint: nil, region: "us-east-1", credentialsFile: nil)
        link.listen = listen
        return link
    }

    func testAStoreKeptBeforeListensOnItsServer() throws {
        // A link written before `listen` existed has no such key.
        let json = #"{"postgres":"postgres://laptop@db.example:5432/docs","bucket":"b","prefix":"p","region":"us-east-1"}"#
        let old = try JSONDecoder().decode(RemoteLink.self, from: Data(json.utf8))
        XCTAssertNil(old.listen)
        XCTAssertEqual(try ReplicaConfiguration.resolve(link: old, store: nil, environment: environment).listen, .server)
    }

    func testNoneListensNowhere() throws {
        XCTAssertEqual(try ReplicaConfiguration.resolve(link: link(listen: "none"), store: nil, environment: environment).listen, .none)
    }

    func testTheSameRoleUsesTheServersPassword() throws {
        let resolved = try ReplicaConfiguration.resolve(
            link: link(listen: "postgres://laptop@db.example:5432/docs"), store: nil,
            environment: environment)
        guard case .url(let url) = resolved.listen else { return XCTFail("\(resolved.listen)") }
        XCTAssertEqual(url.host, "db.example")
        XCTAssertEqual(url.port, 5432)
        XCTAssertEqual(url.password, "pw-laptop")
    }

    func testAnotherRoleFindsItsPasswordInTheStoresPgpass() throws {
        let store = FileManager.default.temporaryDirectory.appendingPathComponent("listen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: store) }
        let pgpass = store.appendingPathComponent("pgpass")
        try "db.example:5432:docs:listener:pw-listener\n".write(to: pgpass, atomically: true, encoding: .utf8)
        // Read only when no one else may (as libpq does).
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: pgpass.path)
        let resolved = try ReplicaConfiguration.resolve(
            link: link(listen: "postgres://listener@db.example:5432/docs"), store: store,
            environment: environment)
        guard case .url(let url) = resolved.listen else { return XCTFail("\(resolved.listen)") }
        XCTAssertEqual(url.password, "pw-listener")
        // No password anywhere: none (the server may trust the role, or says no at the mount).
        let bare = try ReplicaConfiguration.resolve(
            link: link(listen: "postgres://other@db.example:5432/docs"), store: store,
            environment: environment)
        guard case .url(let other) = bare.listen else { return XCTFail("\(bare.listen)") }
        XCTAssertNil(other.password)
    }

    func testAListeningURLThatIsNoURLIsRefused() {
        XCTAssertThrowsError(try ReplicaConfiguration.resolve(link: link(listen: "db.example:5432"), store: nil, environment: environment)) {
            XCTAssertTrue("\($0)".contains("--remote-listen"), "\($0)")
        }
    }
}
