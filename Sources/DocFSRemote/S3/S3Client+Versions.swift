import AsyncHTTPClient
import Foundation
import NIOCore

/// One version of an object, as ListObjectVersions shows it (a delete marker too).
package struct S3ObjectVersion: Sendable, Equatable {
    package var key: String
    package var versionID: String
    package var isLatest: Bool
    package var isDeleteMarker: Bool
    package var size: Int64
}

/// What a PUT answered: the object's ETag and, in a bucket with versioning on, the id of the
/// version it made (nil: the bucket keeps no versions).
package struct S3Written: Sendable, Equatable {
    package var etag: String?
    package var versionID: String?
}

// Bucket versioning (schema 18): every PUT of a pack makes a version of its own, which no
// replica's keys may delete, and the pack's readers ask for the version recorded with it. A
// replica that PUTs over its own pack key makes another version; the recorded one stays as it was.
extension S3Client {
    /// Uploads bytes held in memory; answers the version the PUT made (packs).
    package func putNewObject(
        bucket: String, key: String, bytes: [UInt8],
        contentType: String = "application/octet-stream"
    ) async throws -> S3Written {
        // Packs go up in one request: `--upload-limit` is paid before it (the rate over a
        // transfer of several packs holds; one pack bursts).
        try await uploadLimit?.take(bytes.count)
        let headers = try await sendDrained(
            .PUT, bucket: bucket, key: key, headers: [("Content-Type", contentType)],
            body: .stream(ByteSlices(bytes: bytes), length: .known(Int64(bytes.count))),
            length: Int64(bytes.count),
            payloadHash: SigV4Signer.sha256Hex(bytes), operation: "PutObject \(key)")
        return S3Written(etag: headers.first(name: "ETag"), versionID: Self.versionID(headers.first(name: "x-amz-version-id")))
    }

    /// The `x-amz-version-id` of an answer as a version to record: nil when absent, "null" (a
    /// bucket whose versioning is suspended: that version is overwritten by the next PUT) or not
    /// of a version id's shape (`isVersionID`).
    package static func versionID(_ header: String?) -> String? {
        guard let header, header != "null", isVersionID(header) else { return nil }
        return header
    }

    /// A version id as S3-compatible servers write them: 1 to 1024 characters of letters,
    /// digits and `+ / = . _ -` (AWS's are base64-like; MinIO's and moto's are UUIDs). The
    /// server's `docfs_record_pack` holds the same rule.
    package static func isVersionID(_ text: String) -> Bool {
        (1...1024).contains(text.utf8.count) && text != "null"
            && text.utf8.allSatisfy { c in
                (0x30...0x39).contains(c) || (0x41...0x5A).contains(c) || (0x61...0x7A).contains(c)
                    || c == 0x2B || c == 0x2F || c == 0x3D || c == 0x2E || c == 0x5F || c == 0x2D
            }
    }

    /// Turns versioning on for the bucket (PutBucketVersioning `Enabled`); on already is fine.
    package func enableVersioning(bucket: String) async throws {
        let bytes = Array(Self.versioningConfiguration.utf8)
        try await sendDrained(
            .PUT, bucket: bucket, key: nil, query: [("versioning", "")],
            headers: [("Content-Type", "application/xml")],
            body: .bytes(ByteBuffer(bytes: bytes)), length: Int64(bytes.count),
            payloadHash: SigV4Signer.sha256Hex(bytes), operation: "PutBucketVersioning \(bucket)")
    }

    static let versioningConfiguration =
        #"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#

    /// Whether the bucket keeps versions (GetBucketVersioning says `Enabled`).
    package func versioningEnabled(bucket: String) async throws -> Bool {
        let xml = try await sendForText(
            .GET, bucket: bucket, key: nil, query: [("versioning", "")],
            operation: "GetBucketVersioning \(bucket)")
        return S3XML.text("Status", in: xml) == "Enabled"
    }

    /// Every version and delete marker under `prefix`, page after page, in key order.
    package func listObjectVersions(bucket: String, prefix: String? = nil) async throws -> [S3ObjectVersion] {
        var all: [S3ObjectVersion] = []
        var markers: (key: String, version: String?)?
        repeat {
            var query: [(String, String)] = [("versions", "")]
            if let prefix { query.append(("prefix", prefix)) }
            if let markers {
                query.append(("key-marker", markers.key))
                if let version = markers.version { query.append(("version-id-marker", version)) }
            }
            let xml = try await sendForText(.GET, bucket: bucket, key: nil, query: query, operation: "ListObjectVersions \(bucket)")
            all += Self.versions(in: xml)
            markers = nil
            if S3XML.text("IsTruncated", in: xml) == "true", let key = S3XML.text("NextKeyMarker", in: xml) {
                markers = (key, S3XML.text("NextVersionIdMarker", in: xml))
            }
        } while markers != nil
        return all
    }

    /// The versions and delete markers of one ListVersionsResult page.
    static func versions(in xml: String) -> [S3ObjectVersion] {
        func entry(_ e: Substring, marker: Bool) -> S3ObjectVersion? {
            guard let key = S3XML.text("Key", in: e), let id = S3XML.text("VersionId", in: e), !key.isEmpty, !id.isEmpty else { return nil }
            return S3ObjectVersion(
                key: key, versionID: id, isLatest: S3XML.text("IsLatest", in: e) == "true",
                isDeleteMarker: marker, size: S3XML.text("Size", in: e).flatMap { Int64($0) } ?? 0)
        }
        let found =
            S3XML.elements("Version", in: xml).compactMap { entry($0, marker: false) }
            + S3XML.elements("DeleteMarker", in: xml).compactMap { entry($0, marker: true) }
        return found.sorted { $0.key < $1.key }
    }

    /// Deletes one version of an object (or a delete marker) for good; one already gone is fine.
    /// "null" is the version a bucket without versioning has.
    package func deleteObjectVersion(bucket: String, key: String, versionID: String) async throws {
        do {
            try await sendDrained(
                .DELETE, bucket: bucket, key: key, query: [("versionId", versionID)],
                operation: "DeleteObject \(key) version \(versionID)")
        } catch let error as S3Error where error.kind == .notFound {
            return
        }
    }
}
