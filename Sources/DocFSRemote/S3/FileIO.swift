import Crypto
import NIOCore
import NIOPosix
import SystemPackage

/// A byte range of an open file as an async sequence of buffers, read on NIO's blocking-I/O
/// thread pool (never on the cooperative pool), one chunk at a time: an upload holds at most a
/// chunk or two of the file in memory, whatever its size.
struct FileChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let fd: SystemPackage.FileDescriptor
    let offset: Int64
    let length: Int64
    var chunkSize: Int = 256 * 1024
    /// `--upload-limit`: each chunk's bytes are taken from it before the chunk goes.
    var limit: RateLimit? = nil

    struct AsyncIterator: AsyncIteratorProtocol {
        let fd: SystemPackage.FileDescriptor
        var position: Int64
        let end: Int64
        let chunkSize: Int
        let limit: RateLimit?

        mutating func next() async throws -> ByteBuffer? {
            guard position < end else { return nil }
            let count = Int(Swift.min(Int64(chunkSize), end - position))
            try await limit?.take(count)
            let fd = self.fd, at = position
            let buffer = try await NIOThreadPool.singleton.runIfActive { () throws -> ByteBuffer in
                var buffer = ByteBufferAllocator().buffer(capacity: count)
                var got = 0
                while got < count {
                    let n = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - got) { raw in
                        try fd.read(
                            fromAbsoluteOffset: at + Int64(got),
                            into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<(count - got)]))
                    }
                    if n == 0 { throw S3Error(kind: .rejected, message: "the file became shorter while it was uploaded") }
                    got += n
                }
                return buffer
            }
            position += Int64(count)
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(fd: fd, position: offset, end: offset + length, chunkSize: chunkSize, limit: limit)
    }
}

/// Bytes held in memory (a pack) as an async sequence of buffers, each slice copied only as it
/// goes out: a PUT costs its bytes and a slice or two, never a second whole copy.
struct ByteSlices: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let bytes: [UInt8]
    var sliceSize: Int = 256 * 1024

    struct AsyncIterator: AsyncIteratorProtocol {
        let bytes: [UInt8]
        var position: Int
        let sliceSize: Int

        mutating func next() async throws -> ByteBuffer? {
            guard position < bytes.count else { return nil }
            let end = Swift.min(position + sliceSize, bytes.count)
            defer { position = end }
            return ByteBuffer(bytes: bytes[position..<end])
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: bytes, position: 0, sliceSize: sliceSize) }
}

enum FileIO {
    /// SHA-256 of the first `size` bytes of an open file, read 1 MiB at a time on NIO's
    /// blocking-I/O pool; lowercase hex.
    static func sha256(of fd: SystemPackage.FileDescriptor, size: Int64) async throws -> String {
        try await NIOThreadPool.singleton.runIfActive {
            var hasher = SHA256()
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var offset: Int64 = 0
            while offset < size {
                let n = try buffer.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: offset, into: $0) }
                if n == 0 { break }
                hasher.update(data: buffer[0..<n])
                offset += Int64(n)
            }
            return hasher.finalize().map { String(format: "%02x", $0) }.joined()
        }
    }

    static func size(of fd: SystemPackage.FileDescriptor) async throws -> Int64 {
        try await NIOThreadPool.singleton.runIfActive { try fd.seek(offset: 0, from: SystemPackage.FileDescriptor.SeekOrigin.end) }
    }

    static func write(_ buffer: ByteBuffer, to fd: SystemPackage.FileDescriptor) async throws {
        try await NIOThreadPool.singleton.runIfActive {
            _ = try buffer.withUnsafeReadableBytes { try fd.writeAll($0) }
        }
    }
}
