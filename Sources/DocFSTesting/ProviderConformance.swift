import Foundation
import Glibc
import Logging
import Synchronization
import DocFS

/// The contract a docfs mount relies on, checked against any provider: mounted in this process
/// (as `TemporaryMount` does), driven with POSIX calls on the mountpoint and compared with what
/// the provider itself answers. What a provider does not declare is skipped, never failed: a
/// read-only tree gets the reading checks; one with a folder that allows adding gets the writing
/// ones. The opt-ins are found by a cast, as the mount finds them: a `TrashProvider` gets the
/// trash round trip (its trash served as `/.Trash`), an `ExtendedAttributeProvider` the
/// extended attributes (unless the mount answers ENOTSUP), a `HardLinkProvider` the hard links.
///
/// ```swift
/// func testConformance() throws {
///     let report = try ProviderConformance.check(MyProvider())
///     XCTAssert(report.passed, "\(report)")
/// }
/// ```
/// Call it from a plain (non-async) test, as `TemporaryMount`; it needs `/dev/fuse` (root, or a
/// user allowed to mount FUSE). The checks leave what they made inside `conformance-*` names in
/// the first folder that allows adding, and remove it at the end.
public enum ProviderConformance {
    /// What a provider declares beyond its items' capabilities.
    public struct Options: Sendable {
        /// The mount's options (the trash is turned on when it is served, see `trash`).
        public var mount = MountOptions()
        /// Whether the mount serves the provider's trash: `rm` moves an item into `/.Trash`, `mv`
        /// out of it restores it, and the provider's identifier stays. nil (the default): when
        /// the provider is a `TrashProvider`; true for a provider that is not fails the check.
        public var trash: Bool?
        /// A document the provider keeps in `folder` (a path from the root, "" for the root) as
        /// a file called `name`, and contents it refuses (`.corruptFile` or `.typeNotAllowed`)
        /// as that file's next version: checks that the old version stays.
        public var refusedModification: RefusedModification?
        /// How many files' contents are read through the mount and compared with the provider's.
        public var filesToRead = 50
        /// How to make the provider change an item on its own, as a sync from elsewhere would,
        /// and signal it through `observeChanges`: rename the item, then delete it. nil for a
        /// provider whose tree changes only through the mount (the signal check is skipped).
        public var onItsOwn: OnItsOwn?
        /// How long a change the provider signals may take to show through the kernel's caches.
        public var signalDeadline: TimeInterval = 10

        public init() {}

        /// Whether the mount serves the trash: as declared, else when the provider has one.
        func servesTrash(of provider: any Provider) -> Bool { trash ?? (provider is any TrashProvider) }
    }

    public struct OnItsOwn: Sendable {
        public var rename: @Sendable (ItemIdentifier, String) async throws -> Void
        public var delete: @Sendable (ItemIdentifier) async throws -> Void
        public init(
            rename: @escaping @Sendable (ItemIdentifier, String) async throws -> Void,
            delete: @escaping @Sendable (ItemIdentifier) async throws -> Void
        ) {
            (self.rename, self.delete) = (rename, delete)
        }
    }

    public struct RefusedModification: Sendable {
        public var folder: String
        public var name: String
        public var accepted: [UInt8]
        public var refused: [UInt8]
        public init(folder: String, name: String, accepted: [UInt8], refused: [UInt8]) {
            (self.folder, self.name, self.accepted, self.refused) = (folder, name, accepted, refused)
        }
    }

    public struct Outcome: Sendable, CustomStringConvertible {
        public enum Status: String, Sendable { case passed, failed, skipped }
        public var check: String
        public var status: Status
        /// What failed, or why it was skipped.
        public var detail: String
        public var description: String { "\(status.rawValue): \(check)\(detail.isEmpty ? "" : " — " + detail)" }
    }

    public struct Report: Sendable, CustomStringConvertible {
        public var outcomes: [Outcome]
        public var failures: [Outcome] { outcomes.filter { $0.status == .failed } }
        public var passed: Bool { failures.isEmpty }
        public var description: String { outcomes.map(\.description).joined(separator: "\n") }
        /// The outcome of one check by its name.
        public subscript(check: String) -> Outcome.Status? { outcomes.first { $0.check == check }?.status }
    }

    /// Mounts `provider`, runs every check it declares, unmounts, and reports.
    public static func check(
        _ provider: any Provider, options: Options = Options(),
        logger: Logger = Logger(label: "docfs.conformance")
    ) throws -> Report {
        var mountOptions = options.mount
        if options.servesTrash(of: provider) { mountOptions.bridge.trash = true }
        let mount = try TemporaryMount(provider, options: mountOptions, logger: logger)
        defer { mount.close() }
        let run = ConformanceRun(provider: provider, mountpoint: mount.path, options: options)
        run.all()
        return Report(outcomes: run.outcomes)
    }
}

/// Why a check stops: a failed expectation or a declaration the provider does not make.
enum CheckStop: Error {
    case failed(String)
    case skipped(String)
}

