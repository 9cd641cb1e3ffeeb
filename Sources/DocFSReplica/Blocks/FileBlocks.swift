import Foundation

/// A file's blocks in order, read from its start: the whole file when it is smaller than
/// `ContentChunker.wholeBelow`, else cut by the chunker, a buffer of twice the largest block
/// at a time (memory stays bounded, whatever the file's size).
struct FileBlocks {
    private let fd: Int32
    private let chunker: ContentChunker
    private let whole: Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var end = 0
    private var atEnd = false
    /// Bytes read so far (the version's size once `next()` answered nil).
    private(set) var size: Int64 = 0
    /// The file read (its device and inode numbers, `LiveDetaches`).
    let device: UInt64
    let inode: UInt64

    /// nil when the file is gone (deleted since its change was queued).
    init?(path: String, chunker: ContentChunker = .standard) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        var st = stat()
        fstat(fd, &st)
        self.fd = fd
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        self.chunker = chunker
        whole = st.st_size < ContentChunker.wholeBelow
        buffer = [UInt8](repeating: 0, count: whole ? max(Int(st.st_size) + 1, 4096) : 2 * chunker.maximum)
    }

    func close() { _ = Foundation.close(fd) }

    /// The next block's bytes; nil after the last.
    mutating func next() throws -> [UInt8]? {
        while true {
            if whole {
                if atEnd {
                    guard end > start else { return nil }
                    defer { start = end }
                    return Array(buffer[start..<end])
                }
                if end == buffer.count { buffer.append(contentsOf: repeatElement(0, count: buffer.count)) }
            } else {
                let cut = buffer.withUnsafeBytes { raw in
                    chunker.cut(UnsafeRawBufferPointer(rebasing: raw[start..<end]), atEnd: atEnd)
                }
                if let cut {
                    guard cut > 0 else { return nil }
                    defer { start += cut }
                    return Array(buffer[start..<start + cut])
                }
                if start > 0 {
                    buffer.withUnsafeMutableBytes { raw in
                        _ = memmove(raw.baseAddress!, raw.baseAddress! + start, end - start)
                    }
                    end -= start
                    start = 0
                }
            }
            let got = buffer.withUnsafeMutableBytes { raw in read(fd, raw.baseAddress! + end, raw.count - end) }
            if got < 0 {
                if errno == EINTR { continue }
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            if got == 0 { atEnd = true } else { end += got; size += Int64(got) }
        }
    }
}
