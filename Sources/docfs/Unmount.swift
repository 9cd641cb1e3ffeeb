import ArgumentParser
import Foundation
import Glibc

struct Unmount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unmount a docfs mount and wait for its daemon to finish.")

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Flag(
        help:
            "A replica: unmount at once, leaving changes not yet on the server in the outbox for the next mount (Ctrl-C while waiting does the same)."
    )
    var noWait = false

    func run() throws {
        let mnt = MountTable.canonical(mountpoint)
        guard let entry = MountTable.entry(at: mnt) else {
            throw UserFacingError("docfs: \(mountpoint) is not mounted")
        }
        guard entry.type == "fuse.docfs" else {
            throw UserFacingError("docfs: \(mountpoint) is not a docfs mount (it is \(entry.type))")
        }
        if !noWait { waitForOutbox(mnt) }
        let pid = daemonPID(source: entry.source)
        let status = runProgram("/bin/fusermount3", ["-u", mnt])
        if status != 0, umount2(mnt, 0) != 0 {
            throw UserFacingError(
                "docfs: cannot unmount \(mountpoint): \(String(cString: strerror(errno))) (busy? close files and leave the directory, or use fusermount3 -uz)"
            )
        }
        // The daemon finishes what it acknowledged before it exits.
        if let pid {
            let deadline = Date().addingTimeInterval(30)
            while Self.isRunning(pid), Date() < deadline { usleep(20_000) }
        }
    }

    /// Whether a process runs: it exists and is not a zombie (an exited child of the caller that
    /// was not reaped yet still answers kill(pid, 0)).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return true }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state != "Z" && state != "X"
    }

    /// The daemon's pid, as the store's lock file records it.
    private func daemonPID(source: String) -> pid_t? {
        guard source.hasPrefix("docfs:") else { return nil }
        let store = String(source.dropFirst("docfs:".count))
        guard let text = try? String(contentsOfFile: store + "/lock", encoding: .utf8) else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private func runProgram(_ path: String, _ args: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        do { try p.run() } catch { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// A replica: waits until the server has every change that can be sent, with a progress
    /// line; never for changes set aside (the server refused them), nor longer than a minute
    /// while the server is unreachable. Ctrl-C stops waiting. What is not sent stays in the
    /// outbox for the next mount, and is said.
    private func waitForOutbox(_ mnt: String) {
        guard var snapshot = try? Status.read(mnt), snapshot.sendable > 0 else {
            if let s = try? Status.read(mnt) { reportLeft(s, why: nil) }
            return
        }
        unmountInterrupted = 0
        signal(SIGINT) { _ in unmountInterrupted = 1 }
        defer { signal(SIGINT, SIG_DFL) }
        let tty = isatty(STDERR_FILENO) == 1
        let first = max(snapshot.pending, 1)
        var lastPrinted = Date.distantPast
        var offlineSince: Date?
        while snapshot.sendable > 0, unmountInterrupted == 0 {
            let state = snapshot.fields["state"] as? String
            if state == "offline" || state == "stalled" {
                let since = offlineSince ?? Date()
                offlineSince = since
                if Date().timeIntervalSince(since) > Self.offlineWait { break }
            } else {
                offlineSince = nil
            }
            if tty || Date().timeIntervalSince(lastPrinted) >= 1 {
                let done = first - min(snapshot.pending, first)
                let width = 30
                let filled = width * done / first
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                let bytes = (snapshot.fields["pendingBytes"] as? NSNumber)?.int64Value ?? 0
                var line = "docfs: uploading [\(bar)] \(snapshot.pending) change(s), \(Status.bytesText(bytes)) left"
                if let error = snapshot.fields["lastError"] as? String { line += " — \(error)" }
                FileHandle.standardError.write(Data((tty ? "\r\u{1B}[K" + line : line + "\n").utf8))
                lastPrinted = Date()
            }
            usleep(200_000)
            guard let next = try? Status.read(mnt) else { break }
            snapshot = next
        }
        if tty { FileHandle.standardError.write(Data("\n".utf8)) }
        if unmountInterrupted != 0 {
            FileHandle.standardError.write(Data("docfs: not waiting: \(snapshot.pending) change(s) stay in the outbox for the next mount\n".utf8))
        } else if snapshot.sendable > 0 {
            reportLeft(
                snapshot,
                why: "the server stayed unreachable for \(Int(Self.offlineWait)) s (\(snapshot.fields["lastError"] as? String ?? "offline"))")
        } else {
            reportLeft(snapshot, why: nil)
        }
    }

    /// How long an unreachable server is waited for.
    static let offlineWait: TimeInterval = 60

    /// One line for changes left in the outbox (set aside, or unsent), if any.
    private func reportLeft(_ snapshot: Status.Snapshot, why: String?) {
        guard snapshot.pending > 0 else { return }
        let aside = snapshot.fields["setAside"] as? Int ?? 0
        var line = "docfs: \(snapshot.pending) change(s) stay in the outbox for the next mount"
        if let why { line += ": " + why }
        if aside > 0 { line += "; \(aside) item(s) set aside, refused by the server (user.docfs.sync says why; docfs status lists them)" }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

/// Set by Ctrl-C while `docfs unmount` waits for the outbox.
nonisolated(unsafe) private var unmountInterrupted: sig_atomic_t = 0
