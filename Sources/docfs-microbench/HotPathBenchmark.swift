import Foundation
import DocFSProvider
import DocFSBridge

/// Timings of the bridge's own per-request work, without a mount or a provider: the inode
/// table (every lookup and forget), name checks and `stat` building (every lookup and getattr).
/// Run by `make microbench` to catch regressions; never part of the tests. Lives in the
/// benchmark target, reaching the bridge through its `package` declarations.
enum HotPathBenchmark {
    /// Nanoseconds per operation for each measured piece.
    static func run(iterations: Int = 200_000) -> [(name: String, nanoseconds: Double)] {
        var results: [(String, Double)] = []
        let ids = (0..<iterations).map { ItemIdentifier(String($0 + 3)) }
        let table = InodeTable()
        results.append(("inode table: remember (new)", time(iterations) { i in _ = table.remember(ids[i]) }))
        results.append(("inode table: remember (known)", time(iterations) { i in _ = table.remember(ids[i]) }))
        results.append(("inode table: identifier(ino)", time(iterations) { i in _ = table.identifier(UInt64(i + 2)) }))
        results.append(("inode table: forget", time(iterations) { i in table.forget(UInt64(i + 2), 2) }))

        let name = Array("report-2026-11-22.pdf".utf8CString)
        results.append(
            (
                "name check (21 bytes)",
                time(iterations) { _ in
                    name.withUnsafeBufferPointer { p in _ = try? Bridge.name(p.baseAddress!) }
                }
            ))

        let now = Date()
        let item = Item(
            identifier: ItemIdentifier("42"), parentIdentifier: .rootContainer, filename: "report.pdf",
            kind: .file, contentType: .pdf, documentSize: 4096, creationDate: now,
            contentModificationDate: now, capabilities: .all)
        let attributes = Attributes()
        results.append(("stat from item", time(iterations) { i in _ = attributes.stat(of: item, ino: UInt64(i)) }))

        // What `-o metrics` adds to every request: two clock reads and two atomic adds.
        let stats = RequestStats()
        results.append(("metrics: one request counted", time(iterations) { _ in stats.record(.getattr, since: RequestStats.now()) }))
        results.append(("metrics: two threads counting", timeConcurrently(iterations) { stats.record(.getattr, since: RequestStats.now()) }))
        return results
    }

    /// Nanoseconds per call with two threads calling at once (each `n` times): what sharing the
    /// counters' cache lines costs.
    private static func timeConcurrently(_ n: Int, _ body: @escaping @Sendable () -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        DispatchQueue.concurrentPerform(iterations: 2) { _ in for _ in 0..<n { body() } }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
    }

    private static func time(_ n: Int, _ body: (Int) -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<n { body(i) }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
    }
}
