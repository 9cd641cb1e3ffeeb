#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import Logging

/// The bytes of a store's file items, a part `LocalStore` owns: the content files
/// (`contents/<row>`), small files kept in segments (`segments/`, `ContentSegments`) and their
/// compaction, the staging folder the bridge hands files over in (`staging/`), and the removal of
/// contents no item owns any more (`ContentReaper`).
///
/// It knows rows and paths, not items: the store decides what a row's contents are and commits
/// the rows; this part puts the bytes in place before the commit (`placeNew`, `replace`), undoes
/// that when the commit fails, and finishes it (removes what is left over) when it succeeded.
/// Everything that changes files runs under the store's writer lock (the caller holds it);
/// `path`, the segments' reads and `openSegmentContents` take no lock beyond the segments' own.
final class StoreContents: @unchecked Sendable {
    /// `staging/` as a URL, for the bridge (`Provider.stagingDirectory`).
    let stagingDirectory: URL
    /// `staging/` as a path, kept (`URL.path` decodes the URL on every call).
    let stagingPath: String
    let contentsPath: String
    /// Small files' bytes (see `ContentSegments` and StoreContents+Segments).
    let segments: ContentSegments
    /// Removes unowned content files after actions answer; compaction runs on its queue too.
    let reaper: ContentReaper
    /// Files imported with at most this many bytes go to a segment; 0: none do.
    let smallFileLimit: Int
    /// The store directory, for fsync and messages.
    let storePath: String
    let logger: Logger

    init(store url: URL, segments: ContentSegments, smallFileLimit: Int, logger: Logger) {
        self.storePath = url.path
        self.stagingDirectory = url.appendingPathComponent(LocalStore.stagingName, isDirectory: true)
        self.stagingPath = stagingDirectory.path
        self.contentsPath = url.appendingPathComponent(LocalStore.contentsName, isDirectory: true).path
        self.segments = segments
        self.smallFileLimit = max(smallFileLimit, 0)
        self.logger = logger
        self.reaper = ContentReaper(logger: logger)
    }

    /// The content file of a row (`contents/<row>`), whether or not it exists.
    func path(_ row: Int64) -> String { contentsPath + "/" + String(row) }

    // MARK: - New contents, before and after their commit

    /// How a new file's bytes went into place: renamed from staging, copied (another filesystem,
    /// or bytes from memory), or appended to a segment.
    enum Placement { case renamed, copied, segment }

    /// A new file's bytes in place, for `undo` or `finish`.
    struct Placed {
        let row: Int64
        let source: String
        let how: Placement
    }

    /// Puts the bytes of new file items in place before their rows are committed (a crash in
    /// between leaves only content files without rows, which the next open removes): each staged
    /// file is renamed to `contents/<row>` (copied when staging is on another filesystem, EXDEV),
    /// or appended to a segment when it is small enough (`storesInSegment`). With `contents` (a
    /// small file from the bridge's memory, one row) the bytes are those, and there is no staged
    /// file. On a failure, what was placed is undone before the error is thrown.
    func placeNew(_ files: [(row: Int64, source: String, size: Int64)], contents: [UInt8]?) throws(ProviderError) -> [Placed] {
        var placed: [Placed] = []
        placed.reserveCapacity(files.count)
        for file in files {
            let target = path(file.row)
            do throws(ProviderError) {
                if let contents {
                    if storesInSegment(size: Int64(contents.count)) {
                        try segments.append(file.row, contents)
                        placed.append(Placed(row: file.row, source: file.source, how: .segment))
                    } else {
                        try writeContentFile(file.row, contents)
                        placed.append(Placed(row: file.row, source: file.source, how: .copied))
                    }
                    continue
                }
                if storesInSegment(size: file.size) {
                    try appendToSegment(file.row, from: file.source, size: file.size)
                    placed.append(Placed(row: file.row, source: file.source, how: .segment))
                    continue
                }
                do throws(ProviderError) {
                    try sysRename(file.source, target, "rename staged file \(file.source) into the store")
                    placed.append(Placed(row: file.row, source: file.source, how: .renamed))
                } catch  where error.errno == EXDEV {
                    try sysCopyFile(file.source, to: target)
                    placed.append(Placed(row: file.row, source: file.source, how: .copied))
                }
            } catch {
                undo(placed)
                throw error
            }
        }
        return placed
    }

    /// The commit failed: the staged files go back where they were, copies and segment entries go.
    func undo(_ placed: [Placed]) {
        for done in placed.reversed() {
            switch done.how {
            case .copied: sysUnlink(path(done.row))
            case .renamed: try? sysRename(path(done.row), done.source, "")
            case .segment: segments.remove(done.row)
            }
        }
    }

    /// The commit succeeded: staged files that were copied rather than renamed are removed
    /// (`staged`: false for bytes from memory, which had no staged file).
    func finish(_ placed: [Placed], staged: Bool) {
        guard staged else { return }
        for done in placed where done.how != .renamed { sysUnlink(done.source) }
    }

    /// A file item's new version in place of its old one, until the row is committed.
    struct Replacement {
        let row: Int64
        let source: String
        /// The old contents, kept reachable to undo a failed commit; nil when there were none.
        let backup: String?
    }

    /// Renames the staged file `source` over `contents/<row>` (version `version` is replaced),
    /// keeping a hard link to the old contents until `finish` or `undo`.
    func replace(_ row: Int64, version: UInt64, with source: String, _ what: @autoclosure () -> String) throws(ProviderError) -> Replacement {
        let target = path(row)
        // Named per version: the old backup of this item may still be waiting for the reaper.
        let backup = stagingPath + "/.previous-\(row)-\(version)"
        _ = sysUnlink(backup)
        let hasBackup = sysLink(target, backup)
        try sysRename(source, target, "rename staged file over the contents of \(what())")
        return Replacement(row: row, source: source, backup: hasBackup ? backup : nil)
    }

    /// The commit failed: the staged file and the old contents go back to their places.
    func undo(_ replacement: Replacement) {
        guard let backup = replacement.backup else { return }
        let target = path(replacement.row)
        try? sysRename(target, replacement.source, "")
        try? sysRename(backup, target, "")
    }

    /// The commit succeeded: the old contents go after the action answers, and a small file kept
    /// in a segment has a content file of its own from now on.
    func finish(_ replacement: Replacement) {
        let row = replacement.row
        if let backup = replacement.backup { reaper.remove(backup) { "the previous contents of item \(row)" } }
        if segments.location(of: row) != nil {
            segments.remove(row)
            scheduleCompaction()
        }
    }

    /// The contents of a deleted or replaced file go: its segment entry is dead, or its content
    /// file is removed after the action answers.
    func drop(_ row: Int64, _ what: @escaping @Sendable () -> String) {
        if segments.location(of: row) != nil {
            segments.remove(row)
            scheduleCompaction()
        } else {
            reaper.remove(path(row), what)
        }
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
        try sysRename(temporary, path(row), "move the contents of item \(row) into place")
    }

    // MARK: - Durability

    /// `synchronize()`'s part: fsync of the content files of `dirty` (rows written since the last
    /// call), of the segments, `contents/` and the store directory.
    func synchronize(_ dirty: Set<Int64>) throws(ProviderError) {
        for row in dirty where segments.location(of: row) == nil { try sysFsync(path: path(row), directory: false) }
        try segments.synchronize()
        try sysFsync(path: contentsPath, directory: true)
        try sysFsync(path: storePath, directory: true)
    }

    /// Finishes the removals and compactions asked for so far (a clean close).
    func drain() { reaper.drain() }
}
