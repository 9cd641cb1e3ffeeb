import CFuse
import Glibc
import XCTest
@testable import DocFSBridge

/// The INIT exchange as the kernel and libfuse 3.14 write it: the flag is added to the reply of
/// the INIT request that offered it, and nothing else is touched.
final class InitNegotiationTests: XCTestCase {
    private let killPriv = UInt32(FUSE_HANDLE_KILLPRIV_V2)

    /// fuse_in_header + fuse_init_in, as read from /dev/fuse.
    private func initRequest(unique: UInt64, major: UInt32 = 7, flags: UInt32, opcode: UInt32 = FUSE_INIT.rawValue) -> [UInt8] {
        var header = fuse_in_header()
        header.opcode = opcode
        header.unique = unique
        var body = fuse_init_in()
        body.major = major
        body.minor = 38
        body.flags = flags
        header.len = UInt32(MemoryLayout.size(ofValue: header) + MemoryLayout.size(ofValue: body))
        return withUnsafeBytes(of: header) { Array($0) } + withUnsafeBytes(of: body) { Array($0) }
    }

    /// Sends a reply (header + body) through amendReply; returns the flags the kernel would read.
    private func reply(
        _ n: InitNegotiation, unique: UInt64, error: Int32 = 0, flags: UInt32,
        bodySize: Int = MemoryLayout<fuse_init_out>.size
    ) -> UInt32 {
        var header = fuse_out_header(len: 0, error: error, unique: unique)
        var body = fuse_init_out()
        body.major = 7
        body.flags = flags
        return withUnsafeMutableBytes(of: &header) { h in
            withUnsafeMutableBytes(of: &body) { b in
                var iov = [
                    iovec(iov_base: h.baseAddress, iov_len: h.count),
                    iovec(iov_base: b.baseAddress, iov_len: min(bodySize, b.count)),
                ]
                iov.withUnsafeMutableBufferPointer { n.amendReply($0.baseAddress!, count: 2) }
                return b.load(fromByteOffset: 12, as: UInt32.self)
            }
        }
    }

    private func see(_ n: InitNegotiation, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { n.sawRequest($0.baseAddress!, length: $0.count) }
    }

    func testTheInitReplyGetsTheFlagTheKernelOffered() {
        let n = InitNegotiation()
        see(n, initRequest(unique: 2, flags: killPriv | 1))
        XCTAssertEqual(reply(n, unique: 3, flags: 0x10), 0x10, "another request's reply is untouched")
        XCTAssertEqual(reply(n, unique: 2, flags: 0x10), 0x10 | killPriv)
        XCTAssertTrue(n.granted.load(ordering: .relaxed))
        XCTAssertEqual(reply(n, unique: 2, flags: 0x10), 0x10, "only once")
    }

    func testNothingIsAskedForThatTheKernelDidNotOffer() {
        let n = InitNegotiation()
        see(n, initRequest(unique: 2, flags: 1))
        XCTAssertEqual(reply(n, unique: 2, flags: 0x10), 0x10)
        XCTAssertFalse(n.granted.load(ordering: .relaxed))
    }

    func testOtherRequestsErrorRepliesAndShortRepliesAreLeftAlone() {
        let n = InitNegotiation()
        see(n, initRequest(unique: 5, flags: killPriv, opcode: FUSE_GETATTR.rawValue))
        XCTAssertEqual(reply(n, unique: 5, flags: 0), 0, "not an INIT request")
        see(n, initRequest(unique: 6, major: 8, flags: killPriv))
        XCTAssertEqual(reply(n, unique: 6, flags: 0), 0, "a major version libfuse must first negotiate")
        see(n, initRequest(unique: 7, flags: killPriv))
        XCTAssertEqual(reply(n, unique: 7, error: -EPROTO, flags: 0), 0, "an error reply")
        see(n, initRequest(unique: 8, flags: killPriv))
        XCTAssertEqual(reply(n, unique: 8, flags: 0, bodySize: 8), 0, "a reply without a flags field")
        see(n, Array(initRequest(unique: 9, flags: killPriv).prefix(40)))
        XCTAssertEqual(reply(n, unique: 9, flags: 0), 0, "a truncated request")
        XCTAssertFalse(n.granted.load(ordering: .relaxed))
    }
}