/// One run of the suite over one mounted provider: the checks (ProviderConformance+Checks.swift)
/// and what they share.
final class ConformanceRun {
    let provider: any Provider
    let mnt: String
    let options: ProviderConformance.Options
    private(set) var outcomes: [ProviderConformance.Outcome] = []
    /// Names this run made (removed at the end).
    let tag = "conformance-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"

    init(provider: any Provider, mountpoint: String, options: ProviderConformance.Options) {
        self.provider = provider
        mnt = mountpoint
        self.options = options
    }

    /// Runs `body` as the check `name`, recording how it ended.
    func check(_ name: String, _ body: () throws -> Void) {
        do {
            try body()
            outcomes.append(.init(check: name, status: .passed, detail: ""))
        } catch CheckStop.failed(let why) {
            outcomes.append(.init(check: name, status: .failed, detail: why))
        } catch CheckStop.skipped(let why) {
            outcomes.append(.init(check: name, status: .skipped, detail: why))
        } catch {
            outcomes.append(.init(check: name, status: .failed, detail: "\(error)"))
        }
    }

    func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw CheckStop.failed(message()) }
    }

    // MARK: The provider, synchronously

    /// An async provider action, waited for on this (non-async) thread.
    func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = ResultBox<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do { box.set(.success(try await body())) } catch { box.set(.failure(error)) }
            done.signal()
        }
        done.wait()
        return try box.get()
    }

    /// Every item the provider enumerates, folders first by depth, with its path from the root
    /// ("" for the root). Folders that do not allow enumerating are listed, not entered.
    func walk(limit: Int = 5_000) throws -> [(path: String, item: Item)] {
        var found = [(path: "", item: try provider.item(for: .rootContainer))]
        var index = 0
        while index < found.count, found.count < limit {
            let (path, folder) = found[index]
            index += 1
            guard folder.isFolder, folder.capabilities.contains(.allowsContentEnumerating) else { continue }
            for child in try provider.enumerateItems(in: folder.identifier) {
                found.append((path + "/" + child.filename, child))
            }
        }
        return found
    }

    /// The first folder (by depth) that allows adding and enumerating, with its path.
    func writableFolder() throws -> (path: String, item: Item)? {
        try walk().first { $0.item.isFolder && $0.item.capabilities.isSuperset(of: [.allowsAddingSubItems, .allowsContentEnumerating]) }
    }

    func names(in folder: ItemIdentifier) throws -> [String] {
        try provider.enumerateItems(in: folder).map(\.filename).sorted()
    }

    func childIdentifier(_ name: String, in folder: ItemIdentifier) -> ItemIdentifier? {
        try? provider.childItem(named: name, in: folder).identifier
    }

    // MARK: The mount, with POSIX calls

    func m(_ path: String) -> String { mnt + path }

    /// The names `readdir` gives for a folder of the mount (without `.` and `..`).
    func listing(_ path: String) throws -> [String] {
        guard let dir = opendir(m(path)) else { throw CheckStop.failed("opendir \(path): \(String(cString: strerror(errno)))") }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    func lstatus(_ path: String) -> stat? {
        var st = stat()
        return lstat(m(path), &st) == 0 ? st : nil
    }

    /// Reads a whole file of the mount.
    func readAll(_ path: String) throws -> [UInt8] {
        let fd = open(m(path), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CheckStop.failed("open \(path) for reading: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        return try Self.readAll(fd: fd, what: path)
    }

    static func readAll(fd: Int32, what: String) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if n == 0 { return bytes }
            guard n > 0 else { throw CheckStop.failed("read \(what): \(String(cString: strerror(errno)))") }
            bytes += buffer[0..<n]
        }
    }

    /// Writes `bytes` as the file's whole contents; the errno of the first call that failed
    /// (close's included), 0 when all returned 0.
    @discardableResult
    func writeFile(_ path: String, _ bytes: [UInt8], flags: Int32 = O_CREAT | O_TRUNC) -> Int32 {
        let fd = open(m(path), O_WRONLY | O_CLOEXEC | flags, 0o644)
        guard fd >= 0 else { return errno }
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
            guard n > 0 else { let e = errno; close(fd); return e }
            done += n
        }
        return close(fd) == 0 ? 0 : errno
    }

    /// The errno of a call that returned -1 (0 when it succeeded).
    func errnoOf(_ result: Int32) -> Int32 { result == 0 ? 0 : errno }

    /// Waits until `condition` holds, up to the signal deadline (polling, not sleeping blind).
    func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(options.signalDeadline)
        while !condition() {
            if Date() > deadline { return false }
            usleep(20_000)
        }
        return true
    }

    static func errnoName(_ code: Int32) -> String {
        code == 0 ? "success" : "\(String(cString: strerror(code))) (\(code))"
    }
}

/// A result handed from a task to the thread waiting for it.
final class ResultBox<T: Sendable>: Sendable {
    private let result = Mutex<Result<T, any Error>?>(nil)
    func set(_ value: Result<T, any Error>) { result.withLock { $0 = value } }
    func get() throws -> T { try result.withLock { $0! }.get() }
}
