import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import SystemPackage

// Multipart uploads: a large file goes up in parts of at least 5 MiB, and an upload cut short
// (a crash, a lost link) resumes by its upload ID, sending only the parts not yet there.
extension S3Client {
    package func createMultipartUpload(
        bucket: String, key: String,
        contentType: String = "application/octet-stream"
    ) async throws -> String {
        let xml = try await sendForText(
            .POST, bucket: bucket, key: key, query: [("uploads", "")],
            headers: [("Content-Type", contentType)],
            operation: "CreateMultipartUpload \(key)")
        guard let id = S3XML.text("UploadId", in: xml), !id.isEmpty else {
            throw S3Error(kind: .rejected, message: "CreateMultipartUpload \(key): no UploadId in the answer")
        }
        return id
    }

    /// Uploads one part (`length` bytes of `fd` from `offset`), streamed. Returns its ETag.
    package func uploadPart(
        bucket: String, key: String, uploadID: String, partNumber: Int,
        fd: SystemPackage.FileDescriptor, offset: Int64, length: Int64
    ) async throws -> String {
        let body = HTTPClientRequest.Body.stream(FileChunks(fd: fd, offset: offset, length: length, limit: uploadLimit), length: .known(length))
        let headers = try await sendDrained(
            .PUT, bucket: bucket, key: key,
            query: [("partNumber", String(partNumber)), ("uploadId", uploadID)],
            body: body, operation: "UploadPart \(partNumber) of \(key)")
        guard let etag = headers.first(name: "ETag") else {
            throw S3Error(kind: .rejected, message: "UploadPart \(partNumber) of \(key): no ETag in the answer")
        }
        return etag
    }

