import CFuse
import Foundation
import Glibc
import Logging
import DocFSProvider

/// Maps FUSE low-level operations onto a `Provider`.
///
/// Reads of the tree (lookup, getattr, readdir) and content I/O answer on the request thread.
/// Provider actions (import, mkdir, rename, delete, …) run on `executor`, and their reply is sent
/// from there, so a slow provider never holds a FUSE thread.
package final class Bridge: @unchecked Sendable {
    let provider: any Provider
    /// The provider's opt-in sides, found once by a cast (nil: the bridge refuses as a
    /// filesystem without the feature, Bridge+OptIns.swift).
    let trash: (any TrashProvider)?
    let appleMetadata: (any AppleMetadataProvider)?
    let storedAttributes: (any ExtendedAttributeProvider)?
    let specialItems: (any SpecialItemProvider)?
    /// Several names for one item (`link`, and one name removed or moved alone).
    let hardLinks: (any HardLinkProvider)?
    /// A replica's sync state, conflicts and retries; its writers held against other replicas' changes.
    let replicaStatus: (any ReplicaStatusProvider)?
    let openWriters: (any OpenWritersProvider)?
    let onDemand: (any OnDemandProvider)?
    /// A provider that takes small new files as bytes (`SmallFileImportProvider`, with a limit
    /// above 0): new files then stay in memory while small (`WriteSession.inMemory`).
    let smallFiles: (any SmallFileImportProvider)?
    /// A provider that keeps small files inside larger ones, read in place (`StoredSliceProvider`).
    let storedSlices: (any StoredSliceProvider)?
    /// A provider that takes a staged file by its path (`StagedFileImportProvider`, the embedded
    /// store): imports then need no `SecurityScopedURL` and no slot folder (`importStaged`).
    let stagedImports: (any StagedFileImportProvider)?
    /// A provider whose stored file may become a writer's live file (`LiveContentsProvider`, the
    /// embedded store): only its files are read through the kernel's passthrough.
    let liveContents: (any LiveContentsProvider)?
    let inodes = InodeTable()
    let attributes: Attributes
    let executor = ProviderExecutor()
    let log: Logger
    let options: BridgeOptions
    let importSlots: ImportStaging
    let stagingFiles: StagingFilePool
    let notifier = KernelNotifier()
    /// nil unless `options.inodeLimit` is set.
    let entryLimit: KernelEntryLimit?
    let initNegotiation: InitNegotiation
    /// The kernel's passthrough for stored contents (`-o passthrough=off`: never asked for).
    let passthrough: Passthrough
    /// FUSE over io_uring, when asked for (`options.ioUring`).
    let ring: RingTransport?
    let prefetch: SiblingPrefetch?
    /// Requests, latencies, bytes and refusals for `-o metrics`; nil (nothing counted) without it.
    package let stats: RequestStats?
    /// The user who mounted: without `otherUsers`, the only caller the kernel lets in.
    let mounter = Caller(uid: getuid(), gid: getgid(), groups: Bridge.processGroups())
    /// Root's mount that no one else can reach: every name may be cached, with no check.
    var cachesEveryName: Bool { !options.otherUsers && mounter.isRoot }

    package init(provider: any Provider, logger: Logger, options: BridgeOptions = BridgeOptions()) {
        self.provider = provider
        self.trash = provider as? any TrashProvider
        self.appleMetadata = provider as? any AppleMetadataProvider
        self.storedAttributes = provider as? any ExtendedAttributeProvider
        self.specialItems = provider as? any SpecialItemProvider
        self.hardLinks = provider as? any HardLinkProvider
        self.replicaStatus = provider as? any ReplicaStatusProvider
        self.openWriters = provider as? any OpenWritersProvider
        self.onDemand = provider as? any OnDemandProvider
        self.smallFiles = (provider as? any SmallFileImportProvider).flatMap { $0.smallFileLimit > 0 ? $0 : nil }
        let storedSlices = provider as? any StoredSliceProvider
        self.storedSlices = storedSlices
        self.stagedImports = provider as? any StagedFileImportProvider
        self.liveContents = provider as? any LiveContentsProvider
        self.log = logger
        self.options = options
        self.entryLimit = options.inodeLimit.map(KernelEntryLimit.init(limit:))
        self.initNegotiation = InitNegotiation(parallelDirops: options.parallelDirops)
        self.importSlots = ImportStaging(root: provider.stagingDirectory)
        self.stagingFiles = StagingFilePool(stagingDirectory: provider.stagingDirectory.path)
        self.attributes = Attributes()
        self.prefetch = options.prefetch ? SiblingPrefetch(provider: provider, storedSlices: storedSlices) : nil
        self.stats = options.requestStats ? RequestStats() : nil
        self.passthrough = Passthrough(wanted: options.passthrough)
        self.ring = options.ioUring ? RingTransport(log: logger, asked: options.ioUringAsked) : nil
        observeProviderChanges()
    }

    /// Call after the FUSE loop ended, before the provider closes: removes staging leftovers.
    package func shutdown() {
        notifier.detach()
        stagingFiles.drain()
        importSlots.removeAll()
    }

    static func processGroups() -> [UInt32] {
        var list = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)))
        let n = getgroups(Int32(list.count), &list)
        return n > 0 ? Array(list.prefix(Int(n))) : []
    }

    /// Whether the kernel may cache names below `folder`. With `default_permissions` always: the
    /// kernel checks search permission on every walk itself, from the folder's attributes (a
    /// chmod's reply updates them; a change from elsewhere invalidates them). Without it, only
    /// when every caller that can reach the mount may search it, since the kernel then walks
    /// cached names without asking: uncached, each walk through it is a lookup the bridge checks.
    @inline(__always)
    func cachesNames(below folder: some PermissionSubject) -> Bool {
        if options.kernelChecksPermissions { return true }
        if options.otherUsers { return folder.searchableByAll }
        return PermissionCheck.allows(PermissionCheck.execute, on: folder, for: mounter)
    }

    // MARK: Names

    /// A name from the kernel as a String: longer than 255 bytes is ENAMETOOLONG, and bytes that
    /// are not UTF-8 are refused with EILSEQ rather than silently mangled.
    @inline(__always)
    package static func name(_ cname: UnsafePointer<CChar>) throws(ProviderError) -> String {
        let length = strlen(cname)
        guard length <= 255 else { throw ProviderError(.nameTooLong, "name is longer than 255 bytes") }
        guard let s = String(validatingCString: cname) else {
            throw ProviderError(.illegalByteSequence, "name is not valid UTF-8")
        }
        return s
    }

    // MARK: Items

    /// The node and its item; a file still being copied in has no item (throws .noSuchItem).
    @inline(__always)
    func item(_ ino: UInt64) throws(RequestError) -> Item {
        guard let id = inodes.identifier(ino) else { throw RequestError(ProviderError(.noSuchItem), .ino(ino)) }
        do { return try provider.item(for: id) } catch { throw RequestError(error, .item(id)) }
    }

    /// `cacheName: false` for names in a folder that some caller may not search: the kernel must
    /// ask again on every walk, so that the search permission is checked for each caller.
    @inline(__always)
    func entry(for item: Item, node: InodeNode, cacheName: Bool = true) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = node.ino
        e.generation = InodeTable.generation
        e.attr = attributes.stat(of: item, ino: node.ino)
        e.attr_timeout = options.attrTimeout
        e.entry_timeout = cacheName ? options.entryTimeout : 0
        // A file open for writing (lookup, readdirplus): uncached, as getattr gives it.
        if item.kind == .file, overlayStaged(&e.attr, node) { e.attr_timeout = 0 }
        return e
    }

    /// A file open for writing reports its staged size and times (the stored item's would make
    /// `stat` disagree with `read`). True when there was a staged copy.
    @inline(__always)
    func overlayStaged(_ st: inout stat, _ node: InodeNode) -> Bool {
        // Only the staged file's size and times: no owner to look up (a stored file's is its item's).
        guard let session = node.sessionLock.withLock({ _ in node.session }) else { return false }
        guard let staged = session.reportedStatus() else { return false }
        st.st_size = staged.st_size
        st.st_blocks = staged.st_blocks
        st.st_mtim = staged.st_mtim
        st.st_ctim = staged.st_ctim
        return true
    }

    /// Attributes of a new file being copied in: the staging file's size and times, the owner,
    /// group and mode its creator gave (or set since).
    func stagedStat(_ node: InodeNode) -> stat? {
        let session = node.sessionLock.withLock { _ in node.session }
        guard let session else { return nil }
        let copyIn = inodes.copyIn(of: node)
        let held = copyIn?.attributes ?? NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o644)
        return attributes.stat(ofStaged: session.reportedStatus(), ino: node.ino, attributes: held)
    }

    // MARK: Logging

    /// The path of an item inside the mount, for log lines.
    func path(of identifier: ItemIdentifier) -> String {
        var parts: [String] = []
        var current = identifier
        var guardCount = 0
        while current != .rootContainer, guardCount < 4096 {
            guard let item = try? provider.item(for: current) else {
                parts.append("<\(current.rawValue)>")
                break
            }
            parts.append(item.filename)
            current = item.parentIdentifier
            guardCount += 1
        }
        return "/" + parts.reversed().joined(separator: "/")
    }

    func path(of subject: Subject) -> String {
        switch subject {
        case .none: return "?"
        case .item(let id): return path(of: id)
        case .child(let parent, let name):
            let p = path(of: parent)
            return p == "/" ? "/" + name : p + "/" + name
        case .ino(let ino):
            guard let node = inodes.node(ino) else { return "<inode \(ino)>" }
            if let id = inodes.identifier(ino) { return path(of: id) }
            if let placement = inodes.copyIn(of: node)?.placement {
                let parent = inodes.identifier(placement.parent).map { path(of: $0) } ?? "?"
                return parent == "/" ? "/" + placement.name : parent + "/" + placement.name
            }
            return "<inode \(ino)>"
        }
    }

    /// One line per refused or failed operation, naming the path and the rule; the errno to reply.
    func report(_ op: String, _ failure: RequestError) -> Int32 {
        let err = failure.error.errno
        // A missing name is the normal answer to a lookup, not an event.
        if failure.error.code != .noSuchItem || op != "lookup" {
            stats?.refused(op: op, rule: failure.error.code.rawValue, errno: ErrnoName.of(err))
            let level: Logger.Level = failure.error.code == .noSuchItem ? .debug : .notice
            if log.logLevel <= level {
                let reason = failure.error.reason.isEmpty ? failure.error.code.rawValue : failure.error.reason
                log.log(level: level, "refused \(op) \(path(of: failure.subject)): \(reason) (\(ErrnoName.of(err)))")
            }
        }
        return err
    }

    /// Converts a provider call's error into a RequestError about `subject`.
    @inline(__always)
    func attempt<T>(_ subject: @autoclosure () -> Subject, _ body: () throws(ProviderError) -> T) throws(RequestError) -> T {
        do { return try body() } catch { throw RequestError(error, subject()) }
    }

    /// The same for async provider actions.
    func attempt<T>(_ subject: @autoclosure () -> Subject, _ body: () async throws(ProviderError) -> T) async throws(RequestError) -> T {
        do { return try await body() } catch { throw RequestError(error, subject()) }
    }
}

