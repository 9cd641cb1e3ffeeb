import XCTest
@testable import DocFSRemote

/// Bucket versioning's bits without a server (schema 18): a version id in the signed query, the
/// ListVersionsResult answer, and which `x-amz-version-id` values are recorded.
final class S3VersionTests: XCTestCase {
    let signer = SigV4Signer(
        credentials: S3Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE",
            secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))

    func testAVersionIDIsSignedInTheQueryEncoded() {
        // AWS's ids may hold `+`, `/` and `=`: each percent-encoded, in the signed query as sent.
        let id = "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY+MTRCxf3vjVBH40Nr8X8gdRQBpUMLUo/x="
        XCTAssertEqual(
            SigV4Signer.canonicalQuery([("versionId", id)]),
            "versionId=3HL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY%2BMTRCxf3vjVBH40Nr8X8gdRQBpUMLUo%2Fx%3D")
        let signed = signer.sign(
            method: "GET", canonicalURI: "/bucket/tree/packs/ra/p", query: [("versionId", id)],
            headers: [("Host", "127.0.0.1:9000"), ("Range", "bytes=0-9")],
            payloadHash: SigV4Signer.emptyPayloadHash, amzDate: "20130524T000000Z")
        XCTAssert(signed.canonicalRequest.hasPrefix("GET\n/bucket/tree/packs/ra/p\nversionId=3HL4kqtJlcpXroDTDmJ%2Brm"), signed.canonicalRequest)
        let other = signer.sign(
            method: "GET", canonicalURI: "/bucket/tree/packs/ra/p", query: [("versionId", "another")],
            headers: [("Host", "127.0.0.1:9000"), ("Range", "bytes=0-9")],
            payloadHash: SigV4Signer.emptyPayloadHash, amzDate: "20130524T000000Z")
        XCTAssertNotEqual(signed.signature, other.signature, "the version is part of what is signed")
        // Versioning's own calls: an empty value, `versioning=`; listing versions sorts its query.
        XCTAssertEqual(SigV4Signer.canonicalQuery([("versioning", "")]), "versioning=")
        XCTAssertEqual(
            SigV4Signer.canonicalQuery([("versions", ""), ("prefix", "tree"), ("key-marker", "tree/packs/a b")]),
            "key-marker=tree%2Fpacks%2Fa%20b&prefix=tree&versions=")
    }

    func testTheVersionsOfAListingAreReadWithTheirDeleteMarkers() {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>tree</Prefix>
            <KeyMarker></KeyMarker><VersionIdMarker></VersionIdMarker><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>
            <Version><Key>tree/packs/ra/p1</Key><VersionId>v-new</VersionId><IsLatest>true</IsLatest><Size>7</Size></Version>
            <DeleteMarker><Key>tree/packs/ra/p0</Key><VersionId>m-1</VersionId><IsLatest>true</IsLatest></DeleteMarker>
            <Version><Key>tree/packs/ra/p1</Key><VersionId>v-old</VersionId><IsLatest>false</IsLatest><Size>300000</Size></Version>
            <Version><Key>a &amp; b</Key><VersionId>null</VersionId><IsLatest>true</IsLatest><Size>1</Size></Version>
            <Version><Key></Key><VersionId>no-key</VersionId></Version>
            </ListVersionsResult>
            """
        let versions = S3Client.versions(in: xml)
        XCTAssertEqual(
            versions,
            [
                S3ObjectVersion(key: "a & b", versionID: "null", isLatest: true, isDeleteMarker: false, size: 1),
                S3ObjectVersion(key: "tree/packs/ra/p0", versionID: "m-1", isLatest: true, isDeleteMarker: true, size: 0),
                S3ObjectVersion(key: "tree/packs/ra/p1", versionID: "v-new", isLatest: true, isDeleteMarker: false, size: 7),
                S3ObjectVersion(key: "tree/packs/ra/p1", versionID: "v-old", isLatest: false, isDeleteMarker: false, size: 300000),
            ])
        XCTAssertEqual(S3XML.elements("Version", in: xml).count, 4, "<VersionId> and <VersionIdMarker> are not <Version>")
    }

    func testOnlyAVersionIDOfItsShapeIsRecorded() {
        XCTAssertEqual(S3Client.versionID("b1f2c3d4-0000-4000-8000-123456789abc"), "b1f2c3d4-0000-4000-8000-123456789abc")
        XCTAssertEqual(S3Client.versionID("3HL4kqtJ+rmSp/X="), "3HL4kqtJ+rmSp/X=")
        for refused in [nil, "", "null", "a b", "v\n1", "é", "v;1", String(repeating: "v", count: 1025)] {
            XCTAssertNil(S3Client.versionID(refused), "\(String(describing: refused))")
        }
        XCTAssert(S3Client.isVersionID(String(repeating: "v", count: 1024)))
        // The server's rule is the same one (docfs_record_pack).
        XCTAssertEqual(RemoteSchema.versionIDPattern, "^[A-Za-z0-9+/=._-]+$")
    }

    func testAMissingVersionIsNotFound() {
        let error = S3Error.fromResponse(
            status: 404, body: "<Error><Code>NoSuchVersion</Code><Message>gone</Message></Error>",
            operation: "GetObject k")
        XCTAssertEqual(error.kind, .notFound)
    }
}
