import Synchronization

/// Which stored files became a writer's live file (`LocalStore.detachLiveContents`), for a reader
/// of `contents/<row>` by path that must see one version whole: the replica's upload
/// (DocFSReplica's `BlockUploader`). It notes `sequence` before it opens the file and, after its
/// last read, asks `madeLive(since:device:inode:)` of the file it read: a writer may have changed
/// the file in place only after it was made live, which is after the note then, so a yes means
/// read again (the path names the kept version now). The file is open meanwhile, so its inode
/// number names no other file: no false no. Bounded: past `limit` entries all are forgotten and
/// any read begun before says yes (read again).
package final class LiveDetaches: Sendable {
    private struct State {
        var sequence: UInt64 = 0
        var floor: UInt64 = 0
        var byFile: [FileKey: UInt64] = [:]
    }
    private struct FileKey: Hashable {
        var device: UInt64
        var inode: UInt64
    }
    private let state = Mutex(State())
    private let limit: Int

    package init(limit: Int = 4096) { self.limit = limit }

    /// The count of files made live so far: note it before opening the file.
    package var sequence: UInt64 { state.withLock { $0.sequence } }

    /// The file `device`/`inode` becomes live (before any writer may change it).
    package func record(device: UInt64, inode: UInt64) {
        state.withLock { state in
            state.sequence += 1
            if state.byFile.count >= limit {
                state.byFile = [:]
                state.floor = state.sequence
            }
            state.byFile[FileKey(device: device, inode: inode)] = state.sequence
        }
    }

    /// Whether the file `device`/`inode` (still open by the asker) was made live after `noted`.
    package func madeLive(since noted: UInt64, device: UInt64, inode: UInt64) -> Bool {
        state.withLock { state in
            noted < state.floor || (state.byFile[FileKey(device: device, inode: inode)] ?? 0) > noted
        }
    }
}
