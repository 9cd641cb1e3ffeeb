import Foundation
import Logging
import DocFS
import DocFSStore
import DocFSReplica
import Synchronization

/// A store mounted on a path — with its sync engine when the store is a replica of a server
/// (`docfs init --remote`): what `docfs mount STORE MOUNTPOINT` runs, for a library user too.
///
/// ```swift
/// import DocFSStoreMount
/// let mount = try StoreMount(storeAt: "/var/lib/docfs/team", at: "/srv/team",
///                            options: StoreMount.Options(cacheSize: 10 << 30))
/// try mount.serve()   // until unmounted; the sync starts once the mount answers
/// ```
/// or `start()` to serve on a thread of its own and `unmount()` to stop. What is not on the
/// server yet when it stops stays in the store's outbox for the next mount.
public final class StoreMount: @unchecked Sendable {
    public struct Options: Sendable {
        /// The kernel cache, the bridge's knobs and libfuse's options. The trash is on when this
        /// asks for it or the store's layout does; the inode limit follows `cacheItems`.
        public var mount: MountOptions
        /// Items the store keeps in memory (nil: its default).
        public var cacheItems: Int?
        /// A replica's limit for downloaded contents, in bytes (nil: none). Refused for a store
        /// of its own, which keeps every file's contents here.
        public var cacheSize: Int64?
        /// A replica's transfers to and from the bucket, bytes per second (nil: no limit).
        public var uploadLimit: Int64?
        public var downloadLimit: Int64?
        /// Small files (at most this many bytes) are stored without a file of their own, in the
        /// store's append-only segments (`-o segments=SIZE`; 0: off, `-o nosegments`). On by
        /// default: it measured faster for copies in and large writes alike (docs/PERFORMANCE.md).
        /// A replica ignores it (its files are blocks in packs).
        public var smallFileLimit: Int
        /// The bound `-o segments` sets, and the default.
        public static let defaultSmallFileLimit = 256 << 10
        public init(
            mount: MountOptions = MountOptions(), cacheItems: Int? = nil, cacheSize: Int64? = nil,
            uploadLimit: Int64? = nil, downloadLimit: Int64? = nil,
            smallFileLimit: Int = Options.defaultSmallFileLimit
        ) {
            self.smallFileLimit = smallFileLimit
            self.uploadLimit = uploadLimit
            self.downloadLimit = downloadLimit
            self.mount = mount
            self.cacheItems = cacheItems
            self.cacheSize = cacheSize
        }
    }

    /// Why a store could not be mounted; `description` is one line for a person.
    public enum MountError: Error, CustomStringConvertible {
        case cannotOpenStore(path: String, reason: String)
        case replicaConfiguration(path: String, server: String, reason: String)
        case cacheSizeWithoutRemote(path: String)
        case limitWithoutRemote(path: String)
        case cannotMount(path: String, mountpoint: String, reason: String)

        public var description: String {
            switch self {
            case let .cannotOpenStore(path, reason): return "cannot open store \(path): \(reason)"
            case let .replicaConfiguration(path, server, reason): return "store \(path) is a replica of \(server): \(reason)"
            case let .limitWithoutRemote(path):
                return "--upload-limit and --download-limit are for a replica (docfs init --remote): store \(path) has no server"
            case let .cacheSizeWithoutRemote(path):
                return "--cache-size is for a replica (docfs init --remote): store \(path) keeps all its contents here"
            case let .cannotMount(path, mountpoint, reason): return "cannot mount \(path) at \(mountpoint): \(reason)"
            }
        }
    }

    public let mountpoint: String
    public let mount: ProviderMount
    let store: LocalStore
    let engine: SyncEngine?
    private let logger: Logger
    private let finished = Mutex<Void>(())
    private var closed = false