extension Bridge {
    /// Runs a provider action on the executor (never on a FUSE thread): `body` answers on
    /// success; a failure answers with its errno and one log line naming `op`, the path and the
    /// rule.
    /// `mayBlock`: an action that may block for long (an fsync, a commit at close; `runMayBlock`).
    func perform(
        _ op: String, _ d: DeferredReply, mayBlock: Bool = false, _ body: @escaping @Sendable () async throws(RequestError) -> Void
    ) {
        let action: @Sendable () async -> Void = { [self] in
            do throws(RequestError) { try await body() } catch { d.error(report(op, error)) }
        }
        if mayBlock { runMayBlock(action) } else { executor.run(action) }
    }

    /// `executor.run` for an action that may block for long: a ring queue's thread serves every
    /// other request from its CPU, so there the action goes to the executor's threads at once
    /// (the reply then costs the queue a wake-up); elsewhere it starts on the calling thread.
    func runMayBlock(_ body: @escaping @Sendable () async -> Void) {
        if let ring, ring.servesThisThread { executor.runElsewhere(body) } else { executor.run(body) }
    }
}

extension Bridge {
    /// A node for `identifier` the kernel now holds under `name` in `parent` (a lookup or a
    /// readdirplus entry); past the inode limit, the oldest such names are invalidated.
    func rememberEntry(_ identifier: ItemIdentifier, parent: UInt64, name: String) -> InodeNode {
        guard let entryLimit else { return inodes.remember(identifier) }
        let (node, created, count) = inodes.rememberCounting(identifier)
        if created {
            for old in entryLimit.noteNew(parent: parent, name: name, count: count) {
                notifier.invalidateEntry(parent: old.parent, name: old.name)
            }
        }
        return node
    }
}
