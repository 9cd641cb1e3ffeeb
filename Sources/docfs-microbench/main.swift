import Foundation
import Logging
import DocFSBridge
import DocFSProvider
import DocFSStore

// Microbenchmarks of docfs's hot paths without a mount: the bridge's per-request work and the
// store's lookups and actions. Absolute numbers depend on the machine; compare runs on one
// machine (`make microbench`), never assert on them.

func time(_ n: Int, _ body: (Int) throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    for i in 0..<n { try body(i) }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
}

/// Async actions, timed from a nonisolated function: top-level code runs on the main actor, and
/// awaiting from there would add two thread hops to every call.
nonisolated func timeActions(_ n: Int, _ body: (Int) async throws -> Void) async rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    for i in 0..<n { try await body(i) }
    return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)
}

func report(_ name: String, _ ns: Double) {
    let value = ns >= 10_000 ? String(format: "%9.1f µs", ns / 1000) : String(format: "%9.0f ns", ns)
    print(name.padding(toLength: 44, withPad: " ", startingAt: 0) + value)
}

print("bridge (no provider):")
for (name, ns) in HotPathBenchmark.run() { report("  " + name, ns) }

let root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("docfs-microbench-\(getpid())")
defer { try? FileManager.default.removeItem(at: root) }
var logger = Logger(label: "microbench")
logger.logLevel = .error
try LocalStore.create(at: root, layout: nil)
let store = try LocalStore.open(at: root, logger: logger)
defer { store.close() }

let folders = 1_000
print("store (\(folders) folders, then lookups):")
var made: [Item] = []
report(
    "  createDirectory (one transaction)",
    try await timeActions(folders) { i in
        made.append(try await store.createDirectory(withName: "d\(i)", inParentItemIdentifier: .rootContainer))
    })
report("  childItem(named:in:) hit", try time(100_000) { i in _ = try store.childItem(named: "d\(i % folders)", in: .rootContainer) })
report("  childItem(named:in:) miss", try time(100_000) { i in _ = try? store.childItem(named: "x\(i % folders)", in: .rootContainer) })
report("  item(for:)", try time(100_000) { i in _ = try store.item(for: made[i % folders].identifier) })
report("  enumerateItems (\(folders) children)", try time(200) { _ in _ = try store.enumerateItems(in: .rootContainer) })
report(
    "  renameItem (one transaction)",
    try await timeActions(folders) { i in _ = try await store.renameItem(withIdentifier: made[i].identifier, toName: "r\(i)") })
report("  deleteItem (one transaction)", try await timeActions(folders) { i in try await store.deleteItem(withIdentifier: made[i].identifier) })
