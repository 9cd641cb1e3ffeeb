import Foundation
import Logging
import SystemPackage
import DocFSRemote

/// Reads a content version from the bucket into a file: a version made of blocks (its key names
/// a manifest) block by block, each checked against its SHA-256 before a byte of it is written;
/// a whole object (uploaded before schema 8) as one ranged request. Adjacent blocks of one pack
/// are fetched together (a file uploaded at once is one request per `runBytes`).
///
/// A block that does not match its hash (a pack replaced or damaged in the bucket) fails the
/// read with `DownloadVerifier.Mismatch` and one log line naming the pack: none of its bytes
/// reach the file. The block locations are asked for at every call, so a retry after gc moved a
/// block to a new pack finds it there.
///
/// A block found damaged, or whose pack or range is gone, is reported to the server, which flags
/// that place (schema 16): a block none of whose places is sound is not counted on by uploads,
/// so the next upload of its bytes sends them, and a replica that holds them sends them again
/// (`SyncEngine.healDamagedBlocks`). The read goes on from the block's other places (`places`),
/// soundest first, each checked the same way; the reader gets EIO only when none holds it.
struct ContentFetcher: Sendable {
    let server: any ReplicaServer
    let objects: any ObjectStore
    let bucket: String
    /// The tree's prefix: a key or pack outside it is refused (`ServerRowChecks`).
    let prefix: String
    let logger: Logger
    var runBytes: Int64 = 8 << 20
    /// Heard once a damaged block was marked on the server (the engine looks for its bytes here).
    var reported: (@Sendable () -> Void)? = nil

    /// Bytes `range` of version `key` into the existing file at `path`, at the same offsets;
    /// `progress` hears the bytes written from `range`'s start and answers false to stop.
    func fetch(
        key: String, range: Range<Int64>, intoFileAt path: FilePath,
        progress: @escaping @Sendable (Int64) -> Bool
    ) async throws -> Int64 {
        let found: (size: Int64, blocks: [StoredBlock])?
        do {
            found = try await checkedManifest(key: key)
        } catch let refused as RefusedRow {
            // Asking again gets the same rows: no retry (the reader gets EIO).
            throw DownloadVerifier.Mismatch(message: refused.message)
        }
        guard let manifest = found else {
            return try await objects.getObject(bucket: bucket, key: key, range: range, intoFileAt: path, progress: progress)
        }
        return try await fetch(manifest.blocks, range: range, intoFileAt: path, progress: progress)
    }

    /// The manifest of version `key` (nil: a whole object), its key and rows checked first: one
    /// that breaks a rule is refused (`RefusedRow`; the caller logs it once: the store's failed
    /// download, the catch-up's item set aside).
    private func checkedManifest(key: String) async throws -> (size: Int64, blocks: [StoredBlock])? {
        if let problem = ServerRowChecks.contentKey(key, prefix: prefix) {
            throw RefusedRow(message: "the server's version \(key.prefix(120)) was refused: \(problem)")
        }
        guard let manifest = try await server.manifest(key: key) else { return nil }
        if let problem = ServerRowChecks.manifest(size: manifest.size, blocks: manifest.blocks, prefix: prefix) {
            throw RefusedRow(message: "the server's manifest \(key.prefix(120)) was refused: \(problem)")
        }
        return manifest
    }

