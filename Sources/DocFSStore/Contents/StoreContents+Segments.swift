#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// Small files kept in segments (`ContentSegments`) rather than a content file each: which rows
// are stored there after an open, reading them, giving one a content file of its own, and
// compacting in the background.
extension StoreContents {
    /// Whether an import of `size` bytes goes to a segment: segments are on (`smallFileLimit`,
    /// never for a replica) and the file is that small.
    func storesInSegment(size: Int64) -> Bool {
        smallFileLimit > 0 && size <= Int64(smallFileLimit)
    }

    /// At open: cut torn appends, then keep the entries of rows that are file items of that size
    /// without a content file of their own (see `ContentSegments`).
    func openSegments(_ database: DatabaseQueue) throws {
        for damage in try segments.scan() {
            logger.notice(
                "store \(storePath): cut \(damage.size) byte(s) after offset \(damage.offset) of segment \(damage.segment) (\(damage.reason): an append a crash interrupted)"
            )
        }
        guard !segments.isEmpty else { return }
        try database.inDatabase { db in
            let statement = try db.cachedStatement(sql: "SELECT size FROM item WHERE id = ? AND kind = 0 AND absent = 0")
            try segments.retain { row, length in
                guard let size = try Int64.fetchOne(statement, arguments: [row]), size == Int64(length) else { return false }
                return access(path(row), F_OK) != 0
            }
        }
    }

    /// Appends the bytes of the staged file `source` (`size` bytes) to a segment as `row`'s.
    func appendToSegment(_ row: Int64, from source: String, size: Int64) throws(ProviderError) {
        let fd = sysOpen(source, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw .posix(errno, "open staged file \(source)") }
        defer { sysClose(fd) }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard ContentSegments.readFully(fd, &bytes, at: 0) else { throw .posix(errno == 0 ? EIO : errno, "read staged file \(source)") }
        try segments.append(row, bytes)
    }

    /// A descriptor on a segment-stored row's bytes (an anonymous memory file, sealed), or nil
    /// when the row has a content file of its own.
    func openSegmentContents(_ row: Int64) throws(ProviderError) -> Int32? {
        guard let bytes = try segments.read(row) else { return nil }
        return try FileDescriptors.sealedMemoryFile(bytes, name: "segment:" + String(row))
    }

    /// Gives a segment-stored row a content file of its own (`contents/<row>`, written and fsynced
    /// in `staging/`, then renamed), so that it can be handed out by path; the segment entry is
    /// dead from then on. Nothing to do for a row with a content file. Under the writer lock.
    func moveOutOfSegment(_ row: Int64) throws(ProviderError) {
        guard let bytes = try segments.read(row) else { return }
        try writeContentFile(row, bytes)
        segments.remove(row)
        scheduleCompaction()
    }

    /// Compacts the segments that are mostly dead, on the reaper's queue (so a clean close waits
    /// for it): their live entries are appended again and the old files removed.
    func scheduleCompaction() {
        guard !segments.mostlyDead().isEmpty else { return }
        reaper.perform { [segments, logger, storePath] in
            // Until none is mostly dead (compacting fills the active segment, which may then leave
            // one behind); bounded, and a failure stops it until the next delete.
            var rounds = 0
            while let number = segments.mostlyDead().first, rounds < 64 {
                rounds += 1
                do {
                    let freed = try segments.compact(number)
                    logger.debug("store \(storePath): compacted segment \(number), \(freed) byte(s) freed")
                } catch {
                    logger.warning("store \(storePath): could not compact segment \(number): \(error)")
                    break
                }
            }
        }
    }
}
