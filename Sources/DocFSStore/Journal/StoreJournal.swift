#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB

/// The store's redo log (`STORE/journal`), so that an action costs one small write instead of a
/// SQLite commit.
///
/// Each action appends one entry (its row upserts and deletions) with a single `pwrite` before it
/// answers: once the bytes are in the kernel's page cache, the action survives `kill -9`, which is
/// what README.md's *Durability* promises for everything but `fsync`. Entries reach SQLite in
/// batches, one transaction per batch, and that transaction also records the journal's generation
/// in `meta`, so recovery can tell applied entries from pending ones (replaying an applied batch
/// over its own result could collide on names). `synchronize()` flushes the batch before its
/// checkpoint, so a returned `fsync` still survives a power cut.
///
/// File: a header (`DOCFSJ1\n`, generation as UInt64 LE), then entries: payload length (UInt32 LE),
/// checksum (UInt64 LE, FNV-1a over the generation and the payload), payload. Recovery stops at the
/// first entry that is short or fails its checksum: a write torn by a crash, or an entry of an
/// earlier generation that a reset did not overwrite.
final class StoreJournal {
    /// One row change, as `Schema` applies it.
    enum Change: Sendable {
        case upsert([DatabaseValue])
        case delete(Int64)
        /// A row of the replica's outbox (`Schema.outboxColumns`), written with the change it describes.
        case outbox([DatabaseValue])
    }

    static let fileName = "journal"
    static let generationKey = "journalGeneration"
    static let magic: [UInt8] = Array("DOCFSJ1\n".utf8)
    static let headerSize = 16
    static let entryHeaderSize = 12

    /// Batch size: changes, or bytes in the file, before the batch goes to SQLite.
    static let flushChanges = 1024
    static let flushBytes: Int64 = 1 << 20

    let path: String
    private let fd: Int32
    private(set) var generation: UInt64
    private var offset: Int64 = 0
    /// Changes appended since the last flush, in order.
    private(set) var pending: [Change] = []
    /// After a failed flush: wait for this many pending changes before trying again.
    private var flushAt = StoreJournal.flushChanges
    /// Set when the file could not be reset after a flush; appends retry the reset first.
    private var needsReset = false
    /// Reused for encoding, so an append allocates nothing once warm.
    private var buffer: [UInt8] = []

