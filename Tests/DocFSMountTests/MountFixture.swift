import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// What a shell command (or the `docfs` binary) produced.
struct ShellResult: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut = false
    var description: String {
        "status \(status)\(timedOut ? " (timed out)" : "")\n--- stdout\n\(stdout)\n--- stderr\n\(stderr)"
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Locates the built `docfs` executable: `$DOCFS_BIN`, else next to the test bundle.
enum DocFSBinary {
    static func path() throws -> String {
        if let env = ProcessInfo.processInfo.environment["DOCFS_BIN"], !env.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: env) else {
                throw FixtureError("DOCFS_BIN=\(env) is not an executable file")
            }
            return env
        }
        var starts = [Bundle.main.bundleURL, Bundle.main.executableURL ?? Bundle.main.bundleURL]
        starts.append(URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL)
        for start in starts {
            var dir = start
            for _ in 0..<6 {
                let candidate = dir.appendingPathComponent("docfs").path
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDir), !isDir.boolValue,
                    FileManager.default.isExecutableFile(atPath: candidate)
                {
                    return candidate
                }
                dir = dir.deletingLastPathComponent()
            }
        }
        throw FixtureError("cannot find the docfs executable; set DOCFS_BIN (searched up from \(starts.map(\.path)))")
    }
}

/// Reads /proc/self/mounts (never stats a mountpoint, which could hang on a dead FUSE daemon).
enum Mounts {
    struct Entry { var source: String; var path: String; var type: String }

    static func all() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: false)
            guard f.count >= 3 else { return nil }
            return Entry(source: unescape(String(f[0])), path: unescape(String(f[1])), type: String(f[2]))
        }
    }

    static func isMounted(_ path: String) -> Bool { all().contains { $0.path == path } }

    /// Mount points at or below `dir`.
    static func under(_ dir: String) -> [String] {
        all().map(\.path).filter { $0 == dir || $0.hasPrefix(dir + "/") }
    }

    /// /proc/mounts escapes space, tab, newline and backslash as \ooo.
    static func unescape(_ s: String) -> String {
        guard s.contains("\\") else { return s }
        var out = [UInt8]()
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\"), i + 3 < b.count,
                let v = UInt8(String(decoding: b[(i + 1)...(i + 3)], as: UTF8.self), radix: 8)
            {
                out.append(v); i += 4
            } else {
                out.append(b[i]); i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Small process helpers (by PID only; never by name).
enum Proc {
    static func isAlive(_ pid: pid_t) -> Bool {
        guard pid > 0 else { return false }
        // A zombie still answers kill(0); look at its state too.
        if kill(pid, 0) != 0 { return false }
        if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        {
            let rest = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces)
            if rest.hasPrefix("Z") || rest.hasPrefix("X") { return false }
        }
        return true
    }

    static func cmdline(_ pid: pid_t) -> [String] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return [] }
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// PIDs of live processes whose command line mentions `fragment` (a unique temp path),
    /// other than this process.
    static func mentioning(_ fragment: String) -> [pid_t] {
        let me = getpid()
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return names.compactMap { pid_t($0) }.filter { pid in
            pid != me && cmdline(pid).contains { $0.contains(fragment) } && isAlive(pid)
        }
    }

    static func waitGone(_ pid: pid_t, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !isAlive(pid) { return true }
            usleep(20_000)
        }
        return !isAlive(pid)
    }
}

/// A child process started with posix_spawn in its own process group, reaped with waitpid.
/// (Foundation's Process is not used: on Linux it learns of an exit through a descriptor the
/// child inherits, so a daemonizing `docfs mount` would make it wait for the daemon too.)
final class Child {
    let pid: pid_t
    private(set) var waitStatus: Int32?