    private func fetch(
        _ manifestBlocks: [StoredBlock], range: Range<Int64>, intoFileAt path: FilePath,
        progress: @escaping @Sendable (Int64) -> Bool
    ) async throws -> Int64 {
        var blocks = manifestBlocks
        let fd = try FileDescriptor.open(path, .writeOnly, options: [.closeOnExec])
        defer { try? fd.close() }
        var written: Int64 = 0
        var fileOffset: Int64 = 0
        var index = 0
        // Places found damaged in this read ("hash pack"): another place of the block is tried.
        var bad: Set<String> = []
        // The first block holding `range`'s start.
        while index < blocks.count, fileOffset + blocks[index].length <= range.lowerBound {
            fileOffset += blocks[index].length
            index += 1
        }
        while index < blocks.count, fileOffset < range.upperBound {
            // A run: blocks back to back in one pack.
            var end = index + 1
            var runLength = blocks[index].length
            while end < blocks.count, blocks[end].pack == blocks[index].pack, blocks[end].version == blocks[index].version,
                blocks[end].offset == blocks[end - 1].offset + blocks[end - 1].length,
                runLength + blocks[end].length <= runBytes
            {
                runLength += blocks[end].length
                end += 1
            }
            let first = blocks[index]
            var failed: [StoredBlock] = []
            var failure = ""
            var bytes: [UInt8] = []
            do {
                bytes = try await objects.getObjectBytes(
                    bucket: bucket, key: first.pack, versionID: first.version,
                    range: first.offset...(first.offset + runLength - 1), upTo: Int(runLength))
            } catch let error as S3Error where error.kind == .notFound || error.kind == .invalidRange {
                // The pack, or the range its blocks are said to be at, is gone from the bucket.
                await report(blocks[index..<end], "its pack \(first.pack) or its range there is gone (\(error.kind))")
                failed = Array(blocks[index..<end])
                failure = "the pack \(first.pack) or the range of its blocks at \(first.offset) is gone from the bucket"
            }
            if failed.isEmpty, Int64(bytes.count) != runLength {
                var whole = Int64(0)
                let cut = blocks[index..<end].filter {
                    whole += $0.length; return whole > Int64(bytes.count)
                }
                await report(cut[...], "its pack \(first.pack) is shorter than its blocks")
                failed = cut
                failure = "the pack \(first.pack) is shorter than its blocks (\(bytes.count) of \(runLength) bytes at \(first.offset))"
            }
            if failed.isEmpty {
                // Every block of the run checked before a byte is written: all the damaged ones are marked.
                var at = 0
                for block in blocks[index..<end] {
                    let length = Int(block.length)
                    let actual = bytes.withUnsafeBytes { BlockHash.of(UnsafeRawBufferPointer(rebasing: $0[at..<at + length])) }
                    if actual != block.hash {
                        if failed.isEmpty {
                            logger.error(
                                "sync: block \(block.hash.prefix(12))… in the pack \(block.pack) at \(block.offset) does not match its SHA-256 (\(actual.prefix(12))…): replaced or damaged in the bucket; not used"
                            )
                        }
                        failed.append(block)
                    }
                    at += length
                }
                if let block = failed.first {
                    await report(failed[...], "their bytes do not match their SHA-256")
                    failure = "the pack \(block.pack) does not match the SHA-256 of its block at \(block.offset) (replaced or damaged in the bucket)"
                }
            }
            if !failed.isEmpty {
                // Another place of each failed block, if the block has one not tried yet: the run
                // is read again from there (schema 16: a block may have several places).
                for block in failed { bad.insert("\(block.hash) \(block.pack)") }
                guard let others = try? await server.places(of: Array(Set(failed.map(\.hash)))) else {
                    throw DownloadVerifier.Mismatch(message: failure)
                }
                var replaced = 0
                for i in index..<blocks.count where bad.contains("\(blocks[i].hash) \(blocks[i].pack)") {
                    guard
                        let next = others[blocks[i].hash]?.first(where: {
                            !bad.contains("\($0.hash) \($0.pack)") && $0.length == blocks[i].length
                                && ServerRowChecks.block($0, prefix: prefix) == nil
                        })
                    else { continue }
                    blocks[i] = next
                    replaced += 1
                }
                guard replaced > 0, !blocks[index..<end].contains(where: { bad.contains("\($0.hash) \($0.pack)") }) else {
                    throw DownloadVerifier.Mismatch(message: failure)
                }
                logger.notice("sync: read \(replaced) block(s) from another place on the server (\(failure))")
                continue
            }
            var at = 0
            for block in blocks[index..<end] {
                let length = Int(block.length)
                // Only what `range` asks for (a stream starting inside a block skips its head).
                let skip = Int(max(0, range.lowerBound - fileOffset))
                if skip < length {
                    try bytes.withUnsafeBytes { raw in
                        _ = try fd.writeAll(
                            toAbsoluteOffset: fileOffset + Int64(skip), UnsafeRawBufferPointer(rebasing: raw[at + skip..<at + length]))
                    }
                    written += Int64(length - skip)
                }
                fileOffset += block.length
                at += length
            }
            index = end
            if !progress(written) { break }
        }
        return written
    }

    /// Version `key` whole into a new file at `path` (created or truncated).
    /// A row that breaks a rule of `ServerRowChecks` throws `RefusedRow`.
    func download(key: String, to path: String) async throws {
        guard let manifest = try await checkedManifest(key: key) else {
            _ = try await objects.getObject(bucket: bucket, key: key, range: nil, toFileAt: FilePath(path), progress: nil)
            return
        }
        let fd = try FileDescriptor.open(
            FilePath(path), .writeOnly, options: [.create, .truncate, .closeOnExec],
            permissions: [.ownerReadWrite])
        try fd.close()
        _ = try await fetch(manifest.blocks, range: 0..<manifest.size, intoFileAt: FilePath(path)) { _ in true }
    }

    /// Tells the server these blocks are damaged (it marks each where it was read), one log line;
    /// a server that cannot be told now hears it from the next reader or `docfs remote check`.
    private func report(_ damaged: ArraySlice<StoredBlock>, _ why: String) async {
        var marked = 0
        for block in damaged {
            do {
                if try await server.markBlockDamaged(hash: block.hash, pack: block.pack) { marked += 1 }
            } catch {
                logger.warning("sync: could not tell the server that block \(block.hash.prefix(12))… is damaged: \(error)")
                return
            }
        }
        guard marked > 0 else { return }
        logger.warning("sync: marked \(marked) block(s) damaged on the server (\(why)): the next upload of their bytes sends them again")
        reported?()
    }
}
