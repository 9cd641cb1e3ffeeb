import AsyncHTTPClient
import Foundation
import Synchronization
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SystemPackage

/// Where an S3-compatible server answers. Path-style addressing (`http://HOST:PORT/BUCKET/KEY`).
package struct S3Endpoint: Sendable, Equatable {
    package var scheme: String
    package var host: String
    package var port: Int

    /// `http://127.0.0.1:9000` and the like. nil for anything that is not http(s)://HOST[:PORT].
    package init?(url: String) {
        guard let u = URLComponents(string: url), let scheme = u.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = u.host, !host.isEmpty, u.path.isEmpty || u.path == "/"
        else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = u.port ?? (scheme == "https" ? 443 : 80)
    }

    /// AWS itself, path-style: `https://s3.REGION.amazonaws.com`.
    package static func aws(region: String) -> S3Endpoint { S3Endpoint(url: "https://s3.\(region).amazonaws.com")! }

    /// The `host` header exactly as sent and signed: the port only when it is not the scheme's default.
    package var hostHeader: String {
        let defaultPort = scheme == "https" ? 443 : 80
        let h = host.contains(":") ? "[\(host)]" : host
        return port == defaultPort ? h : "\(h):\(port)"
    }

    var base: String { "\(scheme)://\(hostHeader)" }
}

/// One object as a listing or HEAD shows it.
package struct S3Object: Sendable, Equatable {
    package var key: String
    package var size: Int64
    package var etag: String?
    /// When the object was written (listings only; `docfs remote gc` spares recent ones).
    package var lastModified: Date? = nil
}

/// One page of ListObjectsV2.
package struct S3ListPage: Sendable {
    package var objects: [S3Object]
    /// Pass it back to get the next page; nil on the last one.
    package var continuationToken: String?
    /// With a delimiter: the "folders" of the level (keys cut after the delimiter), each once.
    package var commonPrefixes: [String] = []
}

/// A part already on the server, as ListParts shows it.
package struct S3Part: Sendable, Equatable {
    package var number: Int
    package var etag: String
    package var size: Int64
    /// When it was uploaded (nil if the server did not say).
    package var lastModified: Date? = nil
}

/// A multipart upload that was started and neither completed nor aborted.
package struct S3PendingUpload: Sendable, Equatable {
    package var key: String
    package var uploadID: String
    /// When it was started (nil if the server did not say; moto always says 2010-11-10).
    package var initiated: Date?
    package init(key: String, uploadID: String, initiated: Date? = nil) {
        self.key = key
        self.uploadID = uploadID
        self.initiated = initiated
    }
}

