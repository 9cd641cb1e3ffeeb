import Dispatch
import Glibc
import DocFSProvider
import Synchronization

/// Empty staging files made ahead of need, so `create` does not wait for the store's filesystem
/// to allocate an inode (~0.2 ms on ext4 here, most of a small file's copy-in).
///
/// A background queue keeps a few files ready; when none is ready the caller makes one itself.
/// Unused files are removed at unmount (`drain`), and the store empties its staging folder at
/// every open, so a killed daemon leaves nothing behind either.
///
/// The files are spread over a few shard folders, taken oldest first, because with one folder
/// two things went wrong under `cp -r` (measured: over half of the daemon's CPU):
/// - the refill held the folder's lock while ext4 allocated an inode, and every import's rename
///   out of that folder waited on it;
/// - ext4 puts a new file's inode in its folder's block group and, without a journal, skips
///   every inode of the group deleted in the last minutes (`recently_deleted`), so one busy group
///   made each allocation scan thousands of inodes. The shards' parent is marked as a top
///   folder (`chattr +T`), so ext4 spreads the shards over block groups.
final class StagingFilePool: @unchecked Sendable {
    private let directory: String
    private let lock = Mutex<Void>(())
    private var ready: [(fd: Int32, path: String)] = []
    private var shards: [String] = []
    private var nextShard = 0
    private var refilling = false
    private var closed = false
    private let target: Int
    private let queue = DispatchQueue(label: "docfs.staging-pool", qos: .utility)
    /// In every staging file's name (a getpid() per file showed in profiles).
    private static let pid = getpid()

    /// Keeps its files in `ready/` under the staging folder, apart from files in use.
    init(stagingDirectory: String, target: Int = 32, shardCount: Int = 8) {
        let folder = (stagingDirectory.hasSuffix("/") ? stagingDirectory : stagingDirectory + "/") + "ready"
        mkdir(folder, 0o700)
        Self.markTopFolder(folder)
        self.directory = folder + "/"
        self.target = target
        for n in 0..<shardCount {
            let shard = directory + String(n)
            if mkdir(shard, 0o700) == 0 || errno == EEXIST { shards.append(shard + "/") }
        }
        if shards.isEmpty { shards = [directory] }
    }

    /// ext4's "top of a directory hierarchy" flag: its subfolders go to different block groups.
    private static func markTopFolder(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var flags: Int = 0
        // FS_IOC_GETFLAGS / FS_IOC_SETFLAGS, FS_TOPDIR_FL (Linux uapi/linux/fs.h); other
        // filesystems refuse and nothing changes.
        let getFlags: UInt = 0x8008_6601, setFlags: UInt = 0x4008_6602, topDir = 0x0002_0000
        guard ioctl(fd, getFlags, &flags) == 0 else { return }
        if flags & topDir == 0 {
            flags |= topDir
            _ = ioctl(fd, setFlags, &flags)
        }
    }

    /// An empty staging file, open read-write, and its path.
    func take() throws(ProviderError) -> (fd: Int32, path: String) {
        let (file, startRefill): ((fd: Int32, path: String)?, Bool) = lock.withLock { _ in
            // Oldest first: it sits in a shard the refill left a while ago.
            let file = ready.isEmpty ? nil : ready.removeFirst()
            let start = !refilling && !closed && ready.count < target / 4
            if start { refilling = true }
            return (file, start)
        }
        if startRefill { queue.async { self.refill() } }
        if let file { return file }
        guard let made = makeFile() else { throw .posix(errno, "create staging file") }
        return made
    }

    private func makeFile() -> (fd: Int32, path: String)? {
        let shard = lock.withLock { _ -> String in
            defer { nextShard = (nextShard + 1) % shards.count }
            return shards[nextShard]
        }
        let path = shard + "w-\(Self.pid)-\(StagingCounter.next()).part"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        return fd >= 0 ? (fd, path) : nil
    }

    private func refill() {
        while true {
            let needed = lock.withLock { _ in closed ? 0 : target - ready.count }
            guard needed > 0, let file = makeFile() else { break }
            let keep = lock.withLock { _ -> Bool in
                guard !closed else { return false }
                ready.append(file)
                return true
            }
            if !keep { close(file.fd); unlink(file.path) }
        }
        lock.withLock { _ in refilling = false }
    }

    /// Removes the files made ahead; later takes make their own.
    func drain() {
        let files: [(fd: Int32, path: String)] = lock.withLock { _ in
            closed = true
            defer { ready.removeAll() }
            return ready
        }
        queue.sync {}
        for f in files { close(f.fd); unlink(f.path) }
        for f in lock.withLock({ _ in ready }) { close(f.fd); unlink(f.path) }
        // Only if empty: a file taken from them may still be in use.
        for shard in shards where shard != directory { rmdir(shard) }
        rmdir(directory)
    }
}

/// Unique staging names within the process.
enum StagingCounter {
    private static let lock = Mutex<Void>(())
    nonisolated(unsafe) private static var value: UInt64 = 0
    static func next() -> UInt64 {
        lock.withLock { _ in
            value += 1; return value
        }
    }
}
