import Foundation
import Synchronization

/// `docfs status` without a mountpoint: every docfs mount of the machine from the mount table,
/// with what each daemon reports of its sync (`user.docfs.status`, replicas only).
enum StatusList {
    struct Row {
        var mountpoint: String
        var store: String
        var provider: String
        /// nil: not a replica (or its daemon did not answer).
        var sync: [String: Any]?
        /// false: its daemon did not answer within `answerTimeout` (hung, or stopped).
        var answering = true

        var fields: [String: Any] {
            var f: [String: Any] = [
                "mountpoint": mountpoint, "store": store, "provider": provider, "replica": sync != nil,
                "answering": answering,
            ]
            f["online"] = (sync?["online"] as? Bool).map { $0 as Any } ?? NSNull()
            f["pending"] = (sync?["pending"] as? Int).map { $0 as Any } ?? NSNull()
            f["setAside"] = (sync?["setAside"] as? Int).map { $0 as Any } ?? NSNull()
            return f
        }
    }

    /// How long one mount's daemon may take to answer before it is listed as not answering.
    static let answerTimeout: DispatchTimeInterval = .seconds(3)

    static func rows() -> [Row] {
        MountTable.entries().filter { $0.type == "fuse.docfs" }.map { entry in
            let store = entry.source.hasPrefix("docfs:") ? String(entry.source.dropFirst("docfs:".count)) : entry.source
            var row = Row(mountpoint: entry.mountpoint, store: store, provider: store == Mount.memoryStore ? "memory" : "store")
            // A hung daemon would hold getxattr forever: asked on a thread of its own, and left
            // behind (the process ends soon after) when it does not answer in time.
            let answer = Answer()
            let done = DispatchSemaphore(value: 0)
            let mountpoint = entry.mountpoint
            Thread.detachNewThread {
                answer.set(Info.attribute(mountpoint, "user.docfs.status"))
                done.signal()
            }
            guard done.wait(timeout: .now() + answerTimeout) == .success else {
                row.answering = false
                return row
            }
            row.sync = answer.get().flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
            return row
        }
    }

    /// The status text a thread read, handed back under a lock.
    final class Answer: @unchecked Sendable {
        private let lock = Mutex<Void>(())
        private var text: String?
        func set(_ value: String?) { lock.withLock { _ in text = value } }
        func get() -> String? { lock.withLock { _ in text } }
    }

    static func run(json: Bool) {
        let rows = rows()
        if json {
            print(jsonText(["mounts": rows.map(\.fields), "build": BuildInfo.fields]))
            return
        }
        guard !rows.isEmpty else {
            print("no docfs mounts")
            return
        }
        var table = [["MOUNTPOINT", "STORE", "PROVIDER", "REPLICA", "ONLINE", "PENDING", "SET ASIDE"]]
        for row in rows {
            let online = !row.answering ? "not answering" : (row.sync?["online"] as? Bool).map { $0 ? "online" : "offline" } ?? "-"
            table.append([
                row.mountpoint, row.store, row.provider, row.sync == nil ? "no" : "yes", online,
                (row.sync?["pending"] as? Int).map(String.init) ?? "-",
                (row.sync?["setAside"] as? Int).map(String.init) ?? "-",
            ])
        }
        let widths = (0..<table[0].count).map { column in table.map { $0[column].count }.max() ?? 0 }
        for line in table {
            print(
                zip(line, widths).map { cell, width in cell.padding(toLength: width, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                    .trimmingCharacters(in: .whitespaces))
        }
    }

    /// One JSON object on one line, keys sorted (as JSONOutput), nulls kept.
    static func jsonText(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}