/// An S3 client on async-http-client with our own Signature V4 (no S3 SDK for Swift is available
/// on our machines). Every body is streamed: uploads read the file a chunk at a time, downloads
/// write each chunk as it arrives.
///
/// Call `shutdown()` when done (async-http-client requires it on every exit path).
package final class S3Client: Sendable {
    package static let minimumPartSize: Int64 = 5 * 1024 * 1024
    package static let maximumParts = 10_000

    package let endpoint: S3Endpoint
    /// The signer, with credentials replaced when `renewCredentials` finds new ones.
    let signerState: Mutex<SigV4Signer>
    var signer: SigV4Signer { signerState.withLock { $0 } }
    /// Reads the credentials again (from where they came): asked when the server refuses the
    /// ones in use as unknown or expired.
    let renewCredentials: (@Sendable () -> S3Credentials?)?
    /// `docfs mount --upload-limit` / `--download-limit`: bytes per second for all transfers.
    let uploadLimit: RateLimit?
    let downloadLimit: RateLimit?
    let http: HTTPClient
    let logger: Logger
    /// How long one request may take from start to the end of its answer's head.
    let requestTimeout: TimeAmount

    package init(
        endpoint: S3Endpoint, credentials: S3Credentials, region: String = "us-east-1",
        connectTimeout: TimeAmount = .seconds(10), readTimeout: TimeAmount = .seconds(60),
        requestTimeout: TimeAmount = .minutes(30), logger: Logger = Logger(label: "docfs.s3"),
        renewCredentials: (@Sendable () -> S3Credentials?)? = nil, caFile: String? = nil,
        uploadLimit: RateLimit? = nil, downloadLimit: RateLimit? = nil
    ) {
        self.uploadLimit = uploadLimit
        self.downloadLimit = downloadLimit
        self.endpoint = endpoint
        self.signerState = Mutex(SigV4Signer(credentials: credentials, region: region, service: "s3"))
        self.renewCredentials = renewCredentials
        self.logger = logger
        self.requestTimeout = requestTimeout
        var config = HTTPClient.Configuration(timeout: .init(connect: connectTimeout, read: readTimeout))
        config.decompression = .disabled
        config.redirectConfiguration = .disallow
        if let caFile {
            // A private CA (`--s3-ca`, AWS_CA_BUNDLE): it alone is trusted, as with the AWS tools.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(caFile)
            config.tlsConfiguration = tls
        }
        self.http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: config)
    }

    package func shutdown() async throws {
        try await http.shutdown()
    }

    // MARK: Buckets

    /// Creates the bucket; a bucket that already exists and is ours is fine.
    package func createBucket(_ bucket: String) async throws {
        do {
            try await sendDrained(.PUT, bucket: bucket, key: nil, operation: "CreateBucket \(bucket)")
        } catch let error as S3Error where error.code == "BucketAlreadyOwnedByYou" {
            return
        }
    }

    // MARK: Objects

    /// Uploads a whole file in one PUT, streamed from disk. Returns the ETag.
    @discardableResult
    package func putObject(
        bucket: String, key: String, fileAt path: FilePath,
        contentType: String = "application/octet-stream"
    ) async throws -> String? {
        try await withFile(path) { fd in
            let size = try await FileIO.size(of: fd)
            return try await putObject(bucket: bucket, key: key, fd: fd, offset: 0, length: size, contentType: contentType)
        }
    }

    /// Uploads `length` bytes of an open file from `offset` in one PUT. Returns the ETag.
    @discardableResult
    package func putObject(
        bucket: String, key: String, fd: SystemPackage.FileDescriptor, offset: Int64, length: Int64,
        contentType: String = "application/octet-stream"
    ) async throws -> String? {
        let body = HTTPClientRequest.Body.stream(FileChunks(fd: fd, offset: offset, length: length, limit: uploadLimit), length: .known(length))
        let headers = try await sendDrained(
            .PUT, bucket: bucket, key: key, headers: [("Content-Type", contentType)],
            body: body, operation: "PutObject \(key)")
        return headers.first(name: "ETag")
    }

    /// Uploads bytes held in memory (small objects: tests, markers). Returns the ETag.
    @discardableResult
    package func putObject(
        bucket: String, key: String, bytes: [UInt8],
        contentType: String = "application/octet-stream"
    ) async throws -> String? {
        try await putNewObject(bucket: bucket, key: key, bytes: bytes, contentType: contentType).etag
    }

    /// Downloads an object (or `range`, inclusive byte offsets) into a file, created or truncated,
    /// streaming each chunk to disk as it arrives. Returns the number of bytes written.
    @discardableResult
    package func getObject(
        bucket: String, key: String, range: ClosedRange<Int64>? = nil,
        toFileAt path: FilePath, progress: (@Sendable (Int64) -> Void)? = nil
    ) async throws -> Int64 {
        let fd = try await NIOThreadPool.singleton.runIfActive {
            try SystemPackage.FileDescriptor.open(path, .writeOnly, options: [.create, .truncate], permissions: [.ownerReadWrite])
        }
        do {
            let n = try await getObject(bucket: bucket, key: key, range: range, into: fd, progress: progress)
            try fd.close()
            return n
        } catch {
            try? fd.close()
            throw error
        }
    }

    /// Downloads an object (or a range) and writes it at the current position of `fd`;
    /// `progress` hears the bytes written so far after each chunk (a reader waits on them).
    @discardableResult
    package func getObject(
        bucket: String, key: String, range: ClosedRange<Int64>? = nil,
        into fd: SystemPackage.FileDescriptor, progress: (@Sendable (Int64) -> Void)? = nil
    ) async throws -> Int64 {
        var headers: [(String, String)] = []
        if let range { headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        let response = try await send(.GET, bucket: bucket, key: key, headers: headers, operation: "GetObject \(key)")
        var keepGoing: (@Sendable (Int64) -> Bool)?
        if let progress {
            keepGoing = { n in
                progress(n); return true
            }
        }
        return try await receive(response, into: fd, progress: keepGoing, operation: "GetObject \(key)")
    }

    /// Downloads bytes `range` of an object into the existing file at `path`, at the same offsets
    /// (a part of a download that fetches parts in any order); returns the bytes written.
    /// `progress` hears the bytes written so far after each piece and answers false to stop
    /// there (the request is dropped). A server that ignores the range and sends the whole
    /// object is refused, not written.
    @discardableResult
    package func getObject(
        bucket: String, key: String, range: Range<Int64>, intoFileAt path: FilePath,
        progress: (@Sendable (Int64) -> Bool)? = nil
    ) async throws -> Int64 {
        guard !range.isEmpty else { return 0 }
        let operation = "GetObject \(key) bytes \(range.lowerBound)-\(range.upperBound - 1)"
        let fd = try await NIOThreadPool.singleton.runIfActive {
            let fd = try SystemPackage.FileDescriptor.open(path, .writeOnly, options: [], permissions: nil)
            do { try fd.seek(offset: range.lowerBound, from: .start) } catch { try? fd.close(); throw error }
            return fd
        }
        do {
            let response = try await send(
                .GET, bucket: bucket, key: key, headers: [("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")],
                operation: operation)
            if response.status.code != 206 {
                throw S3Error(
                    kind: .rejected, status: Int(response.status.code),
                    message: "\(operation): the server answered \(response.status.code), not 206 (it ignored the range)")
            }
            let n = try await receive(response, into: fd, progress: progress, operation: operation)
            try fd.close()
            return n
        } catch {
            try? fd.close()
            throw error
        }
    }

    /// Writes a response's body at the current position of `fd`, chunk by chunk as it arrives.
    private func receive(
        _ response: HTTPClientResponse, into fd: SystemPackage.FileDescriptor,
        progress: (@Sendable (Int64) -> Bool)?, operation: String
    ) async throws -> Int64 {
        var written: Int64 = 0
        do {
            for try await chunk in response.body {
                try await downloadLimit?.take(chunk.readableBytes)
                try await FileIO.write(chunk, to: fd)
                written += Int64(chunk.readableBytes)
                // Leaving the loop drops the body: the client closes that connection.
                if let progress, !progress(written) { break }
            }
        } catch {
            throw Self.map(error, operation: operation)
        }
        return written
    }

    /// Downloads a small object (or a range) into memory (packs' blocks, the tree marker).
    /// `versionID`: that version of the object, not whichever is current (schema 18: a pack's
    /// version recorded with it; a version that is gone is `notFound`).
    package func getObjectBytes(
        bucket: String, key: String, versionID: String? = nil, range: ClosedRange<Int64>? = nil,
        upTo limit: Int = 16 * 1024 * 1024
    ) async throws -> [UInt8] {
        var headers: [(String, String)] = []
        if let range { headers.append(("Range", "bytes=\(range.lowerBound)-\(range.upperBound)")) }
        let query = versionID.map { [("versionId", $0)] } ?? []
        let response = try await send(.GET, bucket: bucket, key: key, query: query, headers: headers, operation: "GetObject \(key)")
        do {
            // Chunk by chunk as they arrive, so that `--download-limit` paces packs' blocks too.
            var out: [UInt8] = []
            if let range { out.reserveCapacity(Int(min(Int64(limit), range.upperBound - range.lowerBound + 1))) }
            for try await chunk in response.body {
                try await downloadLimit?.take(chunk.readableBytes)
                guard out.count + chunk.readableBytes <= limit else {
                    throw S3Error(kind: .rejected, message: "GetObject \(key): more than \(limit) bytes")
                }
                out.append(contentsOf: chunk.readableBytesView)
            }
            return out
        } catch {
            throw Self.map(error, operation: "GetObject \(key)")
        }
    }

    /// Size and ETag of an object; `S3Error.Kind.notFound` when there is none.
    package func headObject(bucket: String, key: String) async throws -> S3Object {
        let headers = try await sendDrained(.HEAD, bucket: bucket, key: key, operation: "HeadObject \(key)")
        let size = headers.first(name: "Content-Length").flatMap { Int64($0) } ?? 0
        return S3Object(key: key, size: size, etag: headers.first(name: "ETag"))
    }

    /// Deletes an object; deleting one that is not there succeeds, as in S3.
    package func deleteObject(bucket: String, key: String) async throws {
        try await sendDrained(.DELETE, bucket: bucket, key: key, operation: "DeleteObject \(key)")
    }

    /// One page of ListObjectsV2 (keys XML-unescaped); with `delimiter`, one level of it.
    package func listObjects(
        bucket: String, prefix: String? = nil, delimiter: String? = nil, continuationToken: String? = nil,
        maxKeys: Int = 1000
    ) async throws -> S3ListPage {
        var query: [(String, String)] = [("list-type", "2"), ("max-keys", String(maxKeys))]
        if let prefix { query.append(("prefix", prefix)) }
        if let delimiter { query.append(("delimiter", delimiter)) }
        if let continuationToken { query.append(("continuation-token", continuationToken)) }
        let xml = try await sendForText(.GET, bucket: bucket, key: nil, query: query, operation: "ListObjectsV2 \(bucket)")
        let objects = S3XML.elements("Contents", in: xml).map { entry in
            S3Object(
                key: S3XML.text("Key", in: entry) ?? "",
                size: S3XML.text("Size", in: entry).flatMap { Int64($0) } ?? 0,
                etag: S3XML.text("ETag", in: entry),
                lastModified: S3XML.text("LastModified", in: entry).flatMap(S3XML.date))
        }
        let truncated = S3XML.text("IsTruncated", in: xml) == "true"
        let folders = S3XML.elements("CommonPrefixes", in: xml).compactMap { S3XML.text("Prefix", in: $0) }
        return S3ListPage(
            objects: objects, continuationToken: truncated ? S3XML.text("NextContinuationToken", in: xml) : nil,
            commonPrefixes: folders)
    }

    /// Every object under a prefix, page after page.
    package func listAllObjects(bucket: String, prefix: String? = nil, pageSize: Int = 1000) async throws -> [S3Object] {
        var all: [S3Object] = []
        var token: String?
        repeat {
            let page = try await listObjects(bucket: bucket, prefix: prefix, continuationToken: token, maxKeys: pageSize)
            all += page.objects
            token = page.continuationToken
        } while token != nil
        return all
    }

    // MARK: Requests

    func withFile<T>(_ path: FilePath, _ body: (SystemPackage.FileDescriptor) async throws -> T) async throws -> T {
        let fd = try await NIOThreadPool.singleton.runIfActive { try SystemPackage.FileDescriptor.open(path, .readOnly) }
        defer { try? fd.close() }
        return try await body(fd)
    }

    /// Signs and sends a request; answers outside 2xx become `S3Error`s.
    func send(
        _ method: HTTPMethod, bucket: String, key: String?, query: [(String, String)] = [],
        headers: [(String, String)] = [], body: HTTPClientRequest.Body? = nil, length: Int64? = nil,
        payloadHash: String? = nil, operation: String, mayRenew: Bool = true
    ) async throws -> HTTPClientResponse {
        let path = S3Path.objectPath(bucket: bucket, key: key)
        let signer = self.signer
        let canonicalQuery = SigV4Signer.canonicalQuery(query)
        var toSign: [(name: String, value: String)] = [("host", endpoint.hostHeader)]
        for (name, value) in headers { toSign.append((name, value)) }
        let hash = payloadHash ?? (body == nil ? SigV4Signer.emptyPayloadHash : SigV4Signer.unsignedPayload)
        let signed = signer.sign(
            method: method.rawValue, canonicalURI: path, query: query, headers: toSign,
            payloadHash: hash, amzDate: SigV4Signer.amzDate(for: Date()))
        var request = HTTPClientRequest(url: endpoint.base + path + (canonicalQuery.isEmpty ? "" : "?" + canonicalQuery))
        request.method = method
        for (name, value) in signed.headers { request.headers.add(name: name, value: value) }
        if let body {
            request.body = body
            if let length { request.headers.replaceOrAdd(name: "Content-Length", value: String(length)) }
        }
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, deadline: .now() + requestTimeout, logger: logger)
        } catch {
            throw Self.map(error, operation: operation)
        }
        let status = Int(response.status.code)
        guard (200..<300).contains(status) else {
            let text = (try? await Self.collectText(response, operation: operation)) ?? ""
            var error = S3Error.fromResponse(status: status, body: text, operation: operation)
            logger.debug("S3 error", metadata: ["error": "\(error)"])
            if mayRenew, error.meansStaleCredentials, renewed(from: signer.credentials) {
                // New keys (a rotated key, a new session): a request without a body goes again at
                // once; one with a body is sent again by its caller, which retries it soon.
                if body == nil {
                    return try await send(
                        method, bucket: bucket, key: key, query: query, headers: headers, body: nil,
                        length: length, payloadHash: payloadHash, operation: operation, mayRenew: false)
                }
                error.credentialsRenewed = true
            }
            throw error
        }
        return response
    }

    /// Reads the credentials again; true when they differ from `used` (and now sign requests).
    private func renewed(from used: S3Credentials) -> Bool {
        guard let renewCredentials, let fresh = renewCredentials() else { return false }
        return signerState.withLock { signer in
            let current = signer.credentials
            guard
                fresh.accessKeyID != current.accessKeyID || fresh.secretAccessKey != current.secretAccessKey
                    || fresh.sessionToken != current.sessionToken
            else {
                // Another request renewed them already: this one failed with the old ones.
                return used.accessKeyID != current.accessKeyID || used.sessionToken != current.sessionToken
            }
            signer.credentials = fresh
            return true
        }
    }

    /// Sends a request whose answer body does not matter and reads that body to its end, so that
    /// the connection goes back to the pool instead of being closed. Returns the answer's headers.
    @discardableResult
    func sendDrained(
        _ method: HTTPMethod, bucket: String, key: String?, query: [(String, String)] = [],
        headers: [(String, String)] = [], body: HTTPClientRequest.Body? = nil, length: Int64? = nil,
        payloadHash: String? = nil, operation: String
    ) async throws -> HTTPHeaders {
        let response = try await send(
            method, bucket: bucket, key: key, query: query, headers: headers, body: body,
            length: length, payloadHash: payloadHash, operation: operation)
        _ = try await Self.collectText(response, operation: operation)
        return response.headers
    }

    func sendForText(
        _ method: HTTPMethod, bucket: String, key: String?, query: [(String, String)] = [],
        headers: [(String, String)] = [], operation: String
    ) async throws -> String {
        let response = try await send(method, bucket: bucket, key: key, query: query, headers: headers, operation: operation)
        return try await Self.collectText(response, operation: operation)
    }

    static func collectText(_ response: HTTPClientResponse, operation: String) async throws -> String {
        do {
            let buffer = try await response.body.collect(upTo: 64 * 1024 * 1024)
            return String(buffer: buffer)
        } catch {
            throw map(error, operation: operation)
        }
    }

    /// Transport errors: timeouts and unreachable servers (both retryable); S3Errors pass through.
    static func map(_ error: any Error, operation: String) -> any Error {
        if error is S3Error || error is CancellationError { return error }
        if let e = error as? HTTPClientError {
            let timeouts: [HTTPClientError] = [
                .connectTimeout, .readTimeout, .writeTimeout, .deadlineExceeded,
                .getConnectionFromPoolTimeout, .tlsHandshakeTimeout,
            ]
            let refusals: [HTTPClientError] = [.bodyLengthMismatch, .invalidURL, .emptyHost, .emptyScheme]
            if timeouts.contains(e) { return S3Error(kind: .timeout, message: "\(operation): \(e)") }
            if e == .cancelled { return CancellationError() }
            if refusals.contains(e) { return S3Error(kind: .rejected, message: "\(operation): \(e)") }
            return S3Error(kind: .unreachable, message: "\(operation): \(e)")
        }
        if error is NIOSSLError || error is NIOSSLExtraError || "\(error)".contains("CERTIFICATE_VERIFY_FAILED") {
            return S3Error(
                kind: .untrusted, message: "\(operation): the server's certificate is not trusted (\(error)): give --s3-ca FILE or AWS_CA_BUNDLE")
        }
        if error is ChannelError || error is IOError || error is NIOConnectionError {
            return S3Error(kind: .unreachable, message: "\(operation): \(error)")
        }
        // DNS failures and other socket-level errors land here too.
        return S3Error(kind: .unreachable, message: "\(operation): \(error)")
    }
}
