import Foundation
import Glibc

/// Starts `docfs mount -f` as a background daemon and waits until its mount is live.
///
/// A fresh process (posix_spawn, new session) rather than fork(): forking a process that already
/// runs Swift's and Dispatch's threads is unsafe.
enum Daemon {
    /// POSIX_SPAWN_SETSID (spawn.h, glibc ≥ 2.26), hidden from Swift behind _GNU_SOURCE.
    static let spawnSetsid: Int16 = 0x80

    static func start(arguments: [String], logFile: String, mountpoint: String, store: String) throws {
        let exe =
            CommandLine.arguments[0].contains("/")
            ? MountTable.canonical(CommandLine.arguments[0])
            : (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let logFD = open(logFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard logFD >= 0 else {
            throw UserFacingError("docfs: cannot open log file \(logFile): \(String(cString: strerror(errno)))")
        }
        defer { close(logFD) }
        let startOffset = lseek(logFD, 0, SEEK_END)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, logFD, 1)
        posix_spawn_file_actions_adddup2(&actions, logFD, 2)
        // Nothing else the caller had open (a pipe it reads us through, say) may stay open in
        // the daemon, or the caller would wait for the daemon to exit.
        for fd in inheritedDescriptors() where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // Its own session: the terminal's Ctrl-C and hang-up don't reach the daemon.
        posix_spawnattr_setflags(&attr, Daemon.spawnSetsid)

        let argv = ([exe] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, exe, &actions, &attr, argv, environ)
        guard rc == 0 else {
            throw UserFacingError("docfs: cannot start the daemon: \(String(cString: strerror(rc)))")
        }

        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if MountTable.entry(at: mountpoint) != nil {
                if isatty(1) != 0 { print("docfs: mounted \(store) at \(mountpoint) (pid \(pid))") }
                return
            }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                throw UserFacingError(
                    failureText(logFile: logFile, from: startOffset)
                        ?? "docfs: the daemon exited before the mount was live (see \(logFile))")
            }
            usleep(10_000)
        }
        kill(pid, SIGTERM)
        throw UserFacingError("docfs: the mount did not come up within 30 s (see \(logFile)); the daemon (pid \(pid)) was stopped")
    }

    private static func inheritedDescriptors() -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap { Int32($0) }.filter { fcntl($0, F_GETFD) >= 0 && fcntl($0, F_GETFD) & FD_CLOEXEC == 0 }
    }

    /// What the daemon said before it gave up: its log from this start on.
    private static func failureText(logFile: String, from offset: off_t) -> String? {
        guard let h = FileHandle(forReadingAtPath: logFile) else { return nil }
        defer { try? h.close() }
        try? h.seek(toOffset: UInt64(max(offset, 0)))
        guard let data = try? h.readToEnd(), let text = String(data: data, encoding: .utf8) else { return nil }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return trimmed.isEmpty ? nil : trimmed
    }
}
