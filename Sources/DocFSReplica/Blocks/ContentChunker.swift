import Crypto

/// Where a file's contents are cut into blocks: content-defined (FastCDC's gear hash with
/// normalized chunking), so that an insert, an append or an edit in the middle of a large file
/// moves only the boundaries around it and the other blocks keep their hashes (and are not
/// uploaded again). Files below `wholeBelow` are one block each (packed with others).
///
/// A boundary depends only on the bytes before it (from the previous boundary), so the same
/// bytes are cut the same way by every replica and every run.
package struct ContentChunker: Sendable {
    package let minimum: Int
    package let average: Int
    package let maximum: Int
    /// Below `average` a boundary needs more zero bits (fewer small blocks), past it fewer
    /// (fewer cut at `maximum`): FastCDC's normalization, level 2. The bits tested are the top
    /// ones, which depend on the last 64 bytes (the low ones only on the last few).
    private let maskSmall: UInt64
    private let maskLarge: UInt64

    /// Files smaller than this are one block.
    package static let wholeBelow = 1 << 20

    package static let standard = ContentChunker(minimum: 256 << 10, average: 1 << 20, maximum: 4 << 20)

    package init(minimum: Int, average: Int, maximum: Int) {
        precondition(0 < minimum && minimum < average && average < maximum && average.nonzeroBitCount == 1)
        self.minimum = minimum
        self.average = average
        self.maximum = maximum
        let bits = average.trailingZeroBitCount
        maskSmall = ~(UInt64.max >> UInt64(bits + 2))
        maskLarge = ~(UInt64.max >> UInt64(max(1, bits - 2)))
    }

    /// The length of the first block of `bytes`; nil when more bytes are needed to tell
    /// (`atEnd`: nothing follows them; an empty buffer at the end is no block: 0).
    package func cut(_ bytes: UnsafeRawBufferPointer, atEnd: Bool) -> Int? {
        let n = bytes.count
        if n <= minimum { return atEnd ? n : nil }
        let limit = min(n, maximum)
        let normal = min(limit, average)
        var hash: UInt64 = 0
        var i = minimum
        let found: Int? = Self.gear.withUnsafeBufferPointer { gear -> Int? in
            while i < normal {
                hash = (hash << 1) &+ gear[Int(bytes[i])]
                i += 1
                if hash & maskSmall == 0 { return i }
            }
            while i < limit {
                hash = (hash << 1) &+ gear[Int(bytes[i])]
                i += 1
                if hash & maskLarge == 0 { return i }
            }
            return nil
        }
        if let found { return found }
        if limit == maximum { return maximum }
        return atEnd ? n : nil
    }

    /// 256 fixed pseudo-random words (splitmix64 from a fixed seed): every docfs cuts alike.
    static let gear: [UInt64] = {
        var state: UInt64 = 0x646f_6366_735f_6364
        return (0..<256).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }()
}

/// A block's name: the SHA-256 of its bytes, in lowercase hex.
package enum BlockHash {
    package static func of(_ bytes: UnsafeRawBufferPointer) -> String {
        hex(SHA256.hash(data: bytes))
    }

    /// What a manifest holds, for its key: 16 hex digits of the SHA-256 of its size and its
    /// blocks' hashes in order.
    package static func ofManifest(size: Int64, hashes: [String]) -> String {
        var hasher = SHA256()
        hasher.update(data: Array("\(size)\n".utf8))
        for hash in hashes { hasher.update(data: Array(hash.utf8)) }
        return String(hex(hasher.finalize()).prefix(16))
    }

    static func hex(_ digest: SHA256.Digest) -> String {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: 0, count: 64)
        var i = 0
        for byte in digest {
            out[i] = digits[Int(byte >> 4)]
            out[i + 1] = digits[Int(byte & 15)]
            i += 2
        }
        return String(decoding: out, as: UTF8.self)
    }
}
