#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A staged file (or package directory) handed to a provider, readable only between
/// `startAccessingSecurityScopedResource()` and `stopAccessingSecurityScopedResource()` — the
/// Linux stand-in for a security-scoped URL.
///
/// Outside the access window the file sits under a sealed name the provider is never told; while
/// access is on it appears at `url` (whose last component is the item's name). Starting and
/// stopping access are renames on the same filesystem, never copies. The provider moves the file
/// into its storage inside the window; whatever it leaves behind is removed by `finish()`, which
/// the caller runs once the import has completed — afterwards the staged file is gone, and a
/// provider that kept `url` and reads it later gets ENOENT rather than silent success.
public final class SecurityScopedURL: @unchecked Sendable, CustomStringConvertible {
    /// Where the file can be read while access is on.
    public let url: URL
    /// The item's name (the last component of `url`).
    public var name: String { url.lastPathComponent }

    private let sealedPath: String
    private let folder: String
    /// Set when the folder is borrowed (see `init(sealed:name:borrowing:returnFolder:)`).
    private let returnFolder: (@Sendable () -> Void)?
    private let state = Mutex<(accessCount: Int, finished: Bool)>((0, false))

    private static let counter = Atomic<UInt64>(0)

    /// Wraps the file (or directory) at `sealedPath`; while access is on it is visible as `name` in
    /// a private folder made inside `directory`, which must be on the same filesystem.
    public init(sealed sealedPath: String, name: String, in directory: URL) throws(ProviderError) {
        let n = Self.counter.add(1, ordering: .relaxed).newValue
        let folder = directory.appendingPathComponent("scope-\(getpid())-\(n)", isDirectory: true).path
        guard mkdir(folder, 0o700) == 0 else { throw ProviderError.posix(errno, "create a scoped staging folder") }
        self.sealedPath = sealedPath
        self.folder = folder
        self.url = URL(fileURLWithPath: folder).appendingPathComponent(name)
        self.returnFolder = nil
    }

    /// The same over an existing empty private folder that the caller reuses across imports:
    /// `finish()` empties it and calls `returnFolder` instead of removing it. (Making and removing
    /// a folder per import cost more than the import on ext4.)
    public init(sealed sealedPath: String, name: String, borrowing folder: URL, returnFolder: @escaping @Sendable () -> Void) {
        self.sealedPath = sealedPath
        self.folder = folder.path
        self.url = folder.appendingPathComponent(name)
        self.returnFolder = returnFolder
    }

    deinit { finish() }

    /// Opens the access window (counted: nested starts need as many stops). False once finished or
    /// when the staged file is gone.
    public func startAccessingSecurityScopedResource() -> Bool {
        state.withLock { s in
            if s.finished { return false }
            if s.accessCount == 0 {
                guard rename(sealedPath, url.path) == 0 else { return false }
            }
            s.accessCount += 1
            return true
        }
    }

    /// Closes the access window: if the provider left the file where it was, it is sealed again.
    public func stopAccessingSecurityScopedResource() {
        state.withLock { s in
            guard s.accessCount > 0 else { return }
            s.accessCount -= 1
            if s.accessCount == 0 {
                var st = stat()
                if lstat(url.path, &st) == 0 { _ = rename(url.path, sealedPath) }
            }
        }
    }

    public var isAccessing: Bool { state.withLock { $0.accessCount > 0 } }

    /// Runs `body` inside an access window.
    public func withAccess<T>(_ body: (URL) async throws(ProviderError) -> T) async throws(ProviderError) -> T {
        guard startAccessingSecurityScopedResource() else {
            throw ProviderError(.noSuchItem, "the staged file for '\(name)' is no longer accessible (its security scope has ended)")
        }
        defer { stopAccessingSecurityScopedResource() }
        return try await body(url)
    }

    /// Ends the scope for good: removes what is left of the staged file and its folder. Later
    /// starts fail.
    public func finish() {
        state.withLock { s in
            guard !s.finished else { return }
            s.finished = true
            s.accessCount = 0
            Self.removeTree(url.path)
            Self.removeTree(sealedPath)
            if let returnFolder { returnFolder() } else { _ = rmdir(folder) }
        }
    }

    public var description: String { "SecurityScopedURL(\(url.path))" }

    private static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            _ = unlink(path)
        }
    }
}
