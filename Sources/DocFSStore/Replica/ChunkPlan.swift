/// The order a download fetches a file's chunks in: the chunks a waiting reader needs first, then
/// on from there (ahead of the reader), then the ones skipped, so the whole file arrives in the
/// end. A value: the download keeps it under its lock.
struct ChunkPlan {
    let size: Int64
    let chunkSize: Int64
    /// Chunk → a worker took it.
    private var taken: [Bool]
    /// Chunks a reader waits for, in the order asked.
    private var urgent: [Int] = []
    /// Where fetching goes on when no reader waits.
    private var cursor = 0
    private(set) var remaining: Int

    init(size: Int64, chunkSize: Int64) {
        precondition(chunkSize > 0)
        self.size = size
        self.chunkSize = chunkSize
        let count = size <= 0 ? 0 : Int((size + chunkSize - 1) / chunkSize)
        taken = Array(repeating: false, count: count)
        remaining = count
    }

    var count: Int { taken.count }

    func range(of chunk: Int) -> Range<Int64> {
        Int64(chunk) * chunkSize ..< min(size, Int64(chunk + 1) * chunkSize)
    }

    /// The next chunk to fetch (now taken), or nil when every chunk is.
    mutating func next() -> Int? {
        guard remaining > 0 else { return nil }
        while !urgent.isEmpty {
            let chunk = urgent.removeFirst()
            if !taken[chunk] { return take(chunk) }
        }
        for chunk in cursor..<count where !taken[chunk] { return take(chunk) }
        for chunk in 0..<cursor where !taken[chunk] { return take(chunk) }
        return nil
    }

    private mutating func take(_ chunk: Int) -> Int {
        taken[chunk] = true
        remaining -= 1
        cursor = chunk + 1
        return chunk
    }

    /// A reader waits for `range`: its chunks no worker took go first. True when there were any.
    mutating func want(_ range: Range<Int64>) -> Bool {
        guard !range.isEmpty, count > 0 else { return false }
        let first = Int(max(0, range.lowerBound) / chunkSize)
        let last = min(count - 1, Int((range.upperBound - 1) / chunkSize))
        guard first <= last else { return false }
        var added = false
        for chunk in first...last where !taken[chunk] && !urgent.contains(chunk) {
            urgent.append(chunk)
            added = true
        }
        return added
    }
}