    /// Opens (creating) the journal and starts `generation` in it, discarding what the file held:
    /// call `recover` first.
    init(storePath: String, generation: UInt64) throws(ProviderError) {
        path = storePath + "/" + Self.fileName
        let fd = sysOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .posix(errno, "open \(path)") }
        self.fd = fd
        self.generation = generation
        buffer.reserveCapacity(4096)
        do throws(ProviderError) { try start() } catch { sysClose(fd); throw error }
    }

    deinit { sysClose(fd) }

    var shouldFlush: Bool { pending.count >= flushAt || offset >= Self.flushBytes }

    /// Appends one action's changes as one entry. On return the entry is in the kernel's hands.
    func append(_ changes: [Change]) throws(ProviderError) {
        if needsReset { try start() }
        buffer.removeAll(keepingCapacity: true)
        buffer.append(contentsOf: repeatElement(0, count: Self.entryHeaderSize))
        for change in changes { Self.encode(change, into: &buffer) }
        let payloadCount = buffer.count - Self.entryHeaderSize
        let checksum = Self.checksum(generation: generation, buffer, from: Self.entryHeaderSize)
        Self.put(UInt32(payloadCount), into: &buffer, at: 0)
        Self.put(checksum, into: &buffer, at: 4)
        let written = buffer.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        guard written == buffer.count else {
            // A short write leaves a torn entry that the next append overwrites; recovery stops at it.
            let err = written < 0 ? errno : ENOSPC
            throw .posix(err, "append to \(path)")
        }
        offset += Int64(written)
        pending.append(contentsOf: changes)
    }

    /// After the pending changes were committed to SQLite with this generation: a new generation
    /// in an emptied file.
    func didFlush() throws(ProviderError) {
        pending.removeAll(keepingCapacity: true)
        flushAt = Self.flushChanges
        generation += 1
        try start()
    }

    /// After a failed flush: keep the changes (they are in the file) and retry after another batch.
    func flushFailed() {
        flushAt = pending.count + Self.flushChanges
    }

    /// Empties the file and writes the header. Truncating first means a crash in between leaves an
    /// empty journal, never old entries under a new generation.
    private func start() throws(ProviderError) {
        needsReset = true
        guard ftruncate(fd, 0) == 0 else { throw .posix(errno, "truncate \(path)") }
        var header = Self.magic
        header.append(contentsOf: repeatElement(0, count: 8))
        Self.put(generation, into: &header, at: 8)
        let written = header.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == header.count else { throw .posix(written < 0 ? errno : ENOSPC, "write \(path)") }
        offset = Int64(Self.headerSize)
        needsReset = false
    }

    // MARK: Recovery

    struct Recovery {
        /// Changes applied from the file (0 when it held none, or only applied ones).
        var applied: Int
        /// The generation the next journal should start.
        var nextGeneration: UInt64
        /// Bytes after the last whole entry (a torn write), for the log.
        var discardedBytes: Int
    }

    /// Applies the entries of a journal left by a process that did not flush it (a crash), in one
    /// transaction that also records their generation. A store without a journal file recovers
    /// nothing.
    static func recover(storePath: String, database: DatabaseQueue) throws(ProviderError) -> Recovery {
        let path = storePath + "/" + fileName
        let committed: UInt64
        do {
            committed = try database.inDatabase { db in
                UInt64(try Schema.meta(db, generationKey) ?? "0") ?? 0
            }
        } catch {
            throw ProviderError(.corruptFile, "store \(storePath): cannot read the journal generation: \(error)")
        }
        guard let bytes = FileManager.default.contents(atPath: path), bytes.count >= headerSize,
            Array(bytes.prefix(magic.count)) == magic
        else {
            return Recovery(applied: 0, nextGeneration: committed + 1, discardedBytes: 0)
        }
        let generation = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
        guard generation > committed else {
            return Recovery(applied: 0, nextGeneration: committed + 1, discardedBytes: 0)
        }
        let (changes, end) = decodeEntries(Array(bytes), generation: generation)
        if !changes.isEmpty {
            do {
                try database.inDatabase { db in
                    try db.inTransaction {
                        try apply(changes, db)
                        try Schema.setMeta(db, generationKey, String(generation))
                        return .commit
                    }
                }
            } catch {
                throw ProviderError(
                    .corruptFile,
                    "store \(storePath): the journal's \(changes.count) change(s) cannot be applied: \(error); `docfs check --repair` sets the journal aside"
                )
            }
        }
        return Recovery(applied: changes.count, nextGeneration: generation + 1, discardedBytes: bytes.count - end)
    }

    /// Sets an unusable journal aside (for `docfs check --repair`); returns the new name.
    static func setAside(storePath: String) -> String? {
        let path = storePath + "/" + fileName
        let aside = path + ".unapplied-\(Int(Date().timeIntervalSince1970))"
        return rename(path, aside) == 0 ? aside : nil
    }

    static func apply(_ changes: [Change], _ db: Database) throws {
        for change in coalesced(changes) {
            switch change {
            case .upsert(let values): try Schema.upsert(db, values: values)
            case .delete(let row): try Schema.delete(db, row)
            case .outbox(let values): try Schema.insertOutbox(db, values: values)
            }
        }
    }

    /// `changes` with the repeated upserts of a row folded into its first one, carrying the last
    /// values, where the row is never deleted and keeps its parent and name throughout: a folder
    /// whose date every create inside it bumps is written once per batch instead of once per
    /// create. Rows whose place changes keep every step, because another change in between may
    /// depend on the name they held (the unique index would refuse a reordering).
    static func coalesced(_ changes: [Change]) -> [Change] {
        struct Row { var first: Int; var last: [DatabaseValue]; var stable: Bool; var count: Int }
        var rows: [Int64: Row] = [:]
        for (index, change) in changes.enumerated() {
            switch change {
            case .delete(let row):
                rows[row, default: Row(first: index, last: [], stable: false, count: 0)].stable = false
            case .upsert(let values):
                guard case .int64(let row) = values[0].storage else { continue }
                if var known = rows[row] {
                    known.stable = known.stable && samePlace(known.last, values)
                    known.last = values
                    known.count += 1
                    rows[row] = known
                } else {
                    rows[row] = Row(first: index, last: values, stable: true, count: 1)
                }
            case .outbox:
                continue
            }
        }
        guard rows.values.contains(where: { $0.stable && $0.count > 1 }) else { return changes }
        var result: [Change] = []
        result.reserveCapacity(changes.count)
        for (index, change) in changes.enumerated() {
            if case .upsert(let values) = change, case .int64(let row) = values[0].storage,
                let known = rows[row], known.stable, known.count > 1
            {
                if index == known.first { result.append(.upsert(known.last)) }
            } else {
                result.append(change)
            }
        }
        return result
    }

    /// Same parent and same name, byte for byte (Swift's `==` on strings would equate NFC and NFD).
    private static func samePlace(_ a: [DatabaseValue], _ b: [DatabaseValue]) -> Bool {
        guard a.count > 2, b.count > 2, a[1] == b[1] else { return false }
        switch (a[2].storage, b[2].storage) {
        case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
        default: return false
        }
    }

    // MARK: Encoding

    private enum Tag: UInt8 { case null = 0, int64, double, text, blob, upsert = 0x10, delete, outbox }

    private static func encode(_ change: Change, into buffer: inout [UInt8]) {
        switch change {
        case .delete(let row):
            buffer.append(Tag.delete.rawValue)
            append(UInt64(bitPattern: row), to: &buffer)
        case .upsert(let values), .outbox(let values):
            if case .outbox = change { buffer.append(Tag.outbox.rawValue) } else { buffer.append(Tag.upsert.rawValue) }
            buffer.append(UInt8(values.count))
            for value in values {
                switch value.storage {
                case .null: buffer.append(Tag.null.rawValue)
                case .int64(let v): buffer.append(Tag.int64.rawValue); append(UInt64(bitPattern: v), to: &buffer)
                case .double(let v): buffer.append(Tag.double.rawValue); append(v.bitPattern, to: &buffer)
                case .string(var v):
                    buffer.append(Tag.text.rawValue)
                    v.withUTF8 {
                        append(UInt32($0.count), to: &buffer); buffer.append(contentsOf: $0)
                    }
                case .blob(let v):
                    buffer.append(Tag.blob.rawValue)
                    append(UInt32(v.count), to: &buffer)
                    buffer.append(contentsOf: v)
                }
            }
        }
    }

    /// The changes of every whole, valid entry, and where the valid part of the file ends.
    static func decodeEntries(_ bytes: [UInt8], generation: UInt64) -> ([Change], Int) {
        var changes: [Change] = []
        var position = headerSize
        while position + entryHeaderSize <= bytes.count {
            let length = Int(read(UInt32.self, bytes[position...]))
            let sum = read(UInt64.self, bytes[(position + 4)...])
            let start = position + entryHeaderSize
            guard length > 0, start + length <= bytes.count,
                checksum(generation: generation, bytes[..<(start + length)], from: start) == sum,
                let entry = decodePayload(bytes[start..<(start + length)])
            else { break }
            changes.append(contentsOf: entry)
            position = start + length
        }
        return (changes, position)
    }

    private static func decodePayload(_ payload: ArraySlice<UInt8>) -> [Change]? {
        var changes: [Change] = []
        var cursor = payload.startIndex
        func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, cursor + count <= payload.endIndex else { return nil }
            defer { cursor += count }
            return payload[cursor..<(cursor + count)]
        }
        func u64() -> UInt64? { take(8).map { read(UInt64.self, $0) } }
        func u32() -> UInt32? { take(4).map { read(UInt32.self, $0) } }
        while cursor < payload.endIndex {
            guard let op = take(1)?.first else { return nil }
            switch Tag(rawValue: op) {
            case .delete:
                guard let row = u64() else { return nil }
                changes.append(.delete(Int64(bitPattern: row)))
            case .upsert, .outbox:
                let isOutbox = op == Tag.outbox.rawValue
                guard let count = take(1)?.first else { return nil }
                var values: [DatabaseValue] = []
                values.reserveCapacity(Int(count))
                for _ in 0..<count {
                    guard let tag = take(1)?.first.flatMap(Tag.init(rawValue:)) else { return nil }
                    switch tag {
                    case .null: values.append(.null)
                    case .int64:
                        guard let v = u64() else { return nil }
                        values.append(Int64(bitPattern: v).databaseValue)
                    case .double:
                        guard let v = u64() else { return nil }
                        values.append(Double(bitPattern: v).databaseValue)
                    case .text:
                        guard let n = u32(), let bytes = take(Int(n)) else { return nil }
                        values.append(String(decoding: bytes, as: UTF8.self).databaseValue)
                    case .blob:
                        guard let n = u32(), let bytes = take(Int(n)) else { return nil }
                        values.append(Data(bytes).databaseValue)
                    case .upsert, .delete, .outbox: return nil
                    }
                }
                changes.append(isOutbox ? .outbox(values) : .upsert(values))
            default:
                return nil
            }
        }
        return changes
    }

    // MARK: Bytes

    private static func append<T: FixedWidthInteger>(_ value: T, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func put<T: FixedWidthInteger>(_ value: T, into buffer: inout [UInt8], at index: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for (i, byte) in raw.enumerated() { buffer[index + i] = byte }
        }
    }

    /// The little-endian integer at the start of `bytes` (which holds at least its size).
    private static func read<T: FixedWidthInteger>(_: T.Type, _ bytes: ArraySlice<UInt8>) -> T {
        bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(as: T.self)) }
    }

    /// FNV-1a (64 bit) over the generation and `bytes[from...]`: cheap, and enough to tell a torn
    /// or stale entry from a whole one.
    static func checksum<C: Collection>(generation: UInt64, _ bytes: C, from start: C.Index) -> UInt64 where C.Element == UInt8 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        withUnsafeBytes(of: generation.littleEndian) { raw in
            for byte in raw { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        }
        for byte in bytes[start...] { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }
}
