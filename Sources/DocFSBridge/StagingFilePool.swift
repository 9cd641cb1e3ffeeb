import Dispatch
import Glibc
import DocFSProvider

/// Empty staging files made ahead of need, so `create` does not wait for the store's filesystem
/// to allocate an inode (~0.2 ms on ext4 here, most of a small file's copy-in).
///
/// A background queue keeps a few files ready; when none is ready the caller makes one itself.
/// Unused files are removed at unmount (`drain`), and the store empties its staging folder at
/// every open, so a killed daemon leaves nothing behind either.
final class StagingFilePool: @unchecked Sendable {
    private let directory: String
    private let lock = Lock()
    private var ready: [(fd: Int32, path: String)] = []
    private var refilling = false
    private var closed = false
    private let target: Int
    private let queue = DispatchQueue(label: "docfs.staging-pool", qos: .utility)

    /// Keeps its files in `ready/` under the staging folder, apart from files in use.
    init(stagingDirectory: String, target: Int = 32) {
        let folder = (stagingDirectory.hasSuffix("/") ? stagingDirectory : stagingDirectory + "/") + "ready"
        mkdir(folder, 0o700)
        self.directory = folder + "/"
        self.target = target
    }

    /// An empty staging file, open read-write, and its path.
    func take() throws(ProviderError) -> (fd: Int32, path: String) {
        let (file, startRefill): ((fd: Int32, path: String)?, Bool) = lock.withLock {
            let file = ready.popLast()
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
        let path = directory + "w-\(getpid())-\(StagingCounter.next()).part"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        return fd >= 0 ? (fd, path) : nil
    }

    private func refill() {
        while true {
            let needed = lock.withLock { closed ? 0 : target - ready.count }
            guard needed > 0, let file = makeFile() else { break }
            let keep = lock.withLock { () -> Bool in
                guard !closed else { return false }
                ready.append(file)
                return true
            }
            if !keep { close(file.fd); unlink(file.path) }
        }
        lock.withLock { refilling = false }
    }

    /// Removes the files made ahead; later takes make their own.
    func drain() {
        let files: [(fd: Int32, path: String)] = lock.withLock {
            closed = true
            defer { ready.removeAll() }
            return ready
        }
        queue.sync {}
        for f in files { close(f.fd); unlink(f.path) }
        for f in lock.withLock({ ready }) { close(f.fd); unlink(f.path) }
        rmdir(directory)  // only if empty: a file taken from it may still be in use
    }
}