    /// Starts `exe args` in `cwd` with stdin from /dev/null and stdout/stderr appended to the
    /// given files (the same path for both shares one descriptor).
    init(
        _ exe: String, _ args: [String], cwd: String, env: [String: String] = [:],
        stdout: String, stderr: String
    ) throws {
        var fa = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fa)
        defer { posix_spawn_file_actions_destroy(&fa) }
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&fa, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if stderr == stdout {
            posix_spawn_file_actions_adddup2(&fa, 1, 2)
        } else {
            posix_spawn_file_actions_addopen(&fa, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attr, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for sig in [SIGTERM, SIGINT, SIGPIPE, SIGHUP, SIGCHLD] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        posix_spawnattr_setpgroup(&attr, 0)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        // cd first through sh, so no chdir of this (multithreaded) process is needed.
        let argv = ["/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", cwd, exe] + args
        var environment = ProcessInfo.processInfo.environment
        environment["LC_ALL"] = "C"
        for (k, v) in env { environment[k] = v }
        let envv = environment.map { "\($0.key)=\($0.value)" }
        let cArgs = argv.map { strdup($0) } + [nil]
        let cEnv = envv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) }; cEnv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, cArgs, cEnv)
        guard rc == 0 else { throw FixtureError("posix_spawn \(exe): \(String(cString: strerror(rc)))") }
        self.pid = pid
    }

    /// True once the child has exited (reaps it).
    var hasExited: Bool {
        if waitStatus != nil { return true }
        var st: Int32 = 0
        let r = waitpid(pid, &st, WNOHANG)
        if r == pid { waitStatus = st; return true }
        if r < 0 && errno == ECHILD { waitStatus = -1; return true }
        return false
    }

    /// Waits up to `seconds` (forever when nil) for the exit; true when it exited.
    @discardableResult
    func wait(seconds: Double?) -> Bool {
        let deadline = seconds.map { Date().addingTimeInterval($0) }
        while !hasExited {
            if let deadline, Date() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// Exit status; 128 + signal number when killed by a signal.
    var status: Int32 {
        guard let st = waitStatus, st >= 0 else { return -1 }
        let sig = st & 0x7f
        return sig == 0 ? (st >> 8) & 0xff : 128 + sig
    }
    var exitedCleanly: Bool { waitStatus.map { $0 >= 0 && $0 & 0x7f == 0 && ($0 >> 8) & 0xff == 0 } ?? false }

    func signal(_ sig: Int32) { if !hasExited { kill(pid, sig) } }
    /// Signals the whole process group (the child and whatever it started).
    func signalGroup(_ sig: Int32) { kill(-pid, sig) }
}

/// Runs a process with a timeout; output goes to files so that pipes can never block it.
func runProcess(
    _ exe: String, _ args: [String], cwd: String, env: [String: String] = [:],
    timeout: Double, outDir: String, onTimeout: () -> Void = {}
) -> ShellResult {
    let tag = UUID().uuidString.prefix(8)
    let outPath = "\(outDir)/.out-\(tag)", errPath = "\(outDir)/.err-\(tag)"
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let child: Child
    do { child = try Child(exe, args, cwd: cwd, env: env, stdout: outPath, stderr: errPath) } catch {
        return ShellResult(status: -1, stdout: "", stderr: "cannot run \(exe): \(error)")
    }
    var timedOut = false
    if !child.wait(seconds: timeout) {
        timedOut = true
        onTimeout()
        child.signalGroup(SIGKILL)
        if !child.wait(seconds: 10) { child.signal(SIGKILL); child.wait(seconds: nil) }
    }
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    return ShellResult(status: timedOut ? -1 : child.status, stdout: out, stderr: err, timedOut: timedOut)
}

/// Fires `action` unless disarmed within `seconds`. Used around in-process syscalls on the
/// mount: if the daemon hangs, the action kills it (which aborts the FUSE connection, so the
/// stuck syscall returns) and lazily unmounts. It never touches the mountpoint itself.
final class Watchdog: @unchecked Sendable {
    private let disarmed = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var didFire = false // written by the watchdog thread before `finished`
    init(seconds: Double, action: @escaping @Sendable () -> Void) {
        Thread.detachNewThread { [self] in
            if disarmed.wait(timeout: .now() + seconds) == .timedOut {
                action()
                didFire = true
            }
            finished.signal()
        }
    }
    /// Stops the watchdog; if it fired, waits until its action is complete. Returns whether it fired.
    @discardableResult
    func disarm() -> Bool {
        disarmed.signal()
        finished.wait()
        return didFire
    }
}

/// One docfs store and mount in a unique temp directory:
///
///     /tmp/docfs-test-<test pid>-<random>/
///         store/   the docfs store        mnt/   the mountpoint
///         src/     scratch for sources    log.txt   the daemon's stdout+stderr
///
/// Launches `docfs mount store mnt -f -o auto_unmount --log-level debug` as a subprocess and
/// waits for the mount in /proc/self/mounts. `teardown()` always unmounts and reaps.
///
/// With `DOCFS_TEST_PROVIDER=memory` it mounts `memory:` (the in-memory provider) instead of
/// the store, with the daemon's TMPDIR in `tmp/` (so its staging folder is inside the fixture
/// directory). The store is still made, so commands given `store` work on an empty store. A
/// test that mounts a second time (remount, kill -9 and mount) is skipped at that point, as is a
/// test with a layout: the in-memory tree starts empty at every mount and knows no layout.
final class MountFixture {
    static let commandTimeout: Double = 60

    /// The provider the mounted tests run against: `store` (default) or `memory`.
    static let provider = ProcessInfo.processInfo.environment["DOCFS_TEST_PROVIDER"] ?? "store"
    static var usesMemoryProvider: Bool { provider == "memory" }
    /// `DOCFS_TEST_IO_URING=1` (`make test-io-uring`): every mount asks for FUSE over io_uring
    /// (`-o io_uring`); the fuse module's enable_uring must then be Y (the Makefile target sets it).
    static let forcesIoUring = ProcessInfo.processInfo.environment["DOCFS_TEST_IO_URING"] == "1"
    /// Whether mounts may be served over io_uring (only when asked for: off by default).
    static var ringMayServe: Bool { forcesIoUring }
    /// Mounts made by this fixture so far.
    private var mountCount = 0
    /// Whether the last mount asked for FUSE over io_uring (`-o io_uring`).
    private var askedForRing = false

    let bin: String
    let dir: String
    var store: String { dir + "/store" }
    var mnt: String { dir + "/mnt" }
    var src: String { dir + "/src" }
    var logPath: String { dir + "/log.txt" }
    /// The daemon's TMPDIR under the memory provider (its staging folder is made in it).
    var memoryTemp: String { dir + "/tmp" }

    private(set) var daemon: Child?
    private var tornDown = false
    /// Variables every mount of this fixture gives the daemon (a remote store's S3 credentials),
    /// under those a `mount(env:)` call adds.
    var daemonEnv: [String: String] = [:]

    /// Makes the directories and runs `docfs init store [--layout FILE] [initArguments...]` with
    /// `initEnv` added to its environment.
    init(layout: String? = nil, initArguments: [String] = [], initEnv: [String: String] = [:]) throws {
        if layout != nil, Self.usesMemoryProvider {
            throw XCTSkip("a layout needs the store: the memory provider (DOCFS_TEST_PROVIDER=memory) has none")
        }
        bin = try DocFSBinary.path()
        dir = "/tmp/docfs-test-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        let fm = FileManager.default
        for d in [dir, mnt, src] { try fm.createDirectory(atPath: d, withIntermediateDirectories: true) }
        var args = ["init", store]
        if let layout {
            let file = dir + "/layout.yaml"
            try layout.write(toFile: file, atomically: true, encoding: .utf8)
            args += ["--layout", file]
        }
        args += initArguments
        let r = docfs(args, env: initEnv)
        guard r.status == 0 else {
            teardown()
            throw FixtureError("docfs \(args.joined(separator: " ")) failed: \(r)")
        }
    }

    deinit { teardown() }

    // MARK: mounting

    /// Starts the daemon in the foreground mode and waits (up to 20 s) for the mount. `env` adds
    /// variables for the daemon (e.g. DOCFS_FAULT for the crash tests).
    func mount(extra: [String] = [], env: [String: String] = [:]) throws {
        // A test whose unmount failed must fail, not crash the whole test process.
        guard daemon == nil else { throw FixtureError("already mounted by this fixture (the last daemon has not ended)") }
        var env = daemonEnv.merging(env) { _, call in call }
        var source = store
        if Self.usesMemoryProvider {
            if mountCount > 0 {
                throw XCTSkip("the memory provider keeps nothing across mounts; what follows needs the store")
            }
            try FileManager.default.createDirectory(atPath: memoryTemp, withIntermediateDirectories: true)
            env["TMPDIR"] = memoryTemp
            source = "memory:"
        }
        mountCount += 1
        _ = FileManager.default.createFile(atPath: logPath, contents: nil) // one log per mount
        let ring = Self.forcesIoUring ? ["-o", "io_uring"] : []
        askedForRing = !ring.isEmpty || extra.contains { $0.contains("io_uring") }
        let p = try Child(
            bin, ["mount", source, mnt, "-f", "-o", "auto_unmount", "--log-level", "debug"] + ring + extra,
            cwd: dir, env: env, stdout: logPath, stderr: logPath)
        daemon = p
        let deadline = Date().addingTimeInterval(20)
        while !Mounts.isMounted(mnt) {
            if p.hasExited {
                daemon = nil
                throw FixtureError("docfs mount exited with status \(p.status) before the mount appeared; log:\n\(log)")
            }
            if Date() > deadline {
                stopDaemon()
                throw FixtureError("mount did not appear in /proc/self/mounts within 20 s; log:\n\(log)")
            }
            usleep(20_000)
        }
    }

    var isMounted: Bool { Mounts.isMounted(mnt) }
    var daemonPID: pid_t? { daemon.map(\.pid) }

    /// Clean stop: SIGTERM, wait up to 5 s, then the hard way. Returns true when the daemon
    /// exited by itself with status 0 and the mount was gone.
    @discardableResult
    func stopDaemon() -> Bool {
        guard let p = daemon else { return true }
        defer { daemon = nil }
        p.signal(SIGTERM)
        var clean = p.wait(seconds: 5)
        if Mounts.isMounted(mnt) {
            clean = false
            lazyUnmount(mnt)
        }
        if !p.hasExited {
            clean = false
            p.signal(SIGKILL)
        }
        p.wait(seconds: nil)
        return clean && p.exitedCleanly
    }

    /// Waits (up to `seconds`) for the daemon to exit by itself (a DOCFS_FAULT crash), then for
    /// auto_unmount; returns its exit status, or nil when it is still running.
    func waitForDaemonExit(seconds: Double) -> Int32? {
        guard let p = daemon else { return nil }
        guard p.wait(seconds: seconds) else { return nil }
        daemon = nil
        unmountAfterTheDaemonDied()
        return p.status
    }

    /// SIGKILL the daemon; auto_unmount removes the mount (else a lazy unmount, see below).
    func kill9() {
        guard let p = daemon else { return }
        p.signal(SIGKILL)
        p.wait(seconds: nil)
        daemon = nil
        unmountAfterTheDaemonDied()
    }

    /// The daemon died (killed, or a DOCFS_FAULT crash): auto_unmount removes a /dev/fuse mount
    /// (waited for up to 5 s, then a lazy unmount). A mount that asked for the ring is left in
    /// place by auto_unmount once its daemon died (ENOTCONN, seen on Linux 6.18), so it is
    /// detached at once: the 5 s wait for it cost about 90 s of `make test-io-uring`.
    private func unmountAfterTheDaemonDied() {
        if !askedForRing {
            let deadline = Date().addingTimeInterval(5)
            while Mounts.isMounted(mnt) && Date() < deadline { usleep(20_000) }
        }
        if Mounts.isMounted(mnt) { lazyUnmount(mnt) }
    }

    /// Clean unmount (SIGTERM) and mount again; returns whether the stop was clean.
    @discardableResult
    func remount() throws -> Bool {
        let clean = stopDaemon()
        try mount()
        return clean
    }

    /// Always safe to call, also twice: stops the daemon, unmounts anything under the fixture
    /// directory, kills leftover daemons of this fixture (found by the unique path on their
    /// command line), and removes the directory when nothing is mounted in it.
    func teardown() {
        guard !tornDown else { return }
        tornDown = true
        stopDaemon()
        for m in Mounts.under(dir).reversed() { lazyUnmount(m) }
        for pid in Proc.mentioning(dir) {
            kill(pid, SIGTERM)
            if !Proc.waitGone(pid, seconds: 5) { kill(pid, SIGKILL); _ = Proc.waitGone(pid, seconds: 5) }
        }
        if Mounts.under(dir).isEmpty {
            try? FileManager.default.removeItem(atPath: dir)
        } else {
            warn("MountFixture: \(dir) still has mounts \(Mounts.under(dir)); not removing it")
        }
    }

    /// Emergency stop used by timeouts: kill the daemon (aborts the FUSE connection so stuck
    /// callers return) and lazily unmount. Sendable: callable from a watchdog thread.
    static func abort(pid: pid_t?, mnt: String) {
        if let pid, pid > 0 { kill(pid, SIGKILL) }
        lazyUnmount(mnt)
    }

    static func lazyUnmount(_ path: String) {
        guard Mounts.isMounted(path) else { return }
        let r = runProcess("/usr/bin/env", ["fusermount3", "-uz", path], cwd: "/", timeout: 15, outDir: "/tmp")
        if r.status != 0 || Mounts.isMounted(path) {
            _ = umount2(path, Int32(MNT_DETACH))
        }
    }
    private func lazyUnmount(_ path: String) { Self.lazyUnmount(path) }

    // MARK: commands

    /// The daemon's log so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Files left in the store's staging area (outside the mount: safe to look at), as paths
    /// relative to it. Not counted: the empty files the bridge makes ahead of need in `ready/`
    /// (nobody's data; a non-empty one there is reported), and the empty `slot-*` folders it
    /// reuses for imports (what is inside them is reported).
    func stagedLeftovers() -> [String] {
        var staging = store + "/staging"
        if Self.usesMemoryProvider {
            // The in-memory provider's private staging folder: TMPDIR/docfs-memory-XXXXXX.
            let made = (try? FileManager.default.contentsOfDirectory(atPath: memoryTemp)) ?? []
            guard let folder = made.first(where: { $0.hasPrefix("docfs-memory-") }) else { return [] }
            staging = memoryTemp + "/" + folder
        }
        let paths = (try? FileManager.default.subpathsOfDirectory(atPath: staging)) ?? []
        return paths.filter { p in
            var st = Glibc.stat()
            guard Glibc.lstat(staging + "/" + p, &st) == 0, st.st_mode & S_IFMT != S_IFDIR else { return false }
            return !(p.hasPrefix("ready/") && st.st_size == 0)
        }.sorted()
    }

    /// Waits (up to 10 s) until the log has a line for which `match` is true; returns the
    /// matching lines (empty when none appeared).
    func logLines(waitingFor match: (String) -> Bool) -> [String] {
        let deadline = Date().addingTimeInterval(10)
        repeat {
            let lines = log.split(separator: "\n").map(String.init).filter(match)
            if !lines.isEmpty { return lines }
            usleep(50_000)
        } while Date() < deadline
        return []
    }

    /// Skips the test where the mount just made said passthrough is off (the kernel offers none,
    /// before 6.9, or the daemon lacks CAP_SYS_ADMIN): the tests that need the kernel to read or
    /// write the backing file itself.
    func skipUnlessPassthrough() throws {
        let said = logLines(waitingFor: { $0.contains("passthrough on") || $0.contains("passthrough off") })
        if let line = said.first, line.contains("passthrough off") {
            throw XCTSkip("this kernel or process offers no passthrough: \(line)")
        }
    }

    /// Runs `/bin/sh -c script` in the fixture directory (so `mnt/...`, `src/...`, `store` work;
    /// `$DOCFS` is the binary). On timeout the daemon is killed and the mount lazily unmounted.
    func sh(
        _ script: String, timeout: Double = MountFixture.commandTimeout,
        file: StaticString = #filePath, line: UInt = #line
    ) -> ShellResult {
        let pid = daemonPID, mnt = self.mnt
        let r = runProcess(
            "/bin/sh", ["-c", script], cwd: dir, env: ["DOCFS": bin], timeout: timeout,
            outDir: dir, onTimeout: { MountFixture.abort(pid: pid, mnt: mnt) })
        if r.timedOut {
            XCTFail(
                "shell command timed out after \(timeout) s; daemon killed and mount detached: \(script)\nlog:\n\(log)",
                file: file, line: line)
        }
        return r
    }

    /// Runs the docfs binary with `args` (cwd: the fixture directory), `env` added to its environment.
    func docfs(_ args: [String], env: [String: String] = [:], timeout: Double = MountFixture.commandTimeout) -> ShellResult {
        let pid = daemonPID, mnt = self.mnt
        return runProcess(
            bin, args, cwd: dir, env: env, timeout: timeout, outDir: dir,
            onTimeout: { MountFixture.abort(pid: pid, mnt: mnt) })
    }

    /// Runs `body` (in-process syscalls on the mount) under a watchdog.
    func guarded<T>(
        _ what: String = "syscall", seconds: Double = MountFixture.commandTimeout,
        _ body: () throws -> T
    ) rethrows -> T {
        let pid = daemonPID, mnt = self.mnt
        let dog = Watchdog(seconds: seconds) {
            warn("MountFixture: \(what) on \(mnt) hung for \(seconds) s; killing the daemon")
            MountFixture.abort(pid: pid, mnt: mnt)
        }
        defer {
            if dog.disarm() {
                XCTFail("\(what) hung for \(seconds) s; daemon killed and mount detached; log:\n\(log)")
            }
        }
        return try body()
    }

    // MARK: paths and POSIX helpers (all relative paths are inside the mount)

    /// Absolute path of `rel` inside the mount.
    func m(_ rel: String) -> String { rel.isEmpty ? mnt : mnt + "/" + rel }

    /// Writes bytes to a scratch file outside the mount (under src/).
    func writeSource(_ rel: String, _ bytes: [UInt8]) throws {
        let path = src + "/" + rel
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Writes `bytes` to `path` (absolute) with open/write/close; returns 0 or the first errno.
    func writeFile(_ path: String, _ bytes: [UInt8], flags: Int32 = O_WRONLY | O_CREAT | O_TRUNC) -> Int32 {
        guarded("write \(path)") {
            let fd = open(path, flags, 0o644)
            if fd < 0 { return errno }
            var off = 0
            while off < bytes.count {
                let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                if n < 0 { let e = errno; close(fd); return e }
                off += n
            }
            return close(fd) == 0 ? 0 : errno
        }
    }

    /// The whole contents of `path` (absolute), or nil with the errno.
    func readFile(_ path: String) -> (bytes: [UInt8]?, errno: Int32) {
        guarded("read \(path)") {
            let fd = open(path, O_RDONLY)
            if fd < 0 { return (nil, errno) }
            defer { close(fd) }
            var out = [UInt8]()
            var buf = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 { return (nil, errno) }
                if n == 0 { return (out, 0) }
                out += buf[0..<n]
            }
        }
    }

    /// Sorted names in a directory (absolute path), or nil on error.
    func list(_ path: String) -> [String]? {
        guarded("list \(path)") { try? FileManager.default.contentsOfDirectory(atPath: path).sorted() }
    }

    func stat(_ path: String) -> (st: Glibc.stat, errno: Int32) {
        guarded("stat \(path)") {
            var st = Glibc.stat()
            return Glibc.lstat(path, &st) == 0 ? (st, 0) : (st, errno)
        }
    }

    /// errno of a call returning -1 on failure (0 on success).
    func errnoOf(_ what: String, _ call: () -> Int32) -> Int32 {
        guarded(what) { call() < 0 ? errno : 0 }
    }

    func openErrno(_ path: String, _ flags: Int32, mode: mode_t = 0o644) -> Int32 {
        errnoOf("open \(path)") {
            let fd = open(path, flags, mode)
            if fd < 0 { return -1 }
            return close(fd)
        }
    }
    func mkdirErrno(_ path: String) -> Int32 { errnoOf("mkdir \(path)") { mkdir(path, 0o755) } }
    func rmdirErrno(_ path: String) -> Int32 { errnoOf("rmdir \(path)") { rmdir(path) } }
    func unlinkErrno(_ path: String) -> Int32 { errnoOf("unlink \(path)") { unlink(path) } }
    func renameErrno(_ from: String, _ to: String) -> Int32 { errnoOf("rename \(from)") { rename(from, to) } }

    /// renameat2(2) with flags (RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2); Swift's Glibc
    /// module does not export it, so it is looked up with dlsym.
    func renameat2Errno(_ from: String, _ to: String, flags: UInt32) -> Int32 {
        typealias Fn = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let sym = dlsym(dlopen(nil, RTLD_NOW), "renameat2") else { return ENOSYS }
        let fn = unsafeBitCast(sym, to: Fn.self)
        return errnoOf("renameat2 \(from)") { fn(AT_FDCWD, from, AT_FDCWD, to, flags) }
    }
}

/// A line on the test process's stderr (for the fixture's own troubles).
func warn(_ s: String) {
    FileHandle.standardError.write(Data((s + "\n").utf8))
}

let RENAME_NOREPLACE_FLAG: UInt32 = 1
let RENAME_EXCHANGE_FLAG: UInt32 = 2

/// Deterministic pseudo-random bytes (xorshift), so failures are reproducible.
func testBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var x = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17
        var v = x
        for _ in 0..<8 where i < count { out[i] = UInt8(truncatingIfNeeded: v); v >>= 8; i += 1 }
    }
    return out
}

