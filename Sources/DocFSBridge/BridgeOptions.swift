import Foundation

/// Kernel cache settings, exposed as `-o` options by the command line.
public struct BridgeOptions: Sendable {
    /// Seconds the kernel may trust a name → inode answer (and a "no such name" answer). Only this
    /// mount changes the store, and the kernel updates its cache for changes made through it, so
    /// this can be long.
    public var entryTimeout: Double = 30
    /// Seconds the kernel may trust attributes (0 for a file open for writing, always).
    public var attrTimeout: Double = 30
    /// Keep a file's page cache across opens (no one else writes the store).
    public var keepCache: Bool = true
    /// Let the kernel gather writes in its page cache (FUSE writeback cache). close() still
    /// returns the import's result: the kernel writes dirty pages back before it sends flush.
    public var writeback: Bool = false
    /// Serve the provider's trash as `/.Trash`: rm trashes, rm inside it deletes, mv out restores.
    public var trash: Bool = false
    /// Serve extended attributes (tags, favourite rank, stored `user.*`). Off (`-o noxattr`), the
    /// xattr calls answer ENOSYS once and the kernel stops asking: it otherwise asks for
    /// `security.capability` once per file before its first write (InitNegotiation).
    public var xattrs: Bool = true
    /// Splice write requests from the FUSE device into the staged file (`-o splice`): less CPU
    /// per byte of large writes, a splice more per other request (see `FuseOperations`).
    public var splice: Bool = false
    /// When a file is opened for reading, read its folder's other small files ahead in the
    /// background (`-o noprefetch` turns it off; see SiblingPrefetch).
    public var prefetch: Bool = true
    /// Whether callers other than the mounting user reach the mount (`-o allow_other` or
    /// `allow_root`). Without them the kernel lets only the mounting user in, so names below a
    /// folder that user may search can be cached (see `Bridge.cachesNames(below:)`).
    public var otherUsers: Bool = false
    /// The kernel checks mode bits itself, from the attributes it caches, before it asks the
    /// daemon (FUSE's `default_permissions`, which `ProviderMount` adds). The only way an open of a
    /// FIFO or a connect to a socket is checked at all: the kernel sends no request for either.
    /// The bridge still checks every request it gets (and the capabilities, which mode bits
    /// cannot say). See docs/PERMISSIONS.md.
    public var kernelChecksPermissions: Bool = true
    /// Inodes the kernel may hold before the oldest names are invalidated (`KernelEntryLimit`);
    /// nil: as many as the kernel likes (it lets go under memory pressure only).
    public var inodeLimit: Int? = nil
    /// Count requests by operation with their latency, bytes read and written, and refusals
    /// (`-o metrics`; `ProviderMount.requestStats`). Off, a request costs nothing more.
    public var requestStats: Bool = false
    /// Let the kernel read stored contents itself for files opened read-only, and write the
    /// staged copy of a stored file opened for writing (FUSE passthrough, Linux 6.9+ and
    /// CAP_SYS_ADMIN). Without the kernel's offer or the capability, reads and writes go through
    /// the daemon (said once in the log). See `Passthrough`. On unless `-o passthrough=off`: a
    /// writer opening a file passthrough readers hold joins them at once (`openJoiningReaders`).
    public var passthrough: Bool = true
    /// Answer a create with its staged file as the backing file, so the kernel writes a new file
    /// itself (`-o passthrough_create`; needs `passthrough`). Each close imports a copy of the
    /// staged file (a mapping may outlive the close; see `Passthrough`), and small files no
    /// longer stay in memory for the segments. Off by default: see docs/PERFORMANCE.md.
    public var passthroughCreate: Bool = false
    /// Let the kernel send lookups and readdirs of one folder side by side (`FUSE_PARALLEL_DIROPS`,
    /// which libfuse 3.14 never asks for; `-o noparallel_dirops` leaves it out). Without it the
    /// kernel takes each folder's lock for every lookup and readdir: processes that look up
    /// names in one folder (a build's include path, `find` beside `ls`) wait for one another's
    /// round trips. The bridge's lookups take no per-folder lock of their own.
    public var parallelDirops: Bool = true
    /// Serve requests through FUSE over io_uring where the kernel offers it (`RingTransport`;
    /// `-o io_uring` turns it on). Off by default: on a quiet machine it measured slower than
    /// `/dev/fuse` on 14 of 15 fsbench metrics (issue 50; docs/PERFORMANCE.md). The kernel
    /// offers it only once root has set the fuse module's `enable_uring`.
    public var ioUring: Bool = false
    /// Whether `-o io_uring` was given: then a kernel that does not offer the ring is reported
    /// with a notice, else at debug level (most kernels do not, by default).
    public var ioUringAsked: Bool = false
    public init() {}
}
