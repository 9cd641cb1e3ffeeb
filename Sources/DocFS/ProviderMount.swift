import CFuse
import Dispatch
import Foundation
import Glibc
import Logging
import DocFSBridge
import DocFSProvider
import Synchronization

@_exported import DocFSProvider
@_exported import struct DocFSBridge.BridgeOptions

/// How a provider is mounted.
public struct MountOptions: Sendable {
    /// The kernel cache and the bridge's own knobs (timeouts, trash, xattrs, read-ahead).
    public var bridge = BridgeOptions()
    /// libfuse / mount(8) options such as `allow_other`, `ro`, `noexec`. `auto_unmount` and
    /// `nosuid` are added (a process that dies leaves no dead mountpoint) unless `suid` is given:
    /// that mount is made by libfuse itself (as root), which auto_unmount does not allow.
    public var fuseOptions: [String] = []
    /// What `mount` and `df` show as the source (`fsname=`).
    public var sourceName = "docfs"
    /// Threads serving requests at most.
    public var maxThreads: UInt32 = 10
    /// SIGINT, SIGTERM and SIGHUP end the mount cleanly from the moment it exists (handlers
    /// set before mounting, so a signal between the mount and `serve` is no kill): process-wide,
    /// an executable's choice, never a library's or a test's.
    public var signals = false

    public init(bridge: BridgeOptions = BridgeOptions(), fuseOptions: [String] = [], sourceName: String = "docfs") {
        self.bridge = bridge
        self.fuseOptions = fuseOptions
        self.sourceName = sourceName
    }
}

/// Any `Provider` mounted on a path with FUSE: the library behind `docfs mount`.
///
/// ```swift
/// let mount = try ProviderMount(MyProvider(), at: "/mnt/docs")   // live when this returns
/// try mount.serve()                                            // until unmounted or signalled
/// ```
/// or, to keep the calling thread: `mount.start()` serves on a thread of its own and
/// `mount.unmount()` stops it (and waits). Requests arrive on FUSE threads; the provider's
/// reading members answer there, its actions run on a dedicated executor (see `Provider`).
public final class ProviderMount: @unchecked Sendable {
    public let mountpoint: String
    public let provider: any Provider
    private let bridge: Bridge
    private let session: FuseSession
    private let options: MountOptions
    private let lock = Mutex<Void>(())
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    private var result: Int32?
    private var stopped = false
    private var shutDown = false
    private var signalHandlers = false

    /// Mounts `provider` at `mountpoint` (an existing directory). The mount is live on return:
    /// requests made before serving starts wait for it.
    public init(
        _ provider: any Provider, at mountpoint: String, options: MountOptions = MountOptions(),
        logger: Logger = Logger(label: "docfs")
    ) throws(ProviderError) {
        self.mountpoint = mountpoint
        self.provider = provider
        self.options = options
        var bridgeOptions = options.bridge
        if options.fuseOptions.contains("allow_other") || options.fuseOptions.contains("allow_root") {
            bridgeOptions.otherUsers = true
        }
        // A mount only root can reach: root passes every mode check the kernel's own would make,
        // so `default_permissions` would only cost round trips (after each create, mkdir or
        // unlink in a folder, the kernel asks for the folder's attributes again before the next
        // walk through it: a GETATTR per file of a `cp -r`). FIFO opens and socket connects, which
        // only that check sees, are root's anyway. The bridge still checks every request.
        if !bridgeOptions.otherUsers, getuid() == 0 { bridgeOptions.kernelChecksPermissions = false }
        bridge = Bridge(provider: provider, logger: logger, options: bridgeOptions)
        let fsname = options.sourceName.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: ",", with: "\\,")
        // nosuid unless asked for explicitly: set-ID bits may come from other machines
        // (docs/REMOTE.md). libfuse passes no `suid` on to fusermount3, which auto_unmount needs,
        // so an explicit `suid` is a mount libfuse makes itself (root only), without auto_unmount.
        let suid = options.fuseOptions.contains("suid")
        // default_permissions: the kernel checks mode bits before it asks (docs/PERMISSIONS.md);
        // FIFO opens and socket connects are checked nowhere else.
        let kernelChecks = bridgeOptions.kernelChecksPermissions ? ["default_permissions"] : []
        let fuse =
            ["fsname=\(fsname)", "subtype=docfs"] + (suid ? [] : ["auto_unmount", "nosuid"]) + kernelChecks
            + options.fuseOptions.filter { $0 != "auto_unmount" && !($0 == "default_permissions" && !kernelChecks.isEmpty) }
        session = try FuseSession(bridge: bridge, mountpoint: mountpoint, options: fuse)
        if options.signals { signalHandlers = session.installSignalHandlers() }
        try session.mount()
    }

    /// The bridge's request counters (nil unless `options.bridge.requestStats`).
    package var requestStats: RequestStats? { bridge.stats }

    /// Serves requests on the calling thread until the mount is unmounted (`umount`,
    /// `fusermount3 -u`, `unmount()`) or, with `signals`, SIGINT/SIGTERM/SIGHUP arrive (those
    /// handlers are process-wide: an executable's choice, never a library's or a test's).
    /// Unmounts and lets go of staging leftovers before it returns.
    public func serve(signals: Bool = false) throws(ProviderError) {
        let installed = signalHandlers || (signals && session.installSignalHandlers())
        let rc = session.run(maxThreads: options.maxThreads)
        if installed { session.removeSignalHandlers() }
        finish()
        // libfuse's loop returns the number of the signal that ended it: a clean stop.
        if rc < 0 { throw ProviderError.posix(-rc, "the FUSE loop failed") }
    }

    /// Serves on a thread of its own; returns at once.
    public func start() {
        let thread = Thread(block: { [self] in
            let rc = session.run(maxThreads: options.maxThreads)
            lock.withLock { _ in result = rc }
            finished.signal()
        })
        thread.name = "docfs-mount"
        lock.withLock { _ in self.thread = thread }
        thread.start()
    }

    /// Stops serving, unmounts and waits for a `start()`ed loop to end. Safe to call twice.
    public func unmount() {
        let (started, first) = lock.withLock { _ -> (Bool, Bool) in
            defer { stopped = true }
            return (thread != nil, !stopped)
        }
        guard first else { return }
        session.exit()
        // A lazy unmount ends the loop's read (ENODEV) even with requests in flight.
        umount2(mountpoint, Int32(MNT_DETACH))
        if started { finished.wait() }
        finish()
    }

    private func finish() {
        guard
            lock.withLock({ _ -> Bool in
                defer { shutDown = true }; return !shutDown
            })
        else { return }
        session.unmount()
        bridge.shutdown()
    }
}

extension ProviderMount {
    /// The libfuse this process runs with (`fuse_pkgversion()`), for `docfs --version`.
    public static let libfuseVersion: String = fuse_pkgversion().map { String(cString: $0) } ?? "?"
}