func errnoName(_ e: Int32) -> String {
    let names: [Int32: String] = [
        0: "OK", EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EACCES: "EACCES",
        EEXIST: "EEXIST", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL",
        ENOSPC: "ENOSPC", EROFS: "EROFS", ENAMETOOLONG: "ENAMETOOLONG",
        ENOTEMPTY: "ENOTEMPTY", EILSEQ: "EILSEQ", ENOSYS: "ENOSYS",
        ENOTCONN: "ENOTCONN", EXDEV: "EXDEV", EBUSY: "EBUSY",
    ]
    return names[e] ?? "errno \(e)"
}

/// Asserts an errno by name, so failures read "got EPERM, expected EACCES".
func XCTAssertErrno(
    _ got: Int32, _ expected: Int32, _ message: String = "",
    file: StaticString = #filePath, line: UInt = #line
) {
    XCTAssert(
        got == expected, "got \(errnoName(got)), expected \(errnoName(expected)) \(message)",
        file: file, line: line)
}

/// Asserts a read succeeded with exactly `want`; on failure reports sizes and the first
/// differing offset instead of dumping the bytes.
func XCTAssertBytes(
    _ got: (bytes: [UInt8]?, errno: Int32), _ want: [UInt8], _ message: String = "",
    file: StaticString = #filePath, line: UInt = #line
) {
    guard let b = got.bytes else {
        XCTFail("read failed with \(errnoName(got.errno)) \(message)", file: file, line: line)
        return
    }
    if b == want { return }
    let diff = zip(b, want).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(b.count, want.count)
    func show(_ x: [UInt8]) -> String {
        x.count <= 120 ? String(reflecting: String(decoding: x, as: UTF8.self)) : "\(x.count) bytes"
    }
    XCTFail(
        "contents differ: got \(b.count) bytes, expected \(want.count); first difference at offset \(diff); "
            + "got \(show(b)), expected \(show(want)) \(message)", file: file, line: line)
}

/// Base class: a fresh fixture per test, mounted unless `mountsInSetUp` is false.
class MountTestCase: XCTestCase {
    var fx: MountFixture!

    /// YAML layout for `docfs init --layout`, or nil for the default (everything allowed).
    class var layout: String? { nil }
    class var mountsInSetUp: Bool { true }

    override func setUpWithError() throws {
        try super.setUpWithError()
        fx = try MountFixture(layout: Self.layout)
        if Self.mountsInSetUp {
            do { try fx.mount() } catch { fx.teardown(); throw error }
        }
    }

    override func tearDown() {
        fx?.teardown()
        fx = nil
        super.tearDown()
    }

    /// Waits up to `seconds` for `condition` (which must not touch the mount unless it is alive).
    @discardableResult
    func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(10_000) // the poll interval, within the deadline
        }
        return condition()
    }
}
