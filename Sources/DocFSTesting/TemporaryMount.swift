import Foundation
import Glibc
import Logging
import DocFS

/// A provider mounted on a fresh temporary directory for the length of a test (or of a
/// closure): always unmounted and removed afterwards, even when the body throws.
///
/// ```swift
/// try TemporaryMount.with(MyProvider()) { mnt in
///     XCTAssertEqual(try String(contentsOfFile: mnt + "/hello.txt"), "hello")
/// }
/// ```
/// The mount is served in this process on FUSE threads of its own. Call it from a plain
/// (non-async) test: file I/O on the mount from Swift's cooperative pool can wait on the very
/// threads that would answer it.
public final class TemporaryMount {
    public let path: String
    private let base: String
    private let mount: ProviderMount

    public init(
        _ provider: any Provider, options: MountOptions = MountOptions(),
        logger: Logger = Logger(label: "docfs.test")
    ) throws {
        var template = Array((NSTemporaryDirectory() + "docfs-test-\(getpid())-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw ProviderError.posix(errno, "make a temporary mountpoint")
        }
        base = String(cString: made)
        path = base + "/mnt"
        mkdir(path, 0o755)
        do {
            mount = try ProviderMount(provider, at: path, options: options, logger: logger)
        } catch {
            rmdir(path)
            rmdir(base)
            throw error
        }
        mount.start()
    }

    /// Unmounts and removes the temporary directory (also done at deinit).
    public func close() {
        mount.unmount()
        rmdir(path)
        rmdir(base)
    }

    deinit { close() }

    /// Mounts, runs `body` with the mountpoint, and always unmounts.
    public static func with<T>(
        _ provider: any Provider, options: MountOptions = MountOptions(),
        _ body: (String) throws -> T
    ) throws -> T {
        let mount = try TemporaryMount(provider, options: options)
        defer { mount.close() }
        return try body(mount.path)
    }
}
