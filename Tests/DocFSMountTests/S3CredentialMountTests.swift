import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// S3 credentials as AWS tools take them, against moto checking signatures, keys and session
/// tokens: a profile of ~/.aws/credentials, a key rotated while the replica is mounted (read
/// again when the server refuses the old one), and a session token.
final class S3CredentialMountTests: ReplicaTestCase {
    /// An environment with a home of its own holding ~/.aws/credentials [team] = the key given.
    func profileEnvironment(_ r: RemoteMount, id: String, secret: String) throws -> (env: [String: String], file: String) {
        let home = r.fx.dir + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.aws", withIntermediateDirectories: true)
        let file = home + "/.aws/credentials"
        try writeCredentials(file, id: id, secret: secret)
        return (
            [
                "HOME": home, "AWS_PROFILE": "team", "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
            ], file
        )
    }

    func writeCredentials(_ file: String, id: String, secret: String) throws {
        let text =
            "[default]\naws_access_key_id = NOTTHISONE\naws_secret_access_key = no\n\n[team]\naws_access_key_id = \(id)\naws_secret_access_key = \(secret)\n"
        let temporary = file + ".new"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        XCTAssertEqual(chmod(temporary, 0o600), 0)
        XCTAssertEqual(rename(temporary, file), 0)
    }

    func key(_ answer: Any) throws -> (id: String, secret: String, token: String?) {
        let object = try XCTUnwrap(answer as? [String: Any])
        return (try XCTUnwrap(object["id"] as? String), try XCTUnwrap(object["secret"] as? String), object["token"] as? String)
    }

    func testAProfileIsUsedAndARotatedKeyIsReadAgain() throws {
        let r = try makeRemote(mount: false)
        let user = "docfs-rotation-\(UInt32.random(in: 0...UInt32.max))"
        let first = try key(servers.s3check(["create-key", user]))
        let (env, file) = try profileEnvironment(r, id: first.id, secret: first.secret)
        r.fx.daemonEnv = env
        try r.fx.mount()
        XCTAssertEqual(r.fx.sh("printf one > mnt/one.txt").status, 0)
        try r.waitUntilUploaded(timeout: 60)

        // The key is rotated: a new one in the file, the old one deleted on the server.
        let second = try key(servers.s3check(["create-key", user]))
        try writeCredentials(file, id: second.id, secret: second.secret)
        _ = try servers.s3check(["delete-key", user, first.id])
        XCTAssertThrowsError(
            try servers.s3check(["list", r.bucket], env: ["AWS_ACCESS_KEY_ID": first.id, "AWS_SECRET_ACCESS_KEY": first.secret]),
            "the server refuses the old key now")
        XCTAssertEqual(r.fx.sh("printf two > mnt/two.txt").status, 0)
        try r.waitUntilUploaded(timeout: 60)
        let keys = try r.objects().count
        XCTAssertEqual(keys, 2, "both files on the server")
        XCTAssertTrue(
            r.logLines(mentioningAnyOf: [first.id, second.id, first.secret, second.secret]).allSatisfy {
                !$0.contains(first.secret) && !$0.contains(second.secret)
            })
    }

    func testASessionTokenIsSentAndAWrongOneRefused() throws {
        let r = try makeRemote(mount: false)
        let session = try key(servers.s3check(["session", "docfs-session-\(UInt32.random(in: 0...UInt32.max))"]))
        let token = try XCTUnwrap(session.token)
        r.fx.daemonEnv = [
            "AWS_ACCESS_KEY_ID": session.id, "AWS_SECRET_ACCESS_KEY": session.secret, "AWS_SESSION_TOKEN": token,
            "AWS_REGION": "us-east-1",
        ]
        try r.fx.mount()
        XCTAssertEqual(r.fx.sh("printf t > mnt/t.txt").status, 0)
        try r.waitUntilUploaded(timeout: 60)

        // The same keys with another token: moto refuses them, init says so and leaves nothing.
        let wrong = [
            "AWS_ACCESS_KEY_ID": session.id, "AWS_SECRET_ACCESS_KEY": session.secret, "AWS_SESSION_TOKEN": "not-the-token",
            "AWS_REGION": "us-east-1",
        ]
        let other = r.fx.docfs(["init", r.fx.dir + "/other"] + r.remoteArguments, env: wrong)
        XCTAssertNotEqual(other.status, 0, "\(other)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.dir + "/other"))
    }
}

extension S3CredentialMountTests {
    /// An S3 endpoint whose certificate a private CA signed: refused without the CA, taken with
    /// `--s3-ca` (kept by the store for the mount) or AWS_CA_BUNDLE.
    func testAnEndpointWithAPrivateCAIsTrustedOnlyWithItsCA() throws {
        let env = ProcessInfo.processInfo.environment
        guard let endpoint = env["DOCFS_TEST_S3_TLS_ENDPOINT"], let ca = env["DOCFS_TEST_PG_CA"] else {
            throw XCTSkip("DOCFS_TEST_S3_TLS_ENDPOINT is not set: \(RemoteServers.skipMessage)")
        }
        let r = try makeRemote(mount: false)
        let bucket = r.bucket + "-tls"
        _ = try servers.s3check(["create-bucket", bucket], env: ["DOCFS_TEST_S3_ENDPOINT": endpoint, "AWS_CA_BUNDLE": ca])
        let other = r.database + "_tls"
        _ = try servers.psql(servers.adminURL, "CREATE DATABASE \(other)")
        defer { _ = try? servers.psql(servers.adminURL, "DROP DATABASE IF EXISTS \(other) WITH (FORCE)") }
        let arguments = ["--remote", servers.databaseURL(other), "--objects", "s3://\(bucket)/tree", "--s3-endpoint", endpoint]
        let keys = r.awsEnvironment(secret: servers.secretKey)

        let untrusted = r.fx.docfs(["init", r.fx.dir + "/untrusted"] + arguments, env: keys)
        XCTAssertNotEqual(untrusted.status, 0)
        XCTAssertTrue(untrusted.stderr.contains("certificate is not trusted"), untrusted.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: r.fx.dir + "/untrusted"))

        let bundle = r.fx.docfs(["init", r.fx.dir + "/bundle"] + arguments, env: keys.merging(["AWS_CA_BUNDLE": ca]) { $1 })
        XCTAssertEqual(bundle.status, 0, "\(bundle)")

        let store = r.fx.dir + "/trusted", mnt = r.fx.dir + "/mnt-tls"
        let trusted = r.fx.docfs(["init", store] + arguments + ["--s3-ca", ca], env: keys)
        XCTAssertEqual(trusted.status, 0, "\(trusted)")
        XCTAssertEqual(mkdir(mnt, 0o755), 0)
        let mount = r.fx.docfs(["mount", store, mnt], env: keys)
        XCTAssertEqual(mount.status, 0, "\(mount)")
        addTeardownBlock {
            _ = r.fx.docfs(["unmount", "--no-wait", mnt], timeout: 30)
            MountFixture.lazyUnmount(mnt)
        }
        XCTAssertEqual(r.fx.sh("printf secure > '\(mnt)/s.txt'").status, 0)
        let unmount = r.fx.docfs(["unmount", mnt], timeout: 60)
        XCTAssertEqual(unmount.status, 0, "the outbox reached the HTTPS endpoint before the unmount returned: \(unmount)")
        let listed = "\(try servers.s3check(["list", bucket], env: ["DOCFS_TEST_S3_ENDPOINT": endpoint, "AWS_CA_BUNDLE": ca]))"
        XCTAssertTrue(listed.contains("tree/packs/"), listed)
    }
}
