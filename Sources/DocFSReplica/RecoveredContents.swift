import Foundation

extension ReplicaStore {
    /// Items about to be removed because the server no longer has them although this replica
    /// sent them (its database was restored to an earlier point): their contents here are kept
    /// under `STORE/recovered/<folder>/PATH` (hard links, no copy), so that no file a close()
    /// accepted is lost. Returns the paths kept, by row.
    func keepRecovered(rows: [Int64], folder: String) -> [Int64: String] {
        var kept: [Int64: String] = [:]
        let base = url.path + "/recovered/" + folder
        for row in rows {
            guard let source = contentURL(ofRow: row)?.path, FileManager.default.fileExists(atPath: source) else { continue }
            var path = self.path(ofRow: row)
            if path.hasSuffix("?") || path.isEmpty { path = "/item-\(row)" }
            // Every part a name a folder can hold: a name a store took before replicas checked
            // what arrives (`..`, a 4 KiB one) must not lead outside recovered/.
            path = path.split(separator: "/", omittingEmptySubsequences: true).map { part in
                part == "." || part == ".." || part.utf8.count > 255 || part.utf8.contains(0) ? "item-\(row)" : String(part)
            }.reduce("") { $0 + "/" + $1 }
            if path.isEmpty { path = "/item-\(row)" }
            let target = base + path
            try? FileManager.default.createDirectory(
                atPath: (target as NSString).deletingLastPathComponent,
                withIntermediateDirectories: true)
            if link(source, target) == 0 || (try? FileManager.default.copyItem(atPath: source, toPath: target)) != nil {
                kept[row] = target
            }
        }
        return kept
    }
}
