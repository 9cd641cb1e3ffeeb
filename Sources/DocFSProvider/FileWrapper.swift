import Foundation
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// A file, a directory of files, or a symbolic link, as a document reads and writes it — the
/// Linux twin of Foundation's `FileWrapper`, which swift-corelibs-foundation does not have.
///
/// A wrapper made from a path reads lazily: a regular file's bytes are read (memory-mapped) the
/// first time `regularFileContents` is asked for, a directory's children are listed the first time
/// `fileWrappers` is asked for, and each is read at most once. Made from values, it holds them.
public final class FileWrapper: Sendable {
    public enum Kind: Sendable, Hashable { case regularFile, directory, symbolicLink }

    public let kind: Kind
    /// The name in its parent directory (the last path component when read from disk).
    public let filename: String?
    /// Where it was read from, if it was.
    public let url: URL?

    private enum Source: Sendable {
        case disk(String)
        case contents(Data)
        case children([String: FileWrapper])
        case destination(String)
    }
    private let source: Source
    private let cachedContents = Mutex<Data?>(nil)
    private let cachedChildren = Mutex<[String: FileWrapper]?>(nil)

    /// Reads what is at `url` (without following a final symbolic link). Throws `.noSuchItem` or
    /// `.unsupported` for devices, sockets and FIFOs.
    public init(url: URL) throws(ProviderError) {
        var st = stat()
        guard lstat(url.path, &st) == 0 else { throw ProviderError.posix(errno, "read \(url.path)") }
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regularFile
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symbolicLink
        default: throw ProviderError(.unsupported, "\(url.path) is not a file, folder or symbolic link")
        }
        self.url = url
        self.filename = url.lastPathComponent
        self.source = .disk(url.path)
    }

    public init(regularFileWithContents contents: Data, filename: String? = nil) {
        kind = .regularFile
        url = nil
        self.filename = filename
        source = .contents(contents)
    }

    public init(directoryWithFileWrappers children: [String: FileWrapper], filename: String? = nil) {
        kind = .directory
        url = nil
        self.filename = filename
        source = .children(children)
    }

    public init(symbolicLinkWithDestination destination: String, filename: String? = nil) {
        kind = .symbolicLink
        url = nil
        self.filename = filename
        source = .destination(destination)
    }

    public var isRegularFile: Bool { kind == .regularFile }
    public var isDirectory: Bool { kind == .directory }
    public var isSymbolicLink: Bool { kind == .symbolicLink }

    /// A regular file's bytes (nil for other kinds, or when they cannot be read).
    public var regularFileContents: Data? {
        guard kind == .regularFile else { return nil }
        switch source {
        case .contents(let data): return data
        case .disk(let path):
            return cachedContents.withLock { cached in
                if let cached { return cached }
                let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
                cached = data
                return data
            }
        default: return nil
        }
    }

    /// A directory's children by name (nil for other kinds, or when it cannot be listed).
    public var fileWrappers: [String: FileWrapper]? {
        guard kind == .directory else { return nil }
        switch source {
        case .children(let children): return children
        case .disk(let path):
            return cachedChildren.withLock { cached in
                if let cached { return cached }
                guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return nil }
                var children: [String: FileWrapper] = [:]
                for name in names {
                    if let child = try? FileWrapper(url: URL(fileURLWithPath: path + "/" + name)) { children[name] = child }
                }
                cached = children
                return children
            }
        default: return nil
        }
    }

    /// A symbolic link's target.
    public var symbolicLinkDestination: String? {
        guard kind == .symbolicLink else { return nil }
        switch source {
        case .destination(let target): return target
        case .disk(let path):
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(path, &buf, buf.count - 1)
            guard n >= 0 else { return nil }
            return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        default: return nil
        }
    }

    /// Bytes of contents: a file's size, a symbolic link's target length, and for a directory the
    /// sum over everything inside it (how a package's documentSize is counted). Sizes come from
    /// `stat`, so nothing is read to count them.
    public var totalSize: Int64 {
        switch (kind, source) {
        case (.regularFile, .contents(let data)): return Int64(data.count)
        case (.regularFile, .disk(let path)):
            var st = stat()
            return lstat(path, &st) == 0 ? Int64(st.st_size) : 0
        case (.symbolicLink, _): return Int64(symbolicLinkDestination?.utf8.count ?? 0)
        case (.directory, _): return (fileWrappers ?? [:]).values.reduce(0) { $0 + $1.totalSize }
        default: return 0
        }
    }

    /// Writes the wrapper at `url` (which must not exist yet).
    public func write(to url: URL) throws(ProviderError) {
        switch kind {
        case .regularFile:
            guard let data = regularFileContents else { throw ProviderError(.ioError, "no contents to write to \(url.path)") }
            do { try data.write(to: url, options: .withoutOverwriting) } catch {
                throw ProviderError(.ioError, "write \(url.path): \(error.localizedDescription)")
            }
        case .directory:
            guard mkdir(url.path, 0o755) == 0 else { throw ProviderError.posix(errno, "create folder \(url.path)") }
            for (name, child) in fileWrappers ?? [:] { try child.write(to: url.appendingPathComponent(name)) }
        case .symbolicLink:
            guard let target = symbolicLinkDestination, symlink(target, url.path) == 0 else {
                throw ProviderError.posix(errno, "create symbolic link \(url.path)")
            }
        }
    }
}
