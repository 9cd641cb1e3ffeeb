import ArgumentParser
import Foundation
import Glibc

/// `docfs status MOUNT`: a replica's sync status, as its daemon reports it (`user.docfs.status`
/// on the mount's root); `docfs status`: every docfs mount of the machine (StatusList).
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Show the sync status of a mounted replica: online, pending changes and bytes, upload rate, last error; without a mountpoint, every docfs mount of the machine."
    )

    @Argument(help: "The mountpoint (or any path in the mount); none: list every docfs mount.")
    var mountpoint: String?

    @Flag(
        help:
            "Print the daemon's JSON object (fields online, pending, pendingBytes, lastError, …, and build: this docfs's version; see docs/USING.md)."
    )
    var json = false

    func run() throws {
        guard let mountpoint else {
            StatusList.run(json: json)
            return
        }
        let object = try Self.read(mountpoint)
        if json {
            var fields = object.fields
            fields["build"] = BuildInfo.fields
            print(StatusList.jsonText(fields))
            return
        }
        print(Self.describe(object.fields).joined(separator: "\n"))
    }

    struct Snapshot {
        var text: String
        var fields: [String: Any]
        var pending: Int { fields["pending"] as? Int ?? 0 }
        /// Pending changes that can be sent (not set aside).
        var sendable: Int { max(0, pending - (fields["setAsideChanges"] as? Int ?? 0)) }
    }

    static func read(_ path: String) throws -> Snapshot {
        let canonical = MountTable.canonical(path)
        let root = MountTable.entry(at: canonical) == nil ? path : canonical
        guard let text = Info.attribute(root, "user.docfs.status") else {
            if Info.attribute(root, "user.docfs.identifier") != nil {
                throw UserFacingError("docfs: \(path) is a docfs mount without a remote (nothing to sync)")
            }
            throw UserFacingError("docfs: \(path) is not the root of a docfs mount")
        }
        let fields = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        return Snapshot(text: text, fields: fields)
    }

    static func describe(_ f: [String: Any]) -> [String] {
        let online = f["online"] as? Bool ?? false
        let pending = f["pending"] as? Int ?? 0
        let bytes = (f["pendingBytes"] as? NSNumber)?.int64Value ?? 0
        var lines = [
            "remote     \(f["remote"] as? String ?? "?")",
            "state      \(f["state"] as? String ?? "?") (\(online ? "online" : "offline"))",
            "pending    \(pending) change(s), \(bytesText(bytes))",
        ]
        let uploaded = (f["uploadedBytes"] as? NSNumber)?.int64Value ?? 0
        let rate = (f["uploadRate"] as? NSNumber)?.doubleValue ?? 0
        lines.append(
            "uploaded   \(bytesText(uploaded)) since mount, \(f["sent"] as? Int ?? 0) change(s) sent"
                + (rate > 0 ? ", now \(bytesText(Int64(rate)))/s" : ""))
        if let oldest = (f["oldestPendingSeconds"] as? NSNumber)?.doubleValue {
            lines.append("oldest     waiting \(Int(oldest)) s")
        }
        let incoming = (f["incoming"] as? NSNumber)?.int64Value ?? 0
        lines.append(
            "incoming   \(incoming == 0 ? "up to date" : "\(incoming) change(s) from other replicas to apply") (change log position \((f["anchor"] as? NSNumber)?.int64Value ?? 0))"
        )
        let downloading = f["downloading"] as? Int ?? 0
        if let limit = (f["cacheLimit"] as? NSNumber)?.int64Value {
            let here = (f["cachedBytes"] as? NSNumber)?.int64Value
            lines.append(
                "cache      \(here.map(bytesText) ?? "?") of \(bytesText(limit)) here" + (downloading > 0 ? ", \(downloading) downloading" : ""))
        } else if downloading > 0 {
            lines.append("cache      \(downloading) downloading (no --cache-size)")
        }
        if let conflicts = f["conflicts"] as? Int, conflicts > 0 {
            lines.append("conflicts  \(conflicts) since mount (see user.docfs.conflict on the items, and the log)")
            for line in (f["recentConflicts"] as? [String] ?? []).suffix(5) { lines.append("           \(line)") }
        }
        if let aside = f["setAside"] as? Int, aside > 0 {
            let changes = f["setAsideChanges"] as? Int ?? 0
            lines.append(
                "set aside  \(aside) item(s), \(changes) change(s) waiting: the server refused them (user.docfs.sync says why); a later change of the item, or docfs sync --retry PATH, tries again"
            )
        }
        if let refused = f["refusedIncoming"] as? Int, refused > 0 {
            lines.append(
                "bad rows   \(refused) item(s) from the server not applied here: their rows break a rule no replica breaks (the log names each)")
        }
        if let restore = f["restore"] as? String {
            lines.append("restore    \(restore)")
        }
        if let failed = f["failedItems"] as? Int, failed > 0 {
            lines.append("refused    \(failed) change(s) the server refused (see user.docfs.sync on the items, and the log)")
        }
        if let error = f["lastError"] as? String {
            lines.append("last error \(error)" + ((f["lastErrorAt"] as? String).map { " (at \($0))" } ?? ""))
        } else {
            lines.append("last error none")
        }
        return lines
    }

    static func bytesText(_ n: Int64) -> String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024, unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(n) bytes" : String(format: "%.1f %@", value, units[unit])
    }
}