    /// Opens the store at `path` and mounts it at `mountpoint` (an existing, empty directory);
    /// live when this returns. A replica's sync starts with `serve` or `start`.
    public init(
        storeAt path: String, at mountpoint: String, options: Options = Options(),
        logger: Logger = Logger(label: "docfs")
    ) throws(MountError) {
        self.mountpoint = mountpoint
        self.logger = logger
        let store: LocalStore
        do {
            store = try LocalStore.open(
                at: URL(fileURLWithPath: path), logger: logger, cacheItems: options.cacheItems,
                smallFileLimit: options.smallFileLimit)
        } catch {
            throw .cannotOpenStore(path: path, reason: "\(error)")
        }
        var engine: SyncEngine?
        if let replica = store.replica {
            let link = replica.remoteLink
            do {
                var configuration = try ReplicaConfiguration.resolve(link: link, store: URL(fileURLWithPath: path))
                configuration.uploadLimit = options.uploadLimit
                configuration.downloadLimit = options.downloadLimit
                // Before the mount: its init hands the store the watch of files open for
                // writing (`HeldWriters`), which the store keeps after the engine stops.
                engine = SyncEngine(store: replica, configuration: configuration, logger: logger)
            } catch {
                store.close()
                throw .replicaConfiguration(path: path, server: link.postgres, reason: "\(error)")
            }
            engine?.onDemand.setCacheLimit(options.cacheSize)
            engine?.keepSetIDBits(options.mount.fuseOptions.contains("suid"))
        } else if options.cacheSize != nil {
            store.close()
            throw .cacheSizeWithoutRemote(path: path)
        } else if options.uploadLimit != nil || options.downloadLimit != nil {
            store.close()
            throw .limitWithoutRemote(path: path)
        }
        var mountOptions = options.mount
        mountOptions.bridge.trash = mountOptions.bridge.trash || store.layout.trash
        // The kernel may hold twice as many inodes as the store keeps items; past that the oldest
        // names are invalidated, so the bridge's inode table stays bounded too.
        mountOptions.bridge.inodeLimit = 2 * (options.cacheItems ?? LocalStore.defaultCacheItems)
        do { mount = try ProviderMount(store, at: mountpoint, options: mountOptions, logger: logger) } catch {
            store.close()
            throw .cannotMount(path: path, mountpoint: mountpoint, reason: error.reason)
        }
        self.store = store
        self.engine = engine
    }

    /// Whether the store is a replica of a server (it syncs while mounted).
    public var isReplica: Bool { engine != nil }

    /// What `docfs status` shows of a replica's sync (nil for a store of its own).
    package var syncStatus: SyncStatus? { engine?.status() }

    /// The store's figures for metrics: items and their contents' bytes, a replica's transfers.
    package var storeFigures: (items: Int, contentBytes: Int64)? { store.figures() }
    package var transferFigures: (downloadedFiles: Int, downloadedBytes: Int64, evictedFiles: Int, evictedBytes: Int64) {
        engine?.onDemand.transferFigures ?? (downloadedFiles: 0, downloadedBytes: 0, evictedFiles: 0, evictedBytes: 0)
    }

    /// Changes not on the server yet (0 for a store of its own); once stopped, what was left.
    public var pendingChanges: Int {
        finished.withLock { _ in closed ? left : (engine == nil ? 0 : store.replica?.outboxCounts.pending ?? 0) }
    }
    private var left = 0

    /// Starts the sync, then serves requests on the calling thread until the mount is unmounted
    /// (or, with `signals`, SIGINT/SIGTERM/SIGHUP arrive); then stops the sync and closes the store.
    public func serve(signals: Bool = false) throws(ProviderError) {
        engine?.start()
        defer { finish() }
        try mount.serve(signals: signals)
    }

    /// Starts the sync and serves on a thread of its own; `unmount()` stops both.
    public func start() {
        engine?.start()
        mount.start()
    }

    /// Unmounts, waits for the serving thread, stops the sync and closes the store.
    public func unmount() {
        mount.unmount()
        finish()
    }

    /// The lock spans the sync's stop and the store's close on purpose: a second caller (`serve`
    /// returning after `unmount`) and `pendingChanges` wait until the store is closed, and
    /// nothing the stop runs takes this lock.
    private func finish() {
        finished.withLock { _ in
            guard !closed else { return }
            closed = true
            if let engine {
                let done = DispatchSemaphore(value: 0)
                Task {
                    await engine.stop(); done.signal()
                }
                done.wait()
                left = store.replica?.outboxCounts.pending ?? 0
            }
            store.close()
        }
    }
}
