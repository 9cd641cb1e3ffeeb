import Foundation
import Logging
import DocFSRemote
import DocFSStore

/// Uploads the contents of a chunk's files as blocks: each file is cut (`FileBlocks`), each
/// block named by its SHA-256, and only blocks the server does not know yet (`knownBlocks`: no
/// file, no replica has sent them) go up, packed back to back into pack objects of about
/// `packSize` (a tree of small files is a handful of PUTs), `parallelPacks` at a time. Each
/// pack's blocks are recorded once it is in (a retry sends only what is missing); then each
/// file's manifest, in one transaction; the versions that name the manifests follow
/// (`SyncEngine.send`).
///
/// Memory stays bounded by design: the chunker's buffer (twice the largest block), the batch
/// waiting for the server's answer (`batchBytes` and a block), the pack being filled or waiting
/// for a slot (`packSize` and a block, its room reserved at once) and the `parallelPacks` in
/// flight, sent a slice at a time (`S3Client.putObject`): 56 MiB with the standard sizes
/// (RemoteMountTests.uploadMemoryBound).
struct BlockUploader {
    let server: any ReplicaServer
    let objects: any ObjectStore
    let bucket: String
    let prefix: String
    /// The replica's login role: its packs go under `PREFIX/packs/<writer>/` (nil: the flat folder).
    let writer: String?
    let logger: Logger
    var packSize = 8 << 20
    var batchBytes = 8 << 20
    var parallelPacks = 2
    var maximumBlock = ContentChunker.standard.maximum
    /// The store's files made a writer's live file (nil: none are): a file made live while it
    /// was read may have been written in place, so it is read again (its path names the kept
    /// version then).
    var liveDetaches: LiveDetaches? = nil

    /// One file to send: the entries whose versions will name it, the operation its manifest's
    /// key starts with (the first entry's), its path.
    struct File {
        var seqs: [Int64]
        var operationID: UUID
        var path: String
    }

    struct Result {
        var contents: [Int64: RemoteContent] = [:]
        /// Files the object storage refused (not unreachable, not the credentials): by seq.
        var refused: [Int64: String] = [:]
        /// Bytes sent in packs.
        var uploadedBytes: Int64 = 0
        var packs = 0
    }

    private struct Pending {
        var hash: String
        var bytes: [UInt8]
    }

    /// Blocks uploaded meanwhile, the pack being filled and the packs in flight.
    private final class Work {
        var known: Set<String> = []
        var sent: [StoredBlock] = []
        var batch: [Pending] = []
        var batchBytes = 0
        var pack: [UInt8] = []
        var packBlocks: [(hash: String, offset: Int64, length: Int64)] = []
        var inFlight: [Task<Void, any Error>] = []
        var uploaded: Int64 = 0
        var packs = 0
        var packKeys: [String] = []
        var packBlocksSealed = 0
        /// When the chunk's pack intents were last renewed (gc spares what they name).
        var renewed = ContinuousClock.now
    }

    /// How often an upload renews the intents of the packs it sent so far: well inside their
    /// lifetime (`GarbageCollector.intentLifetimeNs`, 10 minutes), so that an upload slower than
    /// gc's grace keeps its blocks until its manifests name them.
    static let intentRenewal = Duration.seconds(60)

