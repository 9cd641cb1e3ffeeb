import XCTest
import Foundation
@testable import DocFSReplica

/// The AWS tools' order for S3 credentials: the environment, the file given to init, the
/// shared credentials file and the config file under AWS_PROFILE; regions likewise.
final class AWSCredentialChainTests: XCTestCase {
    var home: String!

    override func setUpWithError() throws {
        home = NSTemporaryDirectory() + "docfs-aws-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: home + "/.aws", withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: home) }

    func write(_ path: String, _ text: String, mode: mode_t = 0o600) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(path, mode), 0)
    }

    static let credentials = """
        [default]
        aws_access_key_id = DEFAULTKEY
        aws_secret_access_key = default-secret

        [team]
        aws_access_key_id = TEAMKEY
        aws_secret_access_key = team-secret
        aws_session_token = team-token
        region = eu-west-1
        """

    func testProfilesOfTheSharedCredentialsFile() throws {
        try write(home + "/.aws/credentials", Self.credentials)
        let plain = try XCTUnwrap(AWSCredentialChain(environment: ["HOME": home], explicitFile: nil).resolve())
        XCTAssertEqual(plain.credentials.accessKeyID, "DEFAULTKEY")
        XCTAssertNil(plain.credentials.sessionToken)
        let team = try XCTUnwrap(AWSCredentialChain(environment: ["HOME": home, "AWS_PROFILE": "team"], explicitFile: nil).resolve())
        XCTAssertEqual(team.credentials.accessKeyID, "TEAMKEY")
        XCTAssertEqual(team.credentials.sessionToken, "team-token")
        XCTAssertEqual(team.region, "eu-west-1")
        XCTAssertNil(try AWSCredentialChain(environment: ["HOME": home, "AWS_PROFILE": "nobody"], explicitFile: nil).resolve())
    }

    func testTheEnvironmentComesFirstAndTheConfigFileLast() throws {
        try write(home + "/.aws/credentials", Self.credentials)
        try write(
            home + "/.aws/config",
            """
            [default]
            region = us-west-2
            [profile sso]
            aws_access_key_id = CONFIGKEY
            aws_secret_access_key = config-secret
            region = ap-south-1
            """)
        let environment = [
            "HOME": home!, "AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "env-secret",
            "AWS_SESSION_TOKEN": "env-token",
        ]
        let fromEnvironment = try XCTUnwrap(AWSCredentialChain(environment: environment, explicitFile: nil).resolve())
        XCTAssertEqual(fromEnvironment.credentials.accessKeyID, "ENVKEY")
        XCTAssertEqual(fromEnvironment.credentials.sessionToken, "env-token")
        XCTAssertEqual(fromEnvironment.region, "us-west-2", "the config file's region for the default profile")
        let config = try XCTUnwrap(AWSCredentialChain(environment: ["HOME": home, "AWS_PROFILE": "sso"], explicitFile: nil).resolve())
        XCTAssertEqual(config.credentials.accessKeyID, "CONFIGKEY")
        XCTAssertEqual(config.region, "ap-south-1")
        let region = try XCTUnwrap(AWSCredentialChain(environment: ["HOME": home, "AWS_REGION": "sa-east-1"], explicitFile: nil).resolve())
        XCTAssertEqual(region.region, "sa-east-1")
    }

    func testAFileGivenToInitTakesItsProfileAndIsRefusedWhenOthersMayReadIt() throws {
        let file = home + "/keys"
        try write(file, Self.credentials)
        let team = try XCTUnwrap(AWSCredentialChain(environment: ["HOME": home, "AWS_PROFILE": "team"], explicitFile: file).resolve())
        XCTAssertEqual(team.credentials.accessKeyID, "TEAMKEY")
        XCTAssertEqual(team.source, file)
        try write(file, "aws_access_key_id = BAREKEY\naws_secret_access_key = bare\n")
        XCTAssertEqual(try AWSCredentialChain(environment: ["HOME": home], explicitFile: file).resolve()?.credentials.accessKeyID, "BAREKEY")
        XCTAssertEqual(chmod(file, 0o644), 0)
        XCTAssertThrowsError(try AWSCredentialChain(environment: ["HOME": home], explicitFile: file).resolve()) { error in
            XCTAssertTrue("\(error)".contains("chmod 600"), "\(error)")
        }
    }
}
