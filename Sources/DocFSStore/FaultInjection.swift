#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import Synchronization

/// TEST ONLY: crash points the crash-safety tests arm through the environment.
///
///     DOCFS_FAULT=import-commit:abort      die on the first import, after its content file was
///                                          moved into `contents/` and before its row is committed
///     DOCFS_FAULT=import-commit:abort@3    … on the third import
///     DOCFS_FAULT=modify-commit:abort[@N]  die after a new content version was renamed over the
///                                          stored contents and before its row is committed
///     DOCFS_FAULT=segment-append:abort[@N] die after a small file's bytes were appended to a
///                                          segment and before its import is committed
///     DOCFS_FAULT=upload-part:abort[@N]    a replica dies once the Nth pack is in the bucket and
///                                          its blocks recorded (the files' versions not yet on
///                                          PostgreSQL)
///     DOCFS_FAULT=link-commit:abort[@N]    the store dies at the Nth link(2) before its journal
///                                          entry (the new name, the item's count) is written
///     DOCFS_FAULT=pack-put:abort[@N]       a replica dies once the Nth pack is in the bucket and
///                                          before its blocks are recorded (a pack nothing names)
///     DOCFS_FAULT=upload-done:wait[@N]     a replica's Nth chunk of uploads is in the bucket and
///                                          its versions are not yet on PostgreSQL: it waits there
///                                          until the file DOCFS_FAULT_RELEASE exists (at most 5 min)
///     DOCFS_FAULT=fsync:wait[@N]          the Nth fsync (of a file or a folder) blocks the thread
///                                          serving it until DOCFS_FAULT_RELEASE exists, as a slow
///                                          disk's fsync would
///     DOCFS_FAULT=refetch:abort|wait[@N]  a replica's Nth chunk with a change the server decided
///                                          otherwise about (a conflicted copy, an undone change) is
///                                          completed here and the item's server state not yet
///                                          fetched again: it dies, or waits as above
///
/// "abort" ends the process at once with `_exit(134)` (no atexit handlers, no checkpoint, no
/// unlock: what `kill -9` leaves). The variable is read once, when the first store is opened in
/// the process; unset (always, outside the tests) a crash point costs one load of a nil static.
package enum FaultInjection {
    package enum Point: String, Sendable {
        case importCommit = "import-commit"
        case modifyCommit = "modify-commit"
        case linkCommit = "link-commit"
        case segmentAppend = "segment-append"
        case packPut = "pack-put"
        case uploadPart = "upload-part"
        case uploadDone = "upload-done"
        case refetch = "refetch"
        case fsync = "fsync"
    }

    struct Armed: Sendable {
        var point: Point
        var hit: Int
        /// Wait for DOCFS_FAULT_RELEASE instead of dying.
        var waits = false
    }

    /// What DOCFS_FAULT arms, parsed once.
    static let armed: Armed? = parse(ProcessInfo.processInfo.environment["DOCFS_FAULT"])

    private static let hits = Atomic<Int>(0)

    static func parse(_ value: String?) -> Armed? {
        guard let value, !value.isEmpty else { return nil }
        let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let point = Point(rawValue: parts[0]) else { return nil }
        let action = parts[1].split(separator: "@", maxSplits: 1).map(String.init)
        guard action[0] == "abort" || action[0] == "wait" else { return nil }
        let hit = action.count == 2 ? Int(action[1]) ?? 1 : 1
        return Armed(point: point, hit: max(hit, 1), waits: action[0] == "wait")
    }

    /// Called when the store opens, so a malformed value is reported where someone will see it.
    static func describeArmed() -> String? {
        guard let value = ProcessInfo.processInfo.environment["DOCFS_FAULT"], !value.isEmpty else { return nil }
        guard let armed else { return "DOCFS_FAULT=\(value) is not understood; no fault is armed" }
        return "TEST ONLY: DOCFS_FAULT arms a \(armed.waits ? "wait" : "crash") at \(armed.point.rawValue) (hit \(armed.hit))"
    }

    /// A crash point. Does nothing unless DOCFS_FAULT armed this point and this is the chosen hit.
    /// A waiting point: does nothing unless DOCFS_FAULT armed it with "wait" and this is the
    /// chosen hit; then returns once the file DOCFS_FAULT_RELEASE exists (or after 5 minutes).
    package static func pause(_ point: Point) async {
        guard let release = waitBegins(point) else { return }
        let deadline = ContinuousClock.now + .seconds(300)
        while !release.isEmpty, access(release, F_OK) != 0, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A waiting point that blocks its thread (what a slow system call does), as `pause` waits.
    package static func hold(_ point: Point) {
        guard let release = waitBegins(point) else { return }
        let deadline = ContinuousClock.now + .seconds(300)
        while !release.isEmpty, access(release, F_OK) != 0, ContinuousClock.now < deadline {
            usleep(20_000)
        }
    }

    /// The release file to wait for when this is the armed waiting point's chosen hit (said on
    /// stderr); nil otherwise.
    private static func waitBegins(_ point: Point) -> String? {
        guard let armed, armed.point == point, armed.waits else { return nil }
        guard hits.add(1, ordering: .relaxed).newValue == armed.hit else { return nil }
        let release = ProcessInfo.processInfo.environment["DOCFS_FAULT_RELEASE"] ?? ""
        let message = "docfs: DOCFS_FAULT: waiting at \(point.rawValue) for \(release)\n"
        _ = message.withCString { Glibc_write(2, $0, strlen($0)) }
        return release
    }

    @inline(__always)
    package static func point(_ point: Point) {
        guard let armed, armed.point == point, !armed.waits else { return }
        let count = hits.add(1, ordering: .relaxed).newValue
        guard count == armed.hit else { return }
        let message = "docfs: DOCFS_FAULT: crashing at \(point.rawValue) (hit \(count))\n"
        _ = message.withCString { Glibc_write(2, $0, strlen($0)) }
        _exit(134)
    }

    @inline(__always)
    private static func Glibc_write(_ fd: Int32, _ buffer: UnsafePointer<CChar>, _ count: Int) -> Int {
        #if canImport(Glibc)
            return Glibc.write(fd, buffer, count)
        #else
            return Darwin.write(fd, buffer, count)
        #endif
    }
}