    /// Completes an upload from its parts (in part-number order). Returns the object's ETag.
    @discardableResult
    package func completeMultipartUpload(
        bucket: String, key: String, uploadID: String,
        parts: [(number: Int, etag: String)]
    ) async throws -> String? {
        var xml = "<CompleteMultipartUpload>"
        for part in parts.sorted(by: { $0.number < $1.number }) {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(S3XML.escape(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let bytes = Array(xml.utf8)
        let response = try await send(
            .POST, bucket: bucket, key: key, query: [("uploadId", uploadID)],
            headers: [("Content-Type", "application/xml")],
            body: .bytes(ByteBuffer(bytes: bytes)), length: Int64(bytes.count),
            payloadHash: SigV4Signer.sha256Hex(bytes),
            operation: "CompleteMultipartUpload \(key)")
        let text = try await Self.collectText(response, operation: "CompleteMultipartUpload \(key)")
        // S3 may answer 200 and put the error in the body.
        if text.contains("<Error>") {
            throw S3Error.fromResponse(status: 500, body: text, operation: "CompleteMultipartUpload \(key)")
        }
        return S3XML.text("ETag", in: text)
    }

    /// Aborts an upload and drops its parts; an upload that is already gone is fine.
    package func abortMultipartUpload(bucket: String, key: String, uploadID: String) async throws {
        do {
            try await sendDrained(
                .DELETE, bucket: bucket, key: key, query: [("uploadId", uploadID)],
                operation: "AbortMultipartUpload \(key)")
        } catch let error as S3Error where error.kind == .notFound {
            return
        }
    }

    /// The parts of an upload already on the server, page after page (to resume it).
    package func listParts(bucket: String, key: String, uploadID: String) async throws -> [S3Part] {
        var parts: [S3Part] = []
        var marker: String?
        repeat {
            var query: [(String, String)] = [("uploadId", uploadID)]
            if let marker { query.append(("part-number-marker", marker)) }
            let xml = try await sendForText(.GET, bucket: bucket, key: key, query: query, operation: "ListParts \(key)")
            for entry in S3XML.elements("Part", in: xml) {
                guard let number = S3XML.text("PartNumber", in: entry).flatMap({ Int($0) }),
                    let etag = S3XML.text("ETag", in: entry)
                else { continue }
                parts.append(
                    S3Part(
                        number: number, etag: etag,
                        size: S3XML.text("Size", in: entry).flatMap { Int64($0) } ?? 0,
                        lastModified: S3XML.text("LastModified", in: entry).flatMap(S3XML.date)))
            }
            let truncated = S3XML.text("IsTruncated", in: xml) == "true"
            marker = truncated ? S3XML.text("NextPartNumberMarker", in: xml) : nil
        } while marker != nil
        return parts
    }

    /// Uploads that were started and not finished, under a prefix (to resume or abort them).
    package func listMultipartUploads(bucket: String, prefix: String? = nil) async throws -> [S3PendingUpload] {
        var uploads: [S3PendingUpload] = []
        var markers: (key: String, upload: String)?
        repeat {
            var query: [(String, String)] = [("uploads", "")]
            if let prefix { query.append(("prefix", prefix)) }
            if let markers { query += [("key-marker", markers.key), ("upload-id-marker", markers.upload)] }
            let xml = try await sendForText(.GET, bucket: bucket, key: nil, query: query, operation: "ListMultipartUploads \(bucket)")
            uploads += S3XML.elements("Upload", in: xml).compactMap { entry in
                guard let key = S3XML.text("Key", in: entry), let id = S3XML.text("UploadId", in: entry) else { return nil }
                return S3PendingUpload(key: key, uploadID: id, initiated: S3XML.text("Initiated", in: entry).flatMap(S3XML.date))
            }
            markers = nil
            if S3XML.text("IsTruncated", in: xml) == "true", let key = S3XML.text("NextKeyMarker", in: xml),
                let upload = S3XML.text("NextUploadIdMarker", in: xml)
            {
                markers = (key, upload)
            }
        } while markers != nil
        return uploads
    }

    /// Uploads a file: one PUT below `partSize`, otherwise multipart with parts of `partSize`
    /// (at least 5 MiB; larger when the file would need more than 10,000 parts). Streams from
    /// disk either way. `resumeUploadID` continues an upload started earlier (parts already
    /// there with the right size are not sent again; an upload that is gone starts over);
    /// `uploadStarted` is called with the upload ID before the first part is sent, so that the
    /// caller can record it durably and resume or abort it after a crash; `partUploaded` after
    /// each part is in (the crash tests stop a replica there); `digest` hears the SHA-256 (hex)
    /// of the file as uploaded.
    @discardableResult
    package func uploadFile(
        at path: FilePath, bucket: String, key: String, partSize: Int64 = 8 * 1024 * 1024,
        resumeUploadID: String? = nil,
        uploadStarted: @Sendable (String) async throws -> Void = { _ in },
        partUploaded: @Sendable (Int) -> Void = { _ in },
        digest: (@Sendable (String) -> Void)? = nil
    ) async throws -> String? {
        try await withFile(path) { fd in
            let size = try await FileIO.size(of: fd)
            // The SHA-256 of the bytes sent: read from the same open file, before they go.
            if let digest { digest(try await FileIO.sha256(of: fd, size: size)) }
            var part = max(partSize, Self.minimumPartSize)
            if size > part * Int64(Self.maximumParts) { part = (size + Int64(Self.maximumParts) - 1) / Int64(Self.maximumParts) }
            if size <= part && resumeUploadID == nil {
                return try await putObject(bucket: bucket, key: key, fd: fd, offset: 0, length: size)
            }
            var uploadID = resumeUploadID
            var existing: [Int: S3Part] = [:]
            if let id = uploadID {
                do {
                    for p in try await listParts(bucket: bucket, key: key, uploadID: id) { existing[p.number] = p }
                } catch let error as S3Error where error.kind == .notFound {
                    uploadID = nil
                }
            }
            let id: String
            if let uploadID {
                id = uploadID
            } else {
                id = try await createMultipartUpload(bucket: bucket, key: key)
                try await uploadStarted(id)
            }
            let count = max(1, Int((size + part - 1) / part))
            var done: [(number: Int, etag: String)] = []
            for number in 1...count {
                let offset = Int64(number - 1) * part
                let length = min(part, size - offset)
                if let p = existing[number], p.size == length {
                    done.append((number, p.etag))
                    continue
                }
                let etag = try await uploadPart(
                    bucket: bucket, key: key, uploadID: id, partNumber: number,
                    fd: fd, offset: offset, length: length)
                done.append((number, etag))
                logger.debug("uploaded part", metadata: ["key": "\(key)", "part": "\(number)/\(count)"])
                partUploaded(number)
            }
            return try await completeMultipartUpload(bucket: bucket, key: key, uploadID: id, parts: done)
        }
    }
}
