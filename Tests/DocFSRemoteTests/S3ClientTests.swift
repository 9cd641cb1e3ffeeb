import Crypto
import DocFSRemote
import Foundation
import SystemPackage
import XCTest

/// The S3 client against the moto server `make test` starts, which checks signatures (IAM
/// mode): a signing bug fails here even where AWS's worked examples pass.
final class S3ClientTests: XCTestCase {
    /// Runs `body` with a client and a new bucket; shuts the client down on every path.
    func withBucket(open: Bool = false, _ body: (S3Client, String) async throws -> Void) async throws {
        let env = try open ? RemoteTestEnvironment.openS3() : RemoteTestEnvironment.s3()
        let client = S3Client(endpoint: env.endpoint, credentials: env.credentials)
        let bucket = RemoteTestEnvironment.uniqueName("docfs-test")
        do {
            try await client.createBucket(bucket)
            try await body(client, bucket)
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    func writeRandomFile(_ url: URL, size: Int) throws -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: size)
        for i in stride(from: 0, to: size, by: 8) {
            let v = generator.next()
            for j in 0..<min(8, size - i) { bytes[i + j] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(j))) }
        }
        try Data(bytes).write(to: url)
        return bytes
    }

    func testCreateBucketTwiceIsFine() async throws {
        try await withBucket { client, bucket in
            try await client.createBucket(bucket)
        }
    }

    func testPutGetHeadListDeleteWithSignaturesChecked() async throws {
        try await checkKeys(
            ["plain.txt", "dir/with space.txt", "deep/a/b/c~d-e_f.g", "deep/x y"],
            deleting: "dir/with space.txt", prefix: "deep", open: false)
    }

    /// `+`, `&`, `=` and non-ASCII in keys, `/` in a listing's prefix: on the moto that checks no
    /// signatures, because moto's checker refuses even AWS's own SDK (boto3) for them: it rebuilds
    /// the URL unescaped before signing it again. The encoding itself is AWS's (SigV4Tests:
    /// `$` → `%24` in AWS's PUT example; per-segment UTF-8 percent-encoding in testKeysAreEncodedPerSegment).
    func testKeysWithPlusAmpersandEqualsAndNonASCII() async throws {
        try await checkKeys(
            [
                "plus+sign", "amp&and=equals", "dir+x/a&b=c d.txt", "ünïcødé/日本語 ファイル.txt",
                "ünïcødé/+&=.txt",
            ],
            deleting: "amp&and=equals", prefix: "ünïcødé/", open: true)
    }

    func checkKeys(_ keys: [String], deleting doomed: String, prefix: String, open: Bool) async throws {
        try await withBucket(open: open) { client, bucket in
            for (i, key) in keys.enumerated() {
                try await client.putObject(bucket: bucket, key: key, bytes: Array("content \(i) of \(key)".utf8))
            }
            for (i, key) in keys.enumerated() {
                let bytes = try await client.getObjectBytes(bucket: bucket, key: key)
                XCTAssertEqual(String(decoding: bytes, as: UTF8.self), "content \(i) of \(key)", key)
                let head = try await client.headObject(bucket: bucket, key: key)
                XCTAssertEqual(head.size, Int64(bytes.count), key)
            }
            let listed = try await client.listAllObjects(bucket: bucket)
            XCTAssertEqual(Set(listed.map(\.key)), Set(keys), "listed keys come back unescaped")
            let underPrefix = try await client.listAllObjects(bucket: bucket, prefix: prefix)
            XCTAssertEqual(Set(underPrefix.map(\.key)), Set(keys.filter { $0.hasPrefix(prefix) }))

            try await client.deleteObject(bucket: bucket, key: doomed)
            try await client.deleteObject(bucket: bucket, key: doomed) // again: still fine
            do {
                _ = try await client.headObject(bucket: bucket, key: doomed)
                XCTFail("HEAD of a deleted object succeeded")
            } catch let error as S3Error {
                XCTAssertEqual(error.kind, .notFound)
                XCTAssertFalse(error.isRetryable)
            }
            do {
                _ = try await client.getObjectBytes(bucket: bucket, key: "never there")
                XCTFail("GET of a missing object succeeded")
            } catch let error as S3Error {
                XCTAssertEqual(error.kind, .notFound)
                XCTAssertEqual(error.code, "NoSuchKey")
            }
        }
    }

    func testListingIsPaginated() async throws {
        try await withBucket { client, bucket in
            for i in 0..<5 { try await client.putObject(bucket: bucket, key: "p/\(i)", bytes: [UInt8(i)]) }
            try await client.putObject(bucket: bucket, key: "q", bytes: [9])
            let first = try await client.listObjects(bucket: bucket, prefix: "p", maxKeys: 2)
            XCTAssertEqual(first.objects.map(\.key), ["p/0", "p/1"])
            XCTAssertNotNil(first.continuationToken)
            let all = try await client.listAllObjects(bucket: bucket, prefix: "p", pageSize: 2)
            XCTAssertEqual(all.map(\.key), (0..<5).map { "p/\($0)" })
            XCTAssertEqual(all.map(\.size), Array(repeating: 1, count: 5))
        }
    }

    func testFileUploadAndRangeDownloadsStreamThroughFiles() async throws {
        let dir = try RemoteTestEnvironment.temporaryDirectory(self)
        let source = dir.appendingPathComponent("source")
        let bytes = try writeRandomFile(source, size: 1_000_003)
        try await withBucket { client, bucket in
            try await client.putObject(bucket: bucket, key: "one put", fileAt: FilePath(source.path))
            let whole = dir.appendingPathComponent("whole")
            let n = try await client.getObject(bucket: bucket, key: "one put", toFileAt: FilePath(whole.path))
            XCTAssertEqual(n, Int64(bytes.count))
            XCTAssertEqual(try Data(contentsOf: whole), Data(bytes))

            let part = dir.appendingPathComponent("part")
            try await client.getObject(bucket: bucket, key: "one put", range: 1000...1999, toFileAt: FilePath(part.path))
            XCTAssertEqual(try Data(contentsOf: part), Data(bytes[1000...1999]))
            // Chunks out of order into one file, each at its own offset: the file is the object.
            let chunks = dir.appendingPathComponent("chunks")
            XCTAssertTrue(FileManager.default.createFile(atPath: chunks.path, contents: nil))
            for start in stride(from: Int64(0), to: 1_000_003, by: 300_000).reversed() {
                let range = start..<min(1_000_003, start + 300_000)
                let written = try await client.getObject(bucket: bucket, key: "one put", range: range, intoFileAt: FilePath(chunks.path))
                XCTAssertEqual(written, Int64(range.count))
            }
            XCTAssertEqual(try Data(contentsOf: chunks), Data(bytes))
            let tail = try await client.getObjectBytes(bucket: bucket, key: "one put", range: 999_999...1_000_002)
            XCTAssertEqual(tail, Array(bytes[999_999...]))
            do {
                _ = try await client.getObjectBytes(bucket: bucket, key: "one put", range: 2_000_000...2_000_010)
                XCTFail("a range past the end succeeded")
            } catch let error as S3Error {
                XCTAssertEqual(error.kind, .invalidRange)
            }
        }
    }

    func testMultipartUploadOfALargeFileResumesAndLeavesNoUploadBehind() async throws {
        let dir = try RemoteTestEnvironment.temporaryDirectory(self)
        let source = dir.appendingPathComponent("big")
        let size = 12 * 1024 * 1024 + 12_345 // three parts of 5 MiB: 5, 5, 2.01
        let bytes = try writeRandomFile(source, size: size)
        let partSize: Int64 = 5 * 1024 * 1024
        try await withBucket { client, bucket in
            let key = "objects/big file 1"
            // Start by hand and send part 1 only, as if the process died after it.
            let uploadID = try await client.createMultipartUpload(bucket: bucket, key: key)
            let fd = try FileDescriptor.open(FilePath(source.path), .readOnly)
            let etag1 = try await client.uploadPart(
                bucket: bucket, key: key, uploadID: uploadID, partNumber: 1,
                fd: fd, offset: 0, length: partSize)
            try fd.close()
            let pending = try await client.listMultipartUploads(bucket: bucket)
            XCTAssertEqual(pending.map(\.key), [key])
            XCTAssertEqual(pending.map(\.uploadID), [uploadID])
            let parts = try await client.listParts(bucket: bucket, key: key, uploadID: uploadID)
            XCTAssertEqual(parts.map(\.number), [1])
            XCTAssertEqual(parts.first?.etag, etag1)
            XCTAssertEqual(parts.first?.size, partSize)

            // Resume: part 1 is not sent again; 2 and 3 are; the upload completes.
            try await client.uploadFile(
                at: FilePath(source.path), bucket: bucket, key: key, partSize: partSize,
                resumeUploadID: uploadID, uploadStarted: { _ in XCTFail("a new upload was started") })
            let remaining = try await client.listMultipartUploads(bucket: bucket)
            XCTAssertEqual(remaining, [])
            let head = try await client.headObject(bucket: bucket, key: key)
            XCTAssertEqual(head.size, Int64(size))
            XCTAssertTrue(head.etag?.contains("-3") ?? false, "a 3-part multipart ETag, got \(head.etag ?? "none")")
            let back = dir.appendingPathComponent("back")
            try await client.getObject(bucket: bucket, key: key, toFileAt: FilePath(back.path))
            XCTAssertEqual(SHA256.hash(data: try Data(contentsOf: back)), SHA256.hash(data: bytes))

            // A fresh upload of the same file: the callback sees the upload ID before any part.
            let started = UploadIDBox()
            try await client.uploadFile(
                at: FilePath(source.path), bucket: bucket, key: "objects/second", partSize: partSize,
                uploadStarted: { id in await started.set(id) })
            let startedID = await started.id
            XCTAssertNotNil(startedID)
            let again = try await client.headObject(bucket: bucket, key: "objects/second")
            XCTAssertEqual(again.size, Int64(size))

            // Abort drops an unfinished upload; aborting again is fine.
            let doomed = try await client.createMultipartUpload(bucket: bucket, key: "objects/doomed")
            try await client.abortMultipartUpload(bucket: bucket, key: "objects/doomed", uploadID: doomed)
            try await client.abortMultipartUpload(bucket: bucket, key: "objects/doomed", uploadID: doomed)
            let afterAbort = try await client.listMultipartUploads(bucket: bucket)
            XCTAssertEqual(afterAbort, [])
        }
    }

    /// Uploads and downloads stream: a 64 MiB file goes up in parts and comes back into a file
    /// while this process's peak resident memory grows by far less than the file.
    func testLargeTransfersKeepMemoryBounded() async throws {
        let dir = try RemoteTestEnvironment.temporaryDirectory(self)
        let source = dir.appendingPathComponent("large")
        let size = 64 * 1024 * 1024
        // Written a MiB at a time, so making the file does not raise the peak either.
        let handle = try FileHandle(
            forWritingTo: {
                FileManager.default.createFile(atPath: source.path, contents: nil); return source
            }())
        var hasher = SHA256()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<(size / (1 << 20)) {
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            for i in stride(from: 0, to: chunk.count, by: 8) {
                withUnsafeBytes(of: generator.next()) { chunk.replaceSubrange(i..<(i + 8), with: $0) }
            }
            hasher.update(data: chunk)
            try handle.write(contentsOf: chunk)
        }
        try handle.close()
        let sourceHash = hasher.finalize()
        try await withBucket { client, bucket in
            guard Self.resetPeakMemory() else { throw XCTSkip("cannot reset the peak RSS (/proc/self/clear_refs)") }
            let before = Self.memory("VmRSS")
            try await client.uploadFile(at: FilePath(source.path), bucket: bucket, key: "large", partSize: 8 * 1024 * 1024)
            let back = dir.appendingPathComponent("back")
            let n = try await client.getObject(bucket: bucket, key: "large", toFileAt: FilePath(back.path))
            let peakGrowth = Self.memory("VmHWM") - before
            print("S3ClientTests: peak RSS grew by \(peakGrowth / 1024) KiB for a 64 MiB upload and download")
            XCTAssertEqual(n, Int64(size))
            XCTAssertLessThan(peakGrowth, 24 * 1024 * 1024, "peak RSS grew by \(peakGrowth / 1024) KiB for a 64 MiB round trip")
            let head = try await client.headObject(bucket: bucket, key: "large")
            XCTAssertTrue(head.etag?.contains("-8") ?? false, "8 parts of 8 MiB, got \(head.etag ?? "none")")
            var backHasher = SHA256()
            let reader = try FileHandle(forReadingFrom: back)
            while let chunk = try reader.read(upToCount: 1 << 20), !chunk.isEmpty { backHasher.update(data: chunk) }
            try reader.close()
            XCTAssertEqual(backHasher.finalize(), sourceHash)
        }
    }

    /// Resets VmHWM to the current RSS (Linux: writing 5 to /proc/self/clear_refs).
    static func resetPeakMemory() -> Bool {
        guard let h = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
        defer { try? h.close() }
        return (try? h.write(contentsOf: Data("5".utf8))) != nil
    }

    /// A `/proc/self/status` line (`VmRSS`, `VmHWM`) in bytes.
    static func memory(_ field: String) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
            let kib = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return kib * 1024
        }
        return 0
    }

    func testAWrongSecretOrAnUnknownKeyIsAnAuthenticationErrorNotRetried() async throws {
        let env = try RemoteTestEnvironment.s3()
        let good = S3Client(endpoint: env.endpoint, credentials: env.credentials)
        let bucket = RemoteTestEnvironment.uniqueName("docfs-test")
        try await good.createBucket(bucket)
        try await good.shutdown()
        for credentials in [
            S3Credentials(accessKeyID: env.credentials.accessKeyID, secretAccessKey: "wrong" + env.credentials.secretAccessKey),
            S3Credentials(accessKeyID: "AKIANOSUCHKEY0000000", secretAccessKey: env.credentials.secretAccessKey),
        ] {
            let bad = S3Client(endpoint: env.endpoint, credentials: credentials)
            do {
                try await bad.putObject(bucket: bucket, key: "k", bytes: [1, 2, 3])
                XCTFail("a request with bad credentials succeeded")
            } catch let error as S3Error {
                XCTAssertEqual(error.kind, .authentication, "\(error)")
                XCTAssertEqual(error.status, 403)
                XCTAssertTrue(["SignatureDoesNotMatch", "InvalidAccessKeyId"].contains(error.code ?? ""), "\(error)")
                XCTAssertFalse(error.isRetryable)
                XCTAssertFalse("\(error)".contains(env.credentials.secretAccessKey), "the secret leaks into the message")
            } catch {
                XCTFail("unexpected \(error)")
            }
            try await bad.shutdown()
        }
    }

    func testAServerThatIsNotThereIsUnreachableAndRetryable() async throws {
        _ = try RemoteTestEnvironment.s3()
        // A loopback port nobody listens on (bound and released just now).
        let port = try Self.freeLoopbackPort()
        let client = S3Client(
            endpoint: S3Endpoint(url: "http://127.0.0.1:\(port)")!,
            credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"), connectTimeout: .seconds(2))
        do {
            _ = try await client.headObject(bucket: "bucket", key: "k")
            XCTFail("a request to a closed port succeeded")
        } catch let error as S3Error {
            XCTAssertTrue(error.kind == .unreachable || error.kind == .timeout, "\(error)")
            XCTAssertTrue(error.isRetryable)
        }
        try await client.shutdown()
    }

    static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw XCTSkip("could not find a free loopback port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

actor UploadIDBox {
    var id: String?
    func set(_ id: String) { self.id = id }
}
