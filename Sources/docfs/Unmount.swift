import ArgumentParser
import Foundation
import Glibc

struct Unmount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unmount a docfs mount and wait for its daemon to finish.")

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    func run() throws {
        let mnt = MountTable.canonical(mountpoint)
        guard let entry = MountTable.entry(at: mnt) else {
            throw UserFacingError("docfs: \(mountpoint) is not mounted")
        }
        guard entry.type == "fuse.docfs" else {
            throw UserFacingError("docfs: \(mountpoint) is not a docfs mount (it is \(entry.type))")
        }
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
}
