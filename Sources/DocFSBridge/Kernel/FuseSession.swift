import CFuse
import Glibc
import Synchronization
import DocFSProvider

/// A mounted FUSE session serving one Bridge: mount, run the multithreaded loop, unmount.
package final class FuseSession {
    private let session: OpaquePointer
    private let bridge: Bridge
    private let bridgeRef: Unmanaged<Bridge>
    package let mountpoint: String
    private var mounted = false

    /// Creates the session with `-o` options (e.g. "auto_unmount", "fsname=docfs:/store").
    package init(bridge: Bridge, mountpoint: String, options: [String]) throws(ProviderError) {
        self.bridge = bridge
        self.mountpoint = mountpoint
        var argStrings = ["docfs"]
        for o in options where !o.isEmpty { argStrings += ["-o", o] }
        // libfuse parses these into its own storage; the copies only need to outlive the call.
        let cArgs = argStrings.map { strdup($0) }
        defer { cArgs.forEach { free($0) } }
        var argv = cArgs
        let ref = Unmanaged.passRetained(bridge)
        bridgeRef = ref
        var ops = FuseOperations.make(xattrs: bridge.options.xattrs)
        let se: OpaquePointer? = argv.withUnsafeMutableBufferPointer { buf in
            var args = fuse_args(argc: Int32(buf.count), argv: buf.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, ref.toOpaque())
        }
        guard let se else {
            ref.release()
            throw ProviderError(.invalidArgument, "libfuse refused the mount options: \(options.joined(separator: ","))")
        }
        session = se
        bridge.notifier.attach(se)
    }

    deinit {
        bridge.notifier.detach()
        bridge.ring?.sessionEnds()
        if mounted { fuse_session_unmount(session) }
        bridge.ring?.stop()
        fuse_session_destroy(session)
        bridgeRef.release()
    }

    package func mount() throws(ProviderError) {
        guard fuse_session_mount(session, mountpoint) == 0 else {
            throw ProviderError(.ioError, "could not mount at \(mountpoint) (see the message above from libfuse)")
        }
        mounted = true
        bridge.passthrough.deviceFD.store(fuse_session_fd(session), ordering: .relaxed)
        // The same descriptor, read and written through InitNegotiation (see there for why). Only
        // a speed-up: if libfuse refused, its own read/writev serve.
        var io = InitNegotiation.customIO()
        if fuse_session_custom_io(session, &io, fuse_session_fd(session)) == 0 {
            bridge.ring?.attach(session: session, fd: fuse_session_fd(session))
        } else if bridge.ring != nil {
            bridge.log.notice("io_uring: libfuse refused the custom I/O the ring needs; serving through /dev/fuse")
        }
    }

    /// SIGINT, SIGTERM and SIGHUP end the loop (process-wide: only the executable calls this).
    package func installSignalHandlers() -> Bool {
        fuse_set_signal_handlers(session) == 0
    }

    package func removeSignalHandlers() {
        fuse_remove_signal_handlers(session)
    }

    /// Serves requests until unmounted or told to exit. Returns 0 on a clean end.
    package func run(maxThreads: UInt32 = 10) -> Int32 {
        let cfg = fuse_loop_cfg_create()
        defer { fuse_loop_cfg_destroy(cfg) }
        fuse_loop_cfg_set_clone_fd(cfg, 0)
        fuse_loop_cfg_set_max_threads(cfg, maxThreads)
        let result = fuse_session_loop_mt(session, cfg)
        bridge.ring?.sessionEnds()
        return result
    }

    package func exit() { fuse_session_exit(session) }

    package func unmount() {
        guard mounted else { return }
        bridge.ring?.sessionEnds()
        fuse_session_unmount(session)
        mounted = false
        bridge.ring?.stop()
    }
}
