/// Which parts of a file a download's streams fetch. A stream is one request from the start of
/// a chunk to the end of the file; it claims each chunk as its bytes reach it and stops at the
/// first chunk another stream has. A new stream starts at a chunk a waiting reader needs that
/// no stream is about to reach, or else at the first stretch of chunks no stream will reach, so
/// a sequential reader is served by one request and a read far ahead by one more. A value: the
/// download keeps it under its lock.
struct ChunkPlan {
    let size: Int64
    let chunkSize: Int64
    /// Chunk → some stream claimed it.
    private var taken: [Bool]
    /// Chunks a reader waits for that no stream is about to reach, in the order asked.
    private var urgent: [Int] = []
    /// Stream → the chunk it claims next (its bytes reach it next).
    private var heads: [Int: Int] = [:]

    init(size: Int64, chunkSize: Int64) {
        precondition(chunkSize > 0)
        self.size = size
        self.chunkSize = chunkSize
        // Rounded up without `size + chunkSize - 1`, which overflows near Int64.max.
        let count = size <= 0 ? 0 : Int(size / chunkSize + (size % chunkSize == 0 ? 0 : 1))
        taken = Array(repeating: false, count: count)
    }

    var count: Int { taken.count }

    func chunk(at offset: Int64) -> Int { Int(offset / chunkSize) }

    func start(of chunk: Int) -> Int64 { Int64(chunk) * chunkSize }

    /// Where a new stream `stream` starts (its first chunk, now claimed), or nil when nothing is
    /// left that another stream will not reach.
    mutating func begin(_ stream: Int) -> Int? {
        while !urgent.isEmpty {
            let chunk = urgent.removeFirst()
            if !taken[chunk] && !heads.values.contains(chunk) { return claim(chunk, by: stream) }
        }
        // The first stretch of unclaimed chunks no stream's head begins.
        var chunk = 0
        while chunk < count {
            if taken[chunk] { chunk += 1; continue }
            if !heads.values.contains(chunk) { return claim(chunk, by: stream) }
            while chunk < count && !taken[chunk] { chunk += 1 }
        }
        return nil
    }

    private mutating func claim(_ chunk: Int, by stream: Int) -> Int {
        taken[chunk] = true
        heads[stream] = chunk + 1 < count ? chunk + 1 : nil
        return chunk
    }

    /// Stream `stream`'s bytes reached `chunk` (its head): true if it is its own now, false if
    /// another stream has it (this one stops there).
    mutating func advance(_ stream: Int, into chunk: Int) -> Bool {
        guard chunk < count, !taken[chunk] else { heads[stream] = nil; return false }
        _ = claim(chunk, by: stream)
        return true
    }

    /// Chunks a failed stream claimed and did not write whole: another stream fetches them.
    mutating func release(_ chunks: Range<Int>) {
        for chunk in chunks where chunk < count { taken[chunk] = false }
    }

    /// Stream `stream` ended.
    mutating func end(_ stream: Int) { heads[stream] = nil }

    /// A reader waits for `range`: the first of its chunks no stream has claimed goes first,
    /// unless a stream reaches it next. True when it was added (a new stream is worth starting).
    /// (Only the first: a stream started there goes on through the rest of the range.)
    mutating func want(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty, count > 0 else { return false }
        let first = chunk(at: max(0, range.lowerBound))
        let last = min(count - 1, chunk(at: range.upperBound - 1))
        guard first <= last, let chunk = (first...last).first(where: { !taken[$0] }) else { return false }
        guard !heads.values.contains(chunk), !urgent.contains(chunk) else { return false }
        urgent.append(chunk)
        return true
    }
}
