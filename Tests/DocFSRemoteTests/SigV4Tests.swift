import XCTest
@testable import DocFSRemote

/// AWS Signature Version 4, checked against the worked examples in AWS's S3 documentation
/// ("Signature Calculations for the Authorization Header: Transferring Payload in a Single
/// Chunk"): credentials AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, bucket
/// examplebucket (virtual-hosted host), us-east-1, 20130524T000000Z.
final class SigV4Tests: XCTestCase {
    let signer = SigV4Signer(
        credentials: S3Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE",
            secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))
    let host = "examplebucket.s3.amazonaws.com"
    let date = "20130524T000000Z"

    func testGetObjectWithRange() {
        let signed = signer.sign(
            method: "GET", canonicalURI: "/test.txt", query: [],
            headers: [("Host", host), ("Range", "bytes=0-9")],
            payloadHash: SigV4Signer.emptyPayloadHash, amzDate: date)
        XCTAssertEqual(
            signed.canonicalRequest,
            """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        XCTAssertEqual(
            signed.stringToSign,
            """
            AWS4-HMAC-SHA256
            20130524T000000Z
            20130524/us-east-1/s3/aws4_request
            7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
            """)
        XCTAssertEqual(signed.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        XCTAssertEqual(
            signed.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                + "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    func testPutObject() {
        let body = Array("Welcome to Amazon S3.".utf8)
        let hash = SigV4Signer.sha256Hex(body)
        XCTAssertEqual(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let signed = signer.sign(
            method: "PUT", canonicalURI: S3Path.encodeComponent("test$file.text", keepSlash: true).prefixedSlash,
            query: [],
            headers: [
                ("Host", host), ("Date", "Fri, 24 May 2013 00:00:00 GMT"),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
            ],
            payloadHash: hash, amzDate: date)
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("PUT\n/test%24file.text\n\n"))
        XCTAssertTrue(signed.canonicalRequest.contains("\ndate;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"))
        XCTAssertTrue(signed.stringToSign.hasSuffix("9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d"))
        XCTAssertEqual(signed.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    func testGetBucketLifecycle() {
        // The query `?lifecycle` has an empty value: canonical form `lifecycle=`.
        let signed = signer.sign(
            method: "GET", canonicalURI: "/", query: [("lifecycle", "")],
            headers: [("Host", host)], payloadHash: SigV4Signer.emptyPayloadHash, amzDate: date)
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("GET\n/\nlifecycle=\n"))
        XCTAssertTrue(signed.stringToSign.hasSuffix("9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca"))
        XCTAssertEqual(signed.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    func testListObjects() {
        // Given out of order: the canonical query sorts them.
        let signed = signer.sign(
            method: "GET", canonicalURI: "/", query: [("prefix", "J"), ("max-keys", "2")],
            headers: [("Host", host)], payloadHash: SigV4Signer.emptyPayloadHash, amzDate: date)
        XCTAssertTrue(signed.canonicalRequest.hasPrefix("GET\n/\nmax-keys=2&prefix=J\n"))
        XCTAssertTrue(signed.stringToSign.hasSuffix("df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7"))
        XCTAssertEqual(signed.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    func testSignedHeadersIncludeTheExactHostWithPort() {
        let signed = signer.sign(
            method: "GET", canonicalURI: "/b/k", query: [], headers: [("host", "127.0.0.1:9000")],
            payloadHash: SigV4Signer.unsignedPayload, amzDate: date)
        XCTAssertTrue(signed.canonicalRequest.contains("\nhost:127.0.0.1:9000\n"))
        XCTAssertTrue(signed.canonicalRequest.hasSuffix("\nUNSIGNED-PAYLOAD"))
        XCTAssertTrue(signed.headers.contains { $0.name == "x-amz-content-sha256" && $0.value == "UNSIGNED-PAYLOAD" })
    }

    func testKeysAreEncodedPerSegment() {
        XCTAssertEqual(S3Path.objectPath(bucket: "b", key: "dir/a b+c&d=e.txt"), "/b/dir/a%20b%2Bc%26d%3De.txt")
        XCTAssertEqual(S3Path.objectPath(bucket: "b", key: "ü/日"), "/b/%C3%BC/%E6%97%A5")
        XCTAssertEqual(S3Path.objectPath(bucket: "b", key: "a~b-c_d.e"), "/b/a~b-c_d.e")
        XCTAssertEqual(SigV4Signer.canonicalQuery([("uploadId", "a/b=c"), ("partNumber", "2")]), "partNumber=2&uploadId=a%2Fb%3Dc")
        XCTAssertEqual(SigV4Signer.canonicalQuery([("uploads", "")]), "uploads=")
    }

    func testAmzDate() {
        XCTAssertEqual(SigV4Signer.amzDate(for: Date(timeIntervalSince1970: 1_369_353_600)), "20130524T000000Z")
        XCTAssertEqual(SigV4Signer.amzDate(for: Date(timeIntervalSince1970: 1_700_000_000.9)), "20231114T221320Z")
    }

    func testXMLTextsAreUnescaped() {
        let xml =
            "<ListBucketResult><Contents><Key>a &amp; b&lt;c&gt;&quot;&apos;&#233;&#xE9;</Key><Size>3</Size></Contents>"
            + "<Contents><Key>x</Key><Size>0</Size></Contents><IsTruncated>false</IsTruncated></ListBucketResult>"
        let entries = S3XML.elements("Contents", in: xml)
        XCTAssertEqual(entries.count, 2)
        XCTAssertEqual(S3XML.text("Key", in: entries[0]), "a & b<c>\"'éé")
        XCTAssertEqual(S3XML.text("IsTruncated", in: xml), "false")
    }

    func testErrorsAreSortedByWhatToDo() {
        func error(_ status: Int, _ code: String?) -> S3Error {
            S3Error.fromResponse(
                status: status, body: code.map { "<Error><Code>\($0)</Code><Message>m</Message></Error>" } ?? "",
                operation: "op")
        }
        XCTAssertEqual(error(403, "SignatureDoesNotMatch").kind, .authentication)
        XCTAssertEqual(error(403, "InvalidAccessKeyId").kind, .authentication)
        XCTAssertEqual(error(403, nil).kind, .authentication)
        XCTAssertEqual(error(503, "SlowDown").kind, .serverBusy)
        XCTAssertEqual(error(500, nil).kind, .serverBusy)
        XCTAssertEqual(error(400, "EntityTooLarge").kind, .quota)
        XCTAssertEqual(error(404, "NoSuchKey").kind, .notFound)
        XCTAssertEqual(error(404, nil).kind, .notFound)
        XCTAssertEqual(error(416, "InvalidRange").kind, .invalidRange)
        XCTAssertTrue(error(503, "SlowDown").isRetryable)
        XCTAssertFalse(error(403, "AccessDenied").isRetryable)
        XCTAssertFalse(error(400, "EntityTooLarge").isRetryable)
        XCTAssertTrue(S3Error(kind: .unreachable, message: "x").isRetryable)
        XCTAssertTrue(S3Error(kind: .timeout, message: "x").isRetryable)
    }

    func testCredentialsNeverShowTheSecret() {
        let c = S3Credentials(accessKeyID: "AKID", secretAccessKey: "very-secret")
        XCTAssertFalse("\(c)".contains("very-secret"))
        let url = PostgresURL("postgres://me:pw@db.example:6543/tree", environment: [:])
        XCTAssertEqual(url, PostgresURL(host: "db.example", port: 6543, user: "me", password: "pw", database: "tree"))
        XCTAssertFalse("\(url!)".contains("pw@"))
        XCTAssertEqual(PostgresURL("postgres://me@h/db", environment: ["PGPASSWORD": "x"])?.password, "x")
        XCTAssertNil(PostgresURL("mysql://me@h/db"))
    }

    func testContentObjectKeys() {
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        XCTAssertEqual(ContentObjectKey.make(prefix: "tree/", operationID: id), "tree/objects/e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
        XCTAssertEqual(ContentObjectKey.make(prefix: "", operationID: id), "objects/e621e1f8-c36c-495a-93fc-0c247a3e6e5f")
    }
}

private extension String {
    var prefixedSlash: String { "/" + self }
}
