import ArgumentParser
import Foundation
import Glibc
import Logging
import DocFS
import DocFSStoreMount
import DocFSProvider
import DocFSStore
import DocFSRemote
import DocFSReplica
import DocFSMemory
import DocFSMetrics
import Metrics
import Prometheus

struct Mount: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mount a store; returns once the mount is live (-f stays in the foreground).",
        discussion: """
            -o takes FUSE mount options (allow_other, ro, noexec, nosuid, …) and docfs's own \
            knobs, comma-separated:

            entry_timeout=SECONDS, attr_timeout=SECONDS: how long the kernel caches names and \
            attributes (default 30: only this mount changes the store, so the kernel's cache stays right).

            keep_cache / no_keep_cache: keep a file's pages across opens (default on).

            writeback / no_writeback: the kernel's write-back cache for small writes (default off).

            noxattr: no extended attributes (no tags or user.* attributes through this mount, one \
            round trip less per write and per `ls -l` entry; default: served).

            noprefetch: do not read a folder's other small files ahead when one is opened for \
            reading (default: read ahead, at most once a folder in 30 s).

            parallel_dirops / noparallel_dirops: let the kernel send lookups and listings of \
            one folder side by side instead of one at a time (default on).

            splice / no_splice: move written bytes from the kernel into the file without a copy \
            through the daemon (less CPU for large writes, a little more for every other request; \
            default off).

            passthrough=on / passthrough=off: let the kernel read and write a stored file \
            straight from the store (FUSE passthrough: Linux 6.9+, and CAP_SYS_ADMIN to register \
            the file; without them reads and writes go through the daemon, said once in the log). \
            A writer opening a file the kernel's readers hold joins them at once: they share one \
            live file, and the version it replaces is kept. Default on; `-o passthrough=off` \
            sends every read and write through the daemon.

            passthrough_create / nopassthrough_create: answer a create with its staged file as \
            the backing file, so the kernel writes new files itself too; each close imports a \
            copy of it (default off: measured no faster, see docs/PERFORMANCE.md).

            segments[=SIZE] / nosegments: keep the bytes of small files (at most SIZE, default \
            256K) appended to the store's segment files instead of a file each: no inode to make \
            and no rename per file copied in (default on, 256K; nosegments gives every file a \
            content file of its own; no_segments is the same).

            io_uring / no_io_uring: serve requests through FUSE over io_uring (per-CPU rings, \
            one submission per reply and next request) where the kernel offers it (Linux 6.14+, \
            as root: echo Y > /sys/module/fuse/parameters/enable_uring); without it, /dev/fuse \
            serves them (the log says so when io_uring was given; default off: it measured \
            slower than /dev/fuse; io_uring=off is the same as no_io_uring).

            cache_items=N: how many items (and as many folder-index entries) the store keeps in \
            memory; the rest of the tree stays in its database and is read on demand (default \
            50000, about 20 MB; a store of any size mounts at once). The kernel may hold twice as \
            many inodes; past that the oldest names it looked up are invalidated. Same as \
            --cache-items.

            metrics=PORT or metrics=ADDRESS:PORT: serve Prometheus metrics at \
            http://ADDRESS:PORT/metrics (ADDRESS 127.0.0.1 when left out; see docs/USING.md for the \
            names). A loopback address only, unless metrics_public is given too: anyone who reaches \
            the port reads the figures. Same as --metrics and --metrics-public.

            Options that only mount(8) and fstab use (defaults, auto, noauto, user, users, nouser, \
            nofail, _netdev, x-*, comment=*) are accepted and ignored, so the same option list \
            works here, with `mount -t fuse.docfs` and in /etc/fstab.

            auto_unmount is always on, so a daemon that dies leaves no dead mountpoint; and \
            the mount is nosuid, unless suid is given explicitly (as root: then without \
            auto_unmount, and a replica keeps set-ID bits of files from the server).

            STORE may be `memory:` instead of a store: the in-memory provider, a tree kept in \
            the daemon's memory that starts empty, allows everything and is gone at unmount \
            (nothing persists; with --trash it has a trash). A background daemon then logs to \
            --log-file, by default $TMPDIR/docfs-memory-UID.log.
            """)

    @Argument(help: "The store to serve (made with `docfs init`), or `memory:` for an empty in-memory tree that nothing persists.")
    var store: String

    @Argument(help: "An empty directory to mount on.")
    var mountpoint: String

    @Flag(name: .shortAndLong, help: "Stay in the foreground; logs go to standard error.")
    var foreground = false

    @Option(name: .short, help: "Mount options, comma-separated (repeatable).")
    var o: [String] = []

    @Flag(help: "Give the tree a trash (rm moves items to /.Trash).")
    var trash = false

    @Flag(
        help:
            "Let every user on the machine reach the mount (FUSE's allow_other). Safe: docfs checks owners and permission bits for each caller as ext4 does."
    )
    var allowOther = false

    @Option(help: "Items the store keeps in memory (its working set; default 50000). Same as -o cache_items=N.")
    var cacheItems: Int?

    @Option(
        help: ArgumentHelp(
            "A replica's limit for downloaded contents, e.g. 64M or 10G: files the server has and no one has open are evicted, least recently opened first.",
            valueName: "size"))
    var cacheSize: String?

    @Option(
        name: .customLong("upload-limit"),
        help: ArgumentHelp("A replica's upload rate limit, bytes per second, e.g. 10M or 512k. Same as -o upload_limit=RATE.", valueName: "rate"))
    var uploadLimit: String?

    @Option(
        name: .customLong("download-limit"),
        help: ArgumentHelp("A replica's download rate limit, e.g. 10M. Same as -o download_limit=RATE.", valueName: "rate"))
    var downloadLimit: String?

    @Option(
        help: ArgumentHelp(
            "Serve Prometheus metrics at http://ADDRESS:PORT/metrics (PORT alone: on 127.0.0.1). Same as -o metrics=ADDRESS:PORT.",
            valueName: "address:port"))
    var metrics: String?

    @Flag(help: "Let --metrics serve on an address other than loopback (anyone who reaches it reads the metrics). Same as -o metrics_public.")
    var metricsPublic = false

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(help: "Where a background daemon writes its log (default: STORE/docfs.log).")
    var logFile: String?

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown log level '\(logLevel)'")
        }
        if let cacheItems, cacheItems < 1 {
            throw ValidationError("--cache-items: expected a positive number of items")
        }
        for (name, value) in [("--upload-limit", uploadLimit), ("--download-limit", downloadLimit)] {
            if let value, RateLimit.parse(value) == nil {
                throw ValidationError("\(name): expected bytes per second such as 10M, 512k or 250000, not '\(value)'")
            }
        }
        if let metrics {
            do {
                _ = try MetricsAddress.parse(
                    metrics, public: metricsPublic || o.joined(separator: ",").split(separator: ",").contains("metrics_public"))
            } catch {
                throw ValidationError("--metrics: \(error)")
            }
        }
        if let cacheSize, CacheCommand.parseSize(cacheSize) == nil {
            throw ValidationError("--cache-size: expected a size such as 64M, 10G or a number of bytes, not '\(cacheSize)'")
        }
    }

    /// The store argument that selects the in-memory provider (`DocFSMemory`).
    static let memoryStore = "memory:"
    private var isMemory: Bool { store == Self.memoryStore }

    func run() throws {
        let storePath = isMemory ? Self.memoryStore : MountTable.canonical(store)
        let mnt = MountTable.canonical(mountpoint)
        try checkMountpoint(mnt)
        // A refused metrics address is said here, not only in the daemon's log.
        let choice = try parseOptions().metrics
        if let text = choice.text {
            do { _ = try MetricsAddress.parse(text, public: choice.isPublic) } catch {
                throw UserFacingError("docfs: -o metrics=\(text): \(error)")
            }
        }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else {
            throw UserFacingError("docfs: /dev/fuse is missing or not accessible (is the fuse kernel module loaded, and fuse3 installed?)")
        }
        if foreground {
            try serve(storePath: storePath, mountpoint: mnt)
        } else {
            try Daemon.start(
                arguments: daemonArguments(storePath: storePath, mountpoint: mnt),
                logFile: logFile ?? defaultLogFile(storePath: storePath), mountpoint: mnt, store: storePath)
        }
    }

    /// STORE/docfs.log; the in-memory provider has no directory, so its log goes to the
    /// temporary directory, one file per user.
    private func defaultLogFile(storePath: String) -> String {
        guard isMemory else { return storePath + "/docfs.log" }
        let tmp = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return (tmp.hasSuffix("/") ? tmp : tmp + "/") + "docfs-memory-\(getuid()).log"
    }

    private func checkMountpoint(_ mnt: String) throws {
        var st = stat()
        guard stat(mnt, &st) == 0 else {
            throw UserFacingError("docfs: mountpoint \(mountpoint) does not exist (create it with mkdir)")
        }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            throw UserFacingError("docfs: mountpoint \(mountpoint) is not a directory")
        }
        if MountTable.entry(at: mnt) != nil {
            throw UserFacingError("docfs: \(mountpoint) is already a mountpoint (in use); unmount it first")
        }
        if let children = try? FileManager.default.contentsOfDirectory(atPath: mnt), !children.isEmpty,
            !o.joined(separator: ",").split(separator: ",").contains("nonempty")
        {
            throw UserFacingError("docfs: mountpoint \(mountpoint) is not empty (its files would be hidden); use an empty directory or -o nonempty")
        }
    }

    private func daemonArguments(storePath: String, mountpoint: String) -> [String] {
        var args = ["mount", storePath, mountpoint, "-f", "--log-level", logLevel]
        for opt in o { args += ["-o", opt] }
        if trash { args.append("--trash") }
        if allowOther { args.append("--allow-other") }
        if let cacheItems { args += ["--cache-items", String(cacheItems)] }
        if let cacheSize { args += ["--cache-size", cacheSize] }
        if let uploadLimit { args += ["--upload-limit", uploadLimit] }
        if let downloadLimit { args += ["--download-limit", downloadLimit] }
        if let metrics { args += ["--metrics", metrics] }
        if metricsPublic { args.append("--metrics-public") }
        return args
    }

    /// Splits -o into docfs's own knobs and options for libfuse.
    /// Bytes per second for a replica's transfers (nil: no limit).
    struct RateLimits { var upload: Int64?; var download: Int64? }
    /// Where to serve metrics (nil: nowhere), from --metrics or -o metrics=.
    struct MetricsChoice { var text: String?; var isPublic: Bool }

    /// What `-o` and the flags ask for, split by who takes it.
    struct ParsedOptions {
        var bridge: BridgeOptions
        var fuse: [String]
        var cacheItems: Int?
        var limits: RateLimits
        var metrics: MetricsChoice
        /// The store's segments bound (`-o segments`, `-o nosegments`).
        var smallFileLimit: Int
    }

    private func parseOptions() throws -> ParsedOptions {
        var bridgeOptions = BridgeOptions()
        var smallFileLimit = StoreMount.Options.defaultSmallFileLimit
        var fuse: [String] = []
        var cache = cacheItems
        var limits = RateLimits(upload: uploadLimit.flatMap(RateLimit.parse), download: downloadLimit.flatMap(RateLimit.parse))
        var metricsChoice = MetricsChoice(text: metrics, isPublic: metricsPublic)
        for opt in o.flatMap({ $0.split(separator: ",").map(String.init) }) {
            let kv = opt.split(separator: "=", maxSplits: 1).map(String.init)
            switch kv[0] {
            case "entry_timeout", "attr_timeout":
                guard kv.count == 2, let v = Double(kv[1]), v >= 0 else {
                    throw UserFacingError("docfs: -o \(opt): expected a number of seconds")
                }
                if kv[0] == "entry_timeout" { bridgeOptions.entryTimeout = v } else { bridgeOptions.attrTimeout = v }
            case "keep_cache": bridgeOptions.keepCache = true
            case "no_keep_cache": bridgeOptions.keepCache = false
            case "writeback": bridgeOptions.writeback = true
            case "no_writeback": bridgeOptions.writeback = false
            case "noxattr": bridgeOptions.xattrs = false
            case "xattr": bridgeOptions.xattrs = true
            case "cache_items":
                guard kv.count == 2, let v = Int(kv[1].replacingOccurrences(of: "_", with: "")), v > 0 else {
                    throw UserFacingError("docfs: -o \(opt): expected a positive number of items")
                }
                cache = v
            case "upload_limit", "download_limit":
                guard kv.count == 2, let rate = RateLimit.parse(kv[1]) else {
                    throw UserFacingError("docfs: -o \(opt): expected bytes per second such as 10M, 512k or 250000")
                }
                if kv[0] == "upload_limit" { limits.upload = rate } else { limits.download = rate }
            case "segments":
                if kv.count == 2 {
                    guard let size = CacheCommand.parseSize(kv[1]), size >= 0, size <= 64 << 20 else {
                        throw UserFacingError("docfs: -o \(opt): expected a size such as 256K (at most 64M)")
                    }
                    smallFileLimit = Int(size)
                } else {
                    smallFileLimit = StoreMount.Options.defaultSmallFileLimit
                }
            case "nosegments", "no_segments": smallFileLimit = 0
            case "passthrough":
                switch kv.count == 2 ? kv[1] : "on" {
                case "on": bridgeOptions.passthrough = true
                case "off": bridgeOptions.passthrough = false
                default: throw UserFacingError("docfs: -o \(opt): expected passthrough=on or passthrough=off")
                }
            case "nopassthrough", "no_passthrough": bridgeOptions.passthrough = false
            case "passthrough_create": bridgeOptions.passthroughCreate = true
            case "nopassthrough_create", "no_passthrough_create": bridgeOptions.passthroughCreate = false
            case "splice": bridgeOptions.splice = true
            case "no_splice": bridgeOptions.splice = false
            case "io_uring":
                switch kv.count == 2 ? kv[1] : "on" {
                case "on", "yes", "1": bridgeOptions.ioUring = true; bridgeOptions.ioUringAsked = true
                case "off", "no", "0": bridgeOptions.ioUring = false
                default: throw UserFacingError("docfs: -o \(opt): expected io_uring, io_uring=on or io_uring=off")
                }
            case "no_io_uring", "noio_uring": bridgeOptions.ioUring = false
            case "parallel_dirops": bridgeOptions.parallelDirops = true
            case "noparallel_dirops", "no_parallel_dirops": bridgeOptions.parallelDirops = false
            case "noprefetch": bridgeOptions.prefetch = false
            case "prefetch": bridgeOptions.prefetch = true
            case "metrics":
                guard kv.count == 2, !kv[1].isEmpty else {
                    throw UserFacingError("docfs: -o \(opt): expected metrics=PORT or metrics=ADDRESS:PORT")
                }
                metricsChoice.text = kv[1]
            case "metrics_public": metricsChoice.isPublic = true
            case "nonempty", "auto_unmount": break // checked above / always on
            default:
                // mount(8)'s and fstab's own words mean nothing to libfuse, which would refuse them.
                if MountHelper.isMountOnlyOption(opt) { continue }
                fuse.append(opt)
            }
        }
        if allowOther, !fuse.contains("allow_other") { fuse.append("allow_other") }
        return ParsedOptions(
            bridge: bridgeOptions, fuse: fuse, cacheItems: cache, limits: limits, metrics: metricsChoice,
            smallFileLimit: smallFileLimit)
    }

    /// The daemon itself: open the store, mount, serve until unmounted or signalled.
    private func serve(storePath: String, mountpoint mnt: String) throws {
        // Buffers of a MiB and more (blocks, packs) are mapped and unmapped whole: glibc would
        // otherwise raise its threshold after the first free and keep them in per-thread arenas,
        // so the daemon's resident memory would stay at its peak after an upload.
        _ = glibcMallopt(glibcMmapThreshold, 1 << 20)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        var log = Logger(label: "docfs")
        log.logLevel = level
        let parsed = try parseOptions()
        let (bridgeOptions, fuseOptions, cacheLimit, limits, metricsChoice) =
            (parsed.bridge, parsed.fuse, parsed.cacheItems, parsed.limits, parsed.metrics)
        // Bound before the mount, so a refused address or a port in use stops it at once.
        let metricsServer = try startMetrics(metricsChoice, log: log)
        defer { metricsServer?.server.stop() }

        // `memory:` selects the in-memory provider; anything else is a store directory, mounted
        // by the library (with its sync engine when it is a replica).
        var served = bridgeOptions
        served.trash = trash
        served.requestStats = metricsServer != nil
        var mountOptions = MountOptions(bridge: served, fuseOptions: fuseOptions, sourceName: "docfs:" + storePath)
        // The daemon: a signal from the moment the mount exists stops it cleanly.
        mountOptions.signals = true
        mountOptions.bridge.otherUsers = fuseOptions.contains("allow_other") || fuseOptions.contains("allow_root")
        if isMemory {
            if cacheSize != nil {
                throw UserFacingError("docfs: --cache-size is for a replica (docfs init --remote); the in-memory provider keeps everything in memory")
            }
            if limits.upload != nil || limits.download != nil {
                throw UserFacingError("docfs: --upload-limit and --download-limit are for a replica (docfs init --remote)")
            }
            let memory: MemoryProvider
            do { memory = try MemoryProvider() } catch {
                throw UserFacingError("docfs: cannot start the in-memory provider: \(error)")
            }
            defer { memory.close() }
            mountOptions.bridge.inodeLimit = 2 * (cacheLimit ?? LocalStore.defaultCacheItems)
            let mount: ProviderMount
            do { mount = try ProviderMount(memory, at: mnt, options: mountOptions, logger: log) } catch {
                throw UserFacingError("docfs: cannot mount \(store) at \(mountpoint): \(error)")
            }
            metricsServer?.metrics.attach(MetricsSources(requests: mount.requestStats))
            log.info("mounted \(storePath) at \(mnt) (pid \(getpid()))")
            do { try mount.serve(signals: true) } catch {
                log.error("\(error.reason)")
                throw ExitCode(1)
            }
            log.info("unmounted \(mnt)")
            return
        }
        let mount: StoreMount
        do {
            mount = try StoreMount(
                storeAt: storePath, at: mnt,
                options: StoreMount.Options(
                    mount: mountOptions, cacheItems: cacheLimit,
                    cacheSize: cacheSize.flatMap(CacheCommand.parseSize),
                    uploadLimit: limits.upload, downloadLimit: limits.download,
                    smallFileLimit: parsed.smallFileLimit),
                logger: log)
        } catch {
            switch error {
            case .cannotOpenStore(_, let reason): throw UserFacingError("docfs: cannot open store \(store): \(reason)")
            case .replicaConfiguration(_, let server, let reason): throw UserFacingError("docfs: store \(store) is a replica of \(server): \(reason)")
            case .cacheSizeWithoutRemote:
                throw UserFacingError("docfs: --cache-size is for a replica (docfs init --remote): store \(store) keeps all its contents here")
            case .limitWithoutRemote:
                throw UserFacingError(
                    "docfs: --upload-limit and --download-limit are for a replica (docfs init --remote): store \(store) has no server")
            case .cannotMount(_, _, let reason): throw UserFacingError("docfs: cannot mount \(store) at \(mountpoint): \(reason)")
            }
        }
        if let metrics = metricsServer?.metrics {
            var sources = MetricsSources(requests: mount.mount.requestStats)
            sources.store = { [mount] in mount.storeFigures }
            if mount.isReplica {
                sources.sync = { [mount] in mount.syncStatus }
                sources.transfers = { [mount] in mount.transferFigures }
            }
            metrics.attach(sources)
        }
        log.info("mounted \(storePath) at \(mnt) (pid \(getpid()))")
        do { try mount.serve(signals: true) } catch {
            log.error("\(error.reason)")
            throw ExitCode(1)
        }
        let left = mount.isReplica ? ", \(mount.pendingChanges) change(s) left in the outbox for the next mount" : ""
        log.info("unmounted \(mnt)\(left)")
    }
}

extension Mount {
    /// The metrics server `--metrics` / `-o metrics=` asks for (nil: none), bound and serving;
    /// the process's swift-metrics go to its registry too.
    func startMetrics(_ choice: MetricsChoice, log: Logger) throws -> (server: MetricsServer, metrics: MountMetrics)? {
        guard let text = choice.text else { return nil }
        let address: MetricsAddress
        do { address = try MetricsAddress.parse(text, public: choice.isPublic) } catch {
            throw UserFacingError("docfs: -o metrics=\(text): \(error)")
        }
        let metrics = MountMetrics(build: BuildInfo.labels)
        let server: MetricsServer
        do { server = try MetricsServer(address: address, metrics: metrics) } catch {
            throw UserFacingError("docfs: cannot serve metrics at \(text): \(error)")
        }
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics.registry))
        log.info("metrics at http://\(address.host.contains(":") ? "[\(address.host)]" : address.host):\(server.port ?? address.port)/metrics")
        return (server, metrics)
    }
}

/// glibc's mallopt(3) and M_MMAP_THRESHOLD (malloc.h, which the Glibc module leaves out).
@_silgen_name("mallopt") private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
private let glibcMmapThreshold: Int32 = -3
