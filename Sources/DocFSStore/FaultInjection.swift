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
///     DOCFS_FAULT=upload-part:abort[@N]    a replica dies once the Nth part of a multipart upload
///                                          is in the bucket (the upload open, its version not yet
///                                          on PostgreSQL)
///
/// "abort" ends the process at once with `_exit(134)` (no atexit handlers, no checkpoint, no
/// unlock: what `kill -9` leaves). The variable is read once, when the first store is opened in
/// the process; unset (always, outside the tests) a crash point costs one load of a nil static.
public enum FaultInjection {
    public enum Point: String, Sendable {
        case importCommit = "import-commit"
        case modifyCommit = "modify-commit"
        case uploadPart = "upload-part"
    }

    struct Armed: Sendable {
        var point: Point
        var hit: Int
    }

    /// What DOCFS_FAULT arms, parsed once.
    static let armed: Armed? = parse(ProcessInfo.processInfo.environment["DOCFS_FAULT"])

    private static let hits = Atomic<Int>(0)

    static func parse(_ value: String?) -> Armed? {
        guard let value, !value.isEmpty else { return nil }
        let parts = value.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let point = Point(rawValue: parts[0]) else { return nil }
        let action = parts[1].split(separator: "@", maxSplits: 1).map(String.init)
        guard action[0] == "abort" else { return nil }
        let hit = action.count == 2 ? Int(action[1]) ?? 1 : 1
        return Armed(point: point, hit: max(hit, 1))
    }

    /// Called when the store opens, so a malformed value is reported where someone will see it.
    static func describeArmed() -> String? {
        guard let value = ProcessInfo.processInfo.environment["DOCFS_FAULT"], !value.isEmpty else { return nil }
        guard let armed else { return "DOCFS_FAULT=\(value) is not understood; no fault is armed" }
        return "TEST ONLY: DOCFS_FAULT arms a crash at \(armed.point.rawValue) (hit \(armed.hit))"
    }

    /// A crash point. Does nothing unless DOCFS_FAULT armed this point and this is the chosen hit.
    @inline(__always)
    public static func point(_ point: Point) {
        guard let armed, armed.point == point else { return }
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
