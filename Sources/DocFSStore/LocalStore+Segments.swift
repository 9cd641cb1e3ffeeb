#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

// Small files kept in segments (`ContentSegments`) rather than a content file each: which rows
// are stored there after an open, reading them, giving one a content file of its own, dropping
// one, and compacting in the background.
extension LocalStore {
    static let segmentsName = "segments"

    /// Whether an import of `size` bytes goes to a segment: segments are on (`smallFileLimit`,
    /// never for a replica) and the file is that small.
    func storesInSegment(size: Int64) -> Bool {
        smallFileLimit > 0 && size <= Int64(smallFileLimit)
    }

    /// A new file from the bridge's memory (`SmallFileImportProvider`): imported like a staged file,
    /// its bytes appended to a segment (or, past `smallFileLimit`, written to a content file).
    package func importDocument(contents: [UInt8], named name: String, toParentItemIdentifier parent: ItemIdentifier,
                                attributes: NewItemAttributes) async throws(ProviderError) -> Item {
        try importSync(path: "", contents: contents, name: name, toParent: parent, attributes: attributes)
    }

    /// At open: cut torn appends, then keep the entries of rows that are file items of that size
    /// without a content file of their own (see `ContentSegments`).
    func openSegments(_ database: DatabaseQueue) throws {
        for damage in try segments.scan() {
            logger.notice("store \(url.path): cut \(damage.size) byte(s) after offset \(damage.offset) of segment \(damage.segment) (\(damage.reason): an append a crash interrupted)")
        }
        guard !segments.isEmpty else { return }
        try database.inDatabase { db in
            let statement = try db.cachedStatement(sql: "SELECT size FROM item WHERE id = ? AND kind = 0 AND absent = 0")
            try segments.retain { row, length in
                guard let size = try Int64.fetchOne(statement, arguments: [row]), size == Int64(length) else { return false }
                return access(contentPath(row), F_OK) != 0
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

    /// A file kept in a segment, to be read in place (`StoredSliceProvider`); nil for a file with a
    /// content file of its own.
    package func openStoredSlice(of identifier: ItemIdentifier) throws(ProviderError) -> StoredSlice? {
        guard let row = self.row(for: identifier) else { return nil }
        return try segments.slice(row)
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

    /// Writes `bytes` as `contents/<row>`: written and fsynced in `staging/`, then renamed.
    func writeContentFile(_ row: Int64, _ bytes: [UInt8]) throws(ProviderError) {
        let temporary = stagingPath + "/.segment-\(row)"
        let fd = sysOpen(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if fd < 0 { throw .posix(errno, "make \(temporary)") }
        do throws(ProviderError) { try FileDescriptors.writeAll(bytes, to: fd, what: "write \(temporary)") } catch {
            sysClose(fd)
            _ = sysUnlink(temporary)
            throw error
        }
        let synced = fsync(fd) == 0 ? 0 : errno
        sysClose(fd)
        if synced != 0 {
            _ = sysUnlink(temporary)
            throw .posix(synced, "fsync \(temporary)")
        }
        try sysRename(temporary, contentPath(row), "move the contents of item \(row) into place")
    }

    /// A path to read a file item's bytes from, for whoever needs one (a replica's upload): a
    /// segment-stored file is given its content file first.
    package func readablePath(of identifier: ItemIdentifier) throws(ProviderError) -> String? {
        guard let row = self.row(for: identifier) else { return nil }
        if segments.location(of: row) != nil {
            try write { (_) throws(ProviderError) in try moveOutOfSegment(row) }
        }
        return contentPath(row)
    }

    /// The contents of a deleted or replaced file go: its segment entry is dead, or its content
    /// file is removed after the action answers.
    func dropContents(_ row: Int64, _ what: @escaping @Sendable () -> String) {
        if segments.location(of: row) != nil {
            segments.remove(row)
            scheduleCompaction()
        } else {
            reaper.remove(contentPath(row), what)
        }
    }

    /// Compacts the segments that are mostly dead, on the reaper's queue (so a clean close waits
    /// for it): their live entries are appended again and the old files removed.
    func scheduleCompaction() {
        guard !segments.mostlyDead().isEmpty else { return }
        reaper.perform { [segments, logger, url] in
            // Until none is mostly dead (compacting fills the active segment, which may then leave
            // one behind); bounded, and a failure stops it until the next delete.
            var rounds = 0
            while let number = segments.mostlyDead().first, rounds < 64 {
                rounds += 1
                do {
                    let freed = try segments.compact(number)
                    logger.debug("store \(url.path): compacted segment \(number), \(freed) byte(s) freed")
                } catch {
                    logger.warning("store \(url.path): could not compact segment \(number): \(error)")
                    break
                }
            }
        }
    }
}

extension LocalStore: SmallFileImportProvider, StoredSliceProvider {}
