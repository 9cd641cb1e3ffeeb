import ArgumentParser
import Foundation
import Glibc

struct Unmount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unmount a docfs mount and wait for its daemon to finish.")

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Flag(help: "A replica: unmount at once, leaving changes not yet on the server in the outbox for the next mount (Ctrl-C while waiting does the same).")
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
            throw UserFacingError("docfs: cannot unmount \(mountpoint): \(String(cString: strerror(errno))) (busy? close files and leave the directory, or use fusermount3 -uz)")
        }
        // The daemon finishes what it acknowledged before it exits.
        if let pid {
            let deadline = Date().addingTimeInterval(30)
            while kill(pid, 0) == 0, Date() < deadline { usleep(20_000) }
        }
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

    /// A replica: waits until the server has every change, with a progress line; Ctrl-C stops
    /// waiting (the rest stays in the outbox, kept for the next mount).
    private func waitForOutbox(_ mnt: String) {
        guard var snapshot = try? Status.read(mnt), snapshot.pending > 0 else { return }
        unmountInterrupted = 0
        signal(SIGINT) { _ in unmountInterrupted = 1 }
        defer { signal(SIGINT, SIG_DFL) }
        let tty = isatty(STDERR_FILENO) == 1
        let first = max(snapshot.pending, 1)
        var lastPrinted = Date.distantPast
        while snapshot.pending > 0, unmountInterrupted == 0 {
            if tty || Date().timeIntervalSince(lastPrinted) >= 5 {
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
        }
    }
}

/// Set by Ctrl-C while `docfs unmount` waits for the outbox.
nonisolated(unsafe) private var unmountInterrupted: sig_atomic_t = 0
