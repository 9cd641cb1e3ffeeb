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
    /// Where the file can be read while access is on (made on demand: building a URL costs more
    /// than the rename that opens the window).
    public var url: URL { URL(fileURLWithPath: path, isDirectory: false) }
    /// The item's name (the last component of `url`).
    public let name: String
    /// `url` as a path, kept: Foundation's `URL.path` decodes the URL again on every call.
    public let path: String

    private let sealedPath: String
    private let folder: String
    /// Set when the folder is borrowed (see `init(sealed:name:borrowing:returnFolder:)`).
    private let returnFolder: (@Sendable () -> Void)?
    /// `moved`: the file is at neither name any more (the provider took it), so `finish()` has
    /// nothing to remove and need not look.
    /// `sealedWindow`: the window is open at the sealed path (`withSealedPath`); a start now fails.
    private let state = Mutex<(accessCount: Int, finished: Bool, moved: Bool, sealedWindow: Bool)>((0, false, false, false))

    private static let counter = Atomic<UInt64>(0)

    /// Wraps the file (or directory) at `sealedPath`; while access is on it is visible as `name` in
    /// a private folder made inside `directory`, which must be on the same filesystem.
    public init(sealed sealedPath: String, name: String, in directory: URL) throws(ProviderError) {
        let n = Self.counter.add(1, ordering: .relaxed).newValue
        let folder = directory.appendingPathComponent("scope-\(getpid())-\(n)", isDirectory: true).path
        guard mkdir(folder, 0o700) == 0 else { throw ProviderError.posix(errno, "create a scoped staging folder") }
        self.sealedPath = sealedPath
        self.folder = folder
        self.name = name
        self.path = folder + "/" + name
        self.returnFolder = nil
    }

    /// The same over an existing empty private folder that the caller reuses across imports:
    /// `finish()` empties it and calls `returnFolder` instead of removing it. (Making and removing
    /// a folder per import cost more than the import on ext4.)
    public init(sealed sealedPath: String, name: String, borrowing folder: String, returnFolder: @escaping @Sendable () -> Void) {
        self.sealedPath = sealedPath
        self.folder = folder
        self.name = name
        self.path = self.folder + "/" + name
        self.returnFolder = returnFolder
    }

    /// The file at `fileURL` as its own access window, for the plain
    /// `Provider.importDocument(at:toParentItemIdentifier:)`: `url` is `fileURL`, starting and
    /// stopping access rename nothing (the file already has its name), and no folder is made or
    /// removed. The caller ends it with `finish()` once the import succeeded (what the provider
    /// did not move away goes, as a move would have taken it) or with `release()` when it
    /// failed (the file stays where the caller put it).
    init(inPlace fileURL: URL) {
        let path = fileURL.path
        self.sealedPath = path
        self.path = path
        self.name = fileURL.lastPathComponent
        self.folder = (path as NSString).deletingLastPathComponent
        self.returnFolder = {}
    }

    deinit { finish() }

    /// Opens the access window (counted: nested starts need as many stops). False once finished or
    /// when the staged file is gone.
    public func startAccessingSecurityScopedResource() -> Bool {
        state.withLock { s in
            if s.finished || s.sealedWindow { return false }
            if s.accessCount == 0 {
                guard !s.moved, rename(sealedPath, path) == 0 else { return false }
            }
            s.accessCount += 1
            return true
        }
    }

    /// Closes the access window: if the provider left the file where it was, it is sealed again.
    public func stopAccessingSecurityScopedResource() {
        state.withLock { s in
            guard s.accessCount > 0, !s.sealedWindow else { return }
            s.accessCount -= 1
            if s.accessCount == 0, rename(path, sealedPath) != 0, errno == ENOENT {
                s.moved = true
            }
        }
    }

    public var isAccessing: Bool { state.withLock { $0.accessCount > 0 } }

    /// For a provider that moves the staged file straight into its own storage, as the embedded
    /// store does: runs `body` with the file's sealed path as the access window, without first
    /// renaming it to `url` (a rename, and a folder lock, less per import). Refused like
    /// `startAccessingSecurityScopedResource()` once the scope has finished or while a window is
    /// open; afterwards the file counts as taken if `body` moved it away.
    public func withSealedPath<T>(_ body: (String) throws(ProviderError) -> T) throws(ProviderError) -> T {
        let opened = state.withLock { s -> Bool in
            guard !s.finished, !s.moved, s.accessCount == 0 else { return false }
            s.accessCount = 1
            s.sealedWindow = true
            return true
        }
        guard opened else {
            throw ProviderError(.noSuchItem, "the staged file for '\(name)' is no longer accessible (its security scope has ended)")
        }
        defer {
            state.withLock { s in
                s.accessCount = 0
                s.sealedWindow = false
                var st = stat()
                if !s.moved, lstat(sealedPath, &st) != 0, errno == ENOENT { s.moved = true }
            }
        }
        return try body(sealedPath)
    }

    /// Called inside `withSealedPath` by a provider that has moved the file away (renamed it
    /// into its storage): the window's end then need not look (one `lstat` less per import).
    public func noteMovedAway() { state.withLock { $0.moved = true } }

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
            if !s.moved {
                if s.accessCount > 0 { Self.removeTree(path) }
                Self.removeTree(sealedPath)
            }
            s.accessCount = 0
            if let returnFolder { returnFolder() } else { _ = rmdir(folder) }
        }
    }

    /// Ends the scope like `finish()` but leaves the file where it is: an in-place scope
    /// (`init(inPlace:)`) whose import failed.
    func release() {
        state.withLock { s in
            guard !s.finished else { return }
            s.finished = true
            s.accessCount = 0
            s.moved = true
        }
    }

    public var description: String { "SecurityScopedURL(\(path))" }

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