    /// `only`: send just these blocks and record no manifest (healing blocks marked damaged,
    /// from a file whose bytes this replica holds: `SyncEngine.healDamagedBlocks`).
    func upload(_ files: [File], only: Set<String>? = nil) async throws -> Result {
        let work = Work()
        var manifests: [(file: File, manifest: BlockManifest)] = []
        do {
            for file in files {
                while true {
                    try Task.checkCancellation()
                    // Noted before the file is opened (`LiveDetaches`).
                    let noted = liveDetaches?.sequence ?? 0
                    // Gone: the item was deleted since (its delete follows); nothing to upload.
                    guard var blocks = try FileBlocks(path: file.path) else { break }
                    defer { blocks.close() }
                    var hashes: [String] = []
                    var lengths: [Int64] = []
                    while let bytes = try blocks.next() {
                        let hash = bytes.withUnsafeBytes { BlockHash.of($0) }
                        hashes.append(hash)
                        lengths.append(Int64(bytes.count))
                        if let only, !only.contains(hash) { continue }
                        work.batch.append(Pending(hash: hash, bytes: bytes))
                        work.batchBytes += bytes.count
                        if work.batchBytes >= batchBytes { try await resolveBatch(work) }
                    }
                    // Made live while read: a writer's bytes may be in what was read. Blocks
                    // sent meanwhile are harmless (no manifest names them; gc removes them).
                    if let liveDetaches, liveDetaches.madeLive(since: noted, device: blocks.device, inode: blocks.inode) {
                        logger.debug("sync: \(file.path) became a writer's live file while it was read; read again")
                        continue
                    }
                    let contents = BlockHash.ofManifest(size: blocks.size, hashes: hashes)
                    let key = ContentObjectKey.manifest(prefix: prefix, operationID: file.operationID, contents: contents)
                    manifests.append((file, BlockManifest(key: key, size: blocks.size, hashes: hashes, lengths: lengths)))
                    break
                }
            }
            try await resolveBatch(work)
            try await sealPack(work)
            for task in work.inFlight { try await task.value }
            work.inFlight = []
        } catch {
            for task in work.inFlight { task.cancel() }
            for task in work.inFlight { _ = try? await task.value }
            let sorted = ServerExchangeError(error, bucket: bucket)
            guard sorted.setsAside else { throw error }
            // The storage refused a pack: every file of the chunk waits (a pack is shared).
            var result = Result()
            for file in files { for seq in file.seqs { result.refused[seq] = sorted.message } }
            return result
        }
        if only != nil {
            try? await server.dropUploadIntents(work.packKeys)
            return Result(uploadedBytes: work.uploaded, packs: work.packs)
        }
        // The packs' blocks are recorded; the manifests name them (and any the server had), each
        // with an intent (gc keeps a manifest, and so its blocks, while no version names it yet),
        // and the packs' intents go: one call.
        let missing = try await server.recordManifests(manifests.map(\.manifest), donePacks: work.packKeys)
        guard missing.isEmpty else {
            // gc removed blocks another file had, between the question and now: the retry sends them.
            throw RemoteError.server("\(missing.count) block(s) were removed by docfs remote gc while this replica was uploading; sent again")
        }
        var result = Result(uploadedBytes: work.uploaded, packs: work.packs)
        for (file, manifest) in manifests {
            for seq in file.seqs { result.contents[seq] = RemoteContent(key: manifest.key, size: manifest.size) }
        }
        return result
    }

    /// Asks the server which of the waiting blocks it has; the others join packs.
    private func resolveBatch(_ work: Work) async throws {
        guard !work.batch.isEmpty else { return }
        let asked = Array(Set(work.batch.map(\.hash)).subtracting(work.known))
        let known = try await server.knownBlocks(asked)
        work.known.formUnion(known)
        let batch = work.batch
        work.batch = []
        work.batchBytes = 0
        for block in batch where !work.known.contains(block.hash) {
            work.known.insert(block.hash)
            // Room for a full pack at once: growing by doubling would hold up to twice its size.
            if work.pack.isEmpty { work.pack.reserveCapacity(packSize + maximumBlock) }
            work.packBlocks.append((block.hash, Int64(work.pack.count), Int64(block.bytes.count)))
            work.pack.append(contentsOf: block.bytes)
            if work.pack.count >= packSize { try await sealPack(work) }
        }
    }

    /// Sends the pack being filled (waiting for a slot when `parallelPacks` are in flight).
    private func sealPack(_ work: Work) async throws {
        guard !work.pack.isEmpty else { return }
        let key = ContentObjectKey.pack(prefix: prefix, writer: writer)
        let bytes = work.pack
        for block in work.packBlocks {
            work.sent.append(StoredBlock(hash: block.hash, pack: key, offset: block.offset, length: block.length))
        }
        work.packBlocksSealed = work.packBlocks.count
        work.pack = []
        work.packBlocks = []
        work.packKeys.append(key)
        work.uploaded += Int64(bytes.count)
        work.packs += 1
        // Recorded before a byte goes up: gc spares a pack no block row names yet, and the
        // blocks of a pack under a live intent; the earlier packs' intents are renewed now and then.
        var intents = [key]
        if ContinuousClock.now - work.renewed > Self.intentRenewal {
            intents += work.packKeys.dropLast()
            work.renewed = ContinuousClock.now
        }
        try await server.recordUploadIntents(intents)
        while work.inFlight.count >= parallelPacks {
            let first = work.inFlight.removeFirst()
            try await first.value
        }
        let (objects, bucket, server) = (self.objects, self.bucket, self.server)
        let blocks = Array(work.sent.suffix(work.packBlocksSealed))
        work.inFlight.append(
            Task {
                let written = try await objects.putNewObject(bucket: bucket, key: key, bytes: bytes, contentType: "application/octet-stream")
                FaultInjection.point(.packPut) // test-only (DOCFS_FAULT)
                // Recorded as soon as the pack is in: a retry after a crash or a lost connection
                // finds these blocks known and sends only the rest. With the version the PUT made
                // (schema 18): readers read that one, whatever is PUT over the key later.
                try await server.recordPack(key, size: Int64(bytes.count), blocks: blocks, version: written.versionID)
                FaultInjection.point(.uploadPart) // test-only (DOCFS_FAULT)
            })
    }
}
