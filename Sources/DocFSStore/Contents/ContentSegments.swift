#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import Synchronization

/// The bytes of small files, appended to segment files `STORE/segments/<n>` instead of a content
/// file each (issue 28): an import appends one entry, with one `pwrite`, before the journal entry
/// that makes the file exist, so there is no content inode to make and no rename.
///
/// An entry is a 32-byte header — magic `DSE2` (UInt32 LE), length (UInt32), row (Int64), sequence
/// (UInt64), checksum (UInt64) over row, sequence, length and the bytes — then the bytes. The
/// checksum takes 8 bytes a step in four lanes (`wordChecksum`); entries of the first format
/// (magic `DSEG`, FNV-1a a byte at a time, a sixth of the copy-in's CPU) are still read.
/// Entries are only ever appended, to the segment with the highest number (the active one, a new
/// one past `segmentLimit`). Which entries are live is not written anywhere: at open (`scan`) the
/// entry with the highest sequence of each row is the row's candidate, and the store keeps it
/// only while the row is a file item of that size with no content file of its own (`retain`), so
/// an entry appended by an import that crashed before its journal entry, the old entry of a
/// file moved to a content file of its own, and the entries of deleted files are dead bytes.
/// A torn last entry (a crash mid-append) is cut off at open.
///
/// Dead bytes are reclaimed by `compact`: the live entries of a mostly dead segment are appended
/// again (new sequences, the same bytes), the active segment fsynced, and the old file removed.
/// A crash at any point leaves each row's bytes in at least one entry.
package final class ContentSegments: Sendable {
    static let magic: UInt32 = 0x3245_5344 // "DSE2" little-endian
    static let fnvMagic: UInt32 = 0x4745_5344 // "DSEG": the first format, read, never written
    static let headerSize = 32
    /// A new segment is started when the active one would grow past this.
    package static let defaultSegmentLimit: Int64 = 64 << 20

    /// Where a row's bytes are.
    package struct Location: Sendable, Equatable {
        package var segment: UInt64
        /// Of the entry's header; the bytes follow it.
        package var offset: Int64
        package var length: Int
        package var sequence: UInt64
        var entrySize: Int64 { Int64(ContentSegments.headerSize + length) }
    }

    /// One open segment file; closed when the last reader lets go of it.
    final class Segment: Sendable {
        let number: UInt64
        let fd: Int32
        init(number: UInt64, fd: Int32) {
            self.number = number
            self.fd = fd
        }
        deinit { Glibc.close(fd) }
    }

    struct State {
        var index: [Int64: Location] = [:]
        var segments: [UInt64: Segment] = [:]
        /// Bytes in each segment file, and how many of them live entries hold.
        var sizes: [UInt64: Int64] = [:]
        var live: [UInt64: Int64] = [:]
        var nextSequence: UInt64 = 1
        /// Segments appended to since the last `synchronize`.
        var unsynced: Set<UInt64> = []
        var active: UInt64? { segments.keys.max() }
    }

    /// One problem `verify` found: a segment whose entries stop being readable at `offset`.
    package struct Damage: Sendable, Equatable {
        package var segment: UInt64
        package var offset: Int64
        package var size: Int64
        package var reason: String
    }

    package let directory: String
    let segmentLimit: Int64
    let state = Mutex(State())

    package init(directory: String, segmentLimit: Int64 = ContentSegments.defaultSegmentLimit) throws(ProviderError) {
        self.directory = directory
        self.segmentLimit = segmentLimit
        if mkdir(directory, 0o755) != 0 && errno != EEXIST { throw .posix(errno, "make \(directory)") }
    }

    func path(_ number: UInt64) -> String { directory + "/" + String(number) }

    /// The segment files by number, ascending; other names in the folder are ignored.
    func segmentNumbers() throws(ProviderError) -> [UInt64] {
        try directoryEntries(directory).compactMap { name in UInt64(name).flatMap { String($0) == name ? $0 : nil } }.sorted()
    }

    // MARK: - Opening

    /// Reads every segment, takes the newest entry of each row as its candidate and cuts off what
    /// follows the first unreadable entry of a segment (a torn append). Answers what was cut.
    @discardableResult
    package func scan() throws(ProviderError) -> [Damage] {
        var damages: [Damage] = []
        var found = State()
        for number in try segmentNumbers() {
            let fd = sysOpen(path(number), O_RDWR | O_CLOEXEC)
            if fd < 0 { throw .posix(errno, "open segment \(path(number))") }
            let segment = Segment(number: number, fd: fd)
            let (entries, end, damage) = Self.entries(of: fd, number: number)
            if let damage {
                damages.append(damage)
                if ftruncate(fd, off_t(end)) != 0 { throw .posix(errno, "cut the torn end of segment \(path(number))") }
            }
            found.segments[number] = segment
            found.sizes[number] = end
            for (row, location) in entries {
                found.nextSequence = max(found.nextSequence, location.sequence + 1)
                if let old = found.index[row], old.sequence > location.sequence { continue }
                found.index[row] = location
            }
        }
        for location in found.index.values { found.live[location.segment, default: 0] += location.entrySize }
        state.withLock { $0 = found }
        return damages
    }

    /// Keeps the rows `isLive(row, length)` says are stored here; the rest are dead bytes.
    package func retain(_ isLive: (Int64, Int) throws -> Bool) rethrows {
        let candidates = state.withLock { $0.index }
        var dead: [Int64] = []
        for (row, location) in candidates where try !isLive(row, location.length) { dead.append(row) }
        state.withLock { state in
            for row in dead {
                guard let location = state.index.removeValue(forKey: row) else { continue }
                state.live[location.segment, default: 0] -= location.entrySize
            }
        }
    }

    /// Every entry of a segment up to the first one that cannot be read, the offset where that
    /// one begins (the end of the good part) and what is wrong with it.
    static func entries(of fd: Int32, number: UInt64) -> ([(Int64, Location)], Int64, Damage?) {
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            return ([], 0, Damage(segment: number, offset: 0, size: 0, reason: "cannot stat: \(String(cString: strerror(errno)))"))
        }
        let size = Int64(st.st_size)
        var entries: [(Int64, Location)] = []
        var offset: Int64 = 0
        var header = [UInt8](repeating: 0, count: headerSize)
        var bytes: [UInt8] = []
        while offset < size {
            func damage(_ reason: String) -> ([(Int64, Location)], Int64, Damage?) {
                (entries, offset, Damage(segment: number, offset: offset, size: size - offset, reason: reason))
            }
            guard size - offset >= Int64(headerSize), readFully(fd, &header, at: offset) else { return damage("a short entry header") }
            let kind = load(UInt32.self, header, 0)
            guard kind == magic || kind == fnvMagic else { return damage("no entry header") }
            let length = Int(load(UInt32.self, header, 4))
            let row = Int64(bitPattern: load(UInt64.self, header, 8))
            let sequence = load(UInt64.self, header, 16)
            guard size - offset - Int64(headerSize) >= Int64(length) else { return damage("an entry cut short") }
            bytes = [UInt8](repeating: 0, count: length)
            guard readFully(fd, &bytes, at: offset + Int64(headerSize)) else { return damage("an unreadable entry") }
            let sum =
                kind == magic
                ? bytes.withUnsafeBytes { wordChecksum(row: row, sequence: sequence, $0) }
                : checksum(row: row, sequence: sequence, bytes)
            guard sum == load(UInt64.self, header, 24) else {
                return damage("an entry whose checksum does not match")
            }
            entries.append((row, Location(segment: number, offset: offset, length: length, sequence: sequence)))
            offset += Int64(headerSize + length)
        }
        return (entries, offset, nil)
    }

    // MARK: - Reading and writing

    package func location(of row: Int64) -> Location? { state.withLock { $0.index[row] } }

    package var isEmpty: Bool { state.withLock { $0.index.isEmpty } }

    /// A new descriptor (the caller closes it) on the segment holding a row's bytes, with where
    /// they are in it; nil when the row has none here. The entry never changes, and the
    /// descriptor keeps a compacted segment readable until it is closed.
    package func slice(_ row: Int64) throws(ProviderError) -> StoredSlice? {
        guard
            let (location, segment) = state.withLock({ state -> (Location, Segment)? in
                guard let location = state.index[row], let segment = state.segments[location.segment] else { return nil }
                return (location, segment)
            })
        else { return nil }
        let fd = fcntl(segment.fd, F_DUPFD_CLOEXEC, 0)
        if fd < 0 { throw .posix(errno, "open segment \(path(location.segment))") }
        return StoredSlice(fd: fd, offset: location.offset + Int64(Self.headerSize), length: location.length)
    }

    /// A row's bytes, or nil when the row has none here.
    package func read(_ row: Int64) throws(ProviderError) -> [UInt8]? {
        guard
            let (location, segment) = state.withLock({ state -> (Location, Segment)? in
                guard let location = state.index[row], let segment = state.segments[location.segment] else { return nil }
                return (location, segment)
            })
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: location.length)
        guard Self.readFully(segment.fd, &bytes, at: location.offset + Int64(Self.headerSize)) else {
            throw .posix(errno == 0 ? EIO : errno, "read item \(row) from segment \(path(location.segment))")
        }
        return bytes
    }

    /// Appends a row's bytes (one `pwrite`) and makes them the row's; the old entry, if any, is dead.
    @discardableResult
    package func append(_ row: Int64, _ bytes: [UInt8]) throws(ProviderError) -> Location {
        try state.withLock { (state) throws(ProviderError) -> Location in try append(row, bytes, in: &state) }
    }

    private func append(_ row: Int64, _ bytes: [UInt8], in state: inout State) throws(ProviderError) -> Location {
        guard bytes.count <= Int(UInt32.max) else { throw ProviderError(.invalidArgument, "too large for a segment") }
        let entrySize = Int64(Self.headerSize + bytes.count)
        var number = state.active
        if number == nil || (state.sizes[number!, default: 0] > 0 && state.sizes[number!, default: 0] + entrySize > segmentLimit) {
            let next = (number ?? 0) + 1
            let fd = sysOpen(path(next), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            if fd < 0 { throw .posix(errno, "make segment \(path(next))") }
            state.segments[next] = Segment(number: next, fd: fd)
            state.sizes[next] = 0
            number = next
        }
        let segment = state.segments[number!]!
        let offset = state.sizes[number!, default: 0]
        let sequence = state.nextSequence
        var entry = [UInt8](repeating: 0, count: Self.headerSize)
        entry.reserveCapacity(Self.headerSize + bytes.count)
        entry.append(contentsOf: bytes)
        Self.store(Self.magic, &entry, 0)
        Self.store(UInt32(bytes.count), &entry, 4)
        Self.store(UInt64(bitPattern: row), &entry, 8)
        Self.store(sequence, &entry, 16)
        Self.store(bytes.withUnsafeBytes { Self.wordChecksum(row: row, sequence: sequence, $0) }, &entry, 24)
        var written = 0
        while written < entry.count {
            let n = entry.withUnsafeBytes { pwrite(segment.fd, $0.baseAddress! + written, entry.count - written, off_t(offset) + off_t(written)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let error = errno
                _ = ftruncate(segment.fd, off_t(offset))
                throw .posix(n < 0 ? error : ENOSPC, "append item \(row) to segment \(path(number!))")
            }
            written += n
        }
        FaultInjection.point(.segmentAppend) // test-only crash point (DOCFS_FAULT)
        let location = Location(segment: number!, offset: offset, length: bytes.count, sequence: sequence)
        if let old = state.index[row] { state.live[old.segment, default: 0] -= old.entrySize }
        state.index[row] = location
        state.live[number!, default: 0] += entrySize
        state.sizes[number!] = offset + entrySize
        state.nextSequence += 1
        state.unsynced.insert(number!)
        return location
    }

    /// The row's bytes are no longer here (the file was deleted, replaced or given a content
    /// file of its own): its entry is dead.
    package func remove(_ row: Int64) {
        state.withLock { state in
            guard let location = state.index.removeValue(forKey: row) else { return }
            state.live[location.segment, default: 0] -= location.entrySize
        }
    }

    /// fsync of the segments appended to since the last call.
    package func synchronize() throws(ProviderError) {
        let (pending, segments) = state.withLock { state -> (Set<UInt64>, [Segment]) in
            let pending = state.unsynced
            state.unsynced.removeAll()
            return (pending, pending.compactMap { state.segments[$0] })
        }
        for segment in segments where fsync(segment.fd) != 0 {
            let error = errno
            state.withLock { $0.unsynced.formUnion(pending) }
            throw .posix(error, "fsync segment \(path(segment.number))")
        }
        if !pending.isEmpty { try sysFsync(path: directory, directory: true) }
    }

    // MARK: - Compaction

    /// Segments other than the active one whose live entries fill less than `liveFraction` of them.
    package func mostlyDead(liveFraction: Double = 0.5) -> [UInt64] {
        state.withLock { state in
            let active = state.active
            return state.sizes.keys.sorted().filter { number in
                number != active && Double(state.live[number, default: 0]) < liveFraction * Double(state.sizes[number, default: 0])
            }
        }
    }

    /// Bytes in segments in all, and how many of them are live.
    package var usage: (total: Int64, live: Int64) {
        state.withLock { state in (state.sizes.values.reduce(0, +), state.live.values.reduce(0, +)) }
    }

    /// Moves the live entries of `number` to the active segment and removes the file; answers how
    /// many bytes that freed. Appends and removals may run meanwhile: each row is moved under the
    /// lock, and only while its entry is still the one in `number`.
    @discardableResult
    package func compact(_ number: UInt64) throws(ProviderError) -> Int64 {
        let rows = state.withLock { state in state.active == number ? [] : state.index.filter { $0.value.segment == number }.map(\.key) }
        for row in rows {
            try state.withLock { (state) throws(ProviderError) in
                guard let location = state.index[row], location.segment == number, let segment = state.segments[number] else { return }
                var bytes = [UInt8](repeating: 0, count: location.length)
                guard Self.readFully(segment.fd, &bytes, at: location.offset + Int64(Self.headerSize)) else {
                    throw .posix(errno == 0 ? EIO : errno, "read item \(row) from segment \(path(number)) to compact it")
                }
                _ = try append(row, bytes, in: &state)
                if state.active == number { throw ProviderError(.busy, "segment \(number) became the active one") }
            }
        }
        // The copies must be on disk before the only other copy goes.
        try synchronize()
        return state.withLock { state -> Int64 in
            guard state.index.values.allSatisfy({ $0.segment != number }), state.active != number else { return 0 }
            let freed = state.sizes.removeValue(forKey: number) ?? 0
            state.live.removeValue(forKey: number)
            state.segments.removeValue(forKey: number)
            state.unsynced.remove(number)
            _ = sysUnlink(path(number))
            return freed
        }
    }

    // MARK: - Checking

    /// Reads every segment without changing anything (`docfs check`): the unreadable tails.
    package static func verify(directory: String) throws(ProviderError) -> (entries: [(row: Int64, location: Location)], damages: [Damage]) {
        var all: [(row: Int64, location: Location)] = []
        var damages: [Damage] = []
        let numbers: [UInt64]
        do {
            numbers = try directoryEntries(directory).compactMap { name in UInt64(name).flatMap { String($0) == name ? $0 : nil } }.sorted()
        } catch  where error.errno == ENOENT {
            return ([], [])
        }
        for number in numbers {
            let fd = sysOpen(directory + "/" + String(number), O_RDONLY | O_CLOEXEC)
            if fd < 0 { throw .posix(errno, "open segment \(directory)/\(number)") }
            defer { sysClose(fd) }
            let (entries, _, damage) = entries(of: fd, number: number)
            all.append(contentsOf: entries.map { (row: $0.0, location: $0.1) })
            if let damage { damages.append(damage) }
        }
        return (all, damages)
    }

    // MARK: - Bytes

    /// The checksum of `DSE2` entries: four lanes, each folding in one little-endian 64-bit word
    /// per step by xor, an odd multiply and a rotate (each a bijection, so a changed word always
    /// changes its lane), then mixed together. About 8 bytes a cycle against FNV-1a's one byte
    /// per multiply's latency; it guards against torn and damaged writes, not against an adversary.
    static func wordChecksum(row: Int64, sequence: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let prime: UInt64 = 0x9E37_79B9_7F4A_7C15
        @inline(__always) func fold(_ lane: inout UInt64, _ word: UInt64) {
            let x = (lane ^ word) &* prime
            lane = x << 31 | x >> 33
        }
        @inline(__always) func word(_ at: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self)) }
        var a: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(bitPattern: row)
        var b: UInt64 = 0x2545_F491_4F6C_DD1D ^ sequence
        var c: UInt64 = 0x1000_0000_01b3 ^ UInt64(bytes.count)
        var d: UInt64 = 0xD6E8_FEB8_6659_FD93
        let count = bytes.count
        var at = 0
        while at + 32 <= count {
            fold(&a, word(at)); fold(&b, word(at + 8)); fold(&c, word(at + 16)); fold(&d, word(at + 24))
            at += 32
        }
        while at + 8 <= count { fold(&a, word(at)); at += 8 }
        var last: UInt64 = 0
        for shift in 0..<(count - at) { last |= UInt64(bytes[at + shift]) << (8 * UInt64(shift)) }
        fold(&b, last)
        var hash = a ^ (b << 17 | b >> 47) ^ (c << 29 | c >> 35) ^ (d << 43 | d >> 21)
        hash = (hash ^ hash >> 33) &* 0xff51_afd7_ed55_8ccd
        hash = (hash ^ hash >> 33) &* 0xc4ce_b9fe_1a85_ec53
        return hash ^ hash >> 33
    }

    /// FNV-1a over the same fields: the checksum of the first format's `DSEG` entries.
    static func checksum(row: Int64, sequence: UInt64, _ bytes: some Collection<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ byte: UInt8) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        withUnsafeBytes(of: UInt64(bitPattern: row).littleEndian) { for byte in $0 { mix(byte) } }
        withUnsafeBytes(of: sequence.littleEndian) { for byte in $0 { mix(byte) } }
        withUnsafeBytes(of: UInt32(truncatingIfNeeded: bytes.count).littleEndian) { for byte in $0 { mix(byte) } }
        for byte in bytes { mix(byte) }
        return hash
    }

    static func readFully(_ fd: Int32, _ buffer: inout [UInt8], at offset: Int64) -> Bool {
        var done = 0
        errno = 0
        while done < buffer.count {
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(offset) + off_t(done)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    private static func load<T: FixedWidthInteger>(_: T.Type, _ bytes: [UInt8], _ at: Int) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(bytes[at + index]) }
        return value
    }

    private static func store<T: FixedWidthInteger>(_ value: T, _ bytes: inout [UInt8], _ at: Int) {
        for index in 0..<MemoryLayout<T>.size { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
    }
}
