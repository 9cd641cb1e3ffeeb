import Foundation
import Glibc

/// Files, bytes and rate on standard error, redrawn at most ten times a second.
struct ImportProgress {
    let enabled: Bool
    var totalFiles = 0, doneFiles = 0
    var totalBytes: Int64 = 0, doneBytes: Int64 = 0
    var current = ""
    let start = Date()
    private var lastDraw = Date.distantPast
    private var shown = false

    init(enabled: Bool) { self.enabled = enabled }

    mutating func file(_ name: String) { current = name }
    mutating func bytes(_ n: Int) { doneBytes += Int64(n); draw(force: false) }
    mutating func fileDone() { doneFiles += 1; draw(force: false) }
    mutating func skip(_ source: ImportSource) { totalFiles -= source.fileCount; totalBytes -= source.bytes }

    static func size(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n), i = 0
        while v >= 1024, i < units.count - 1 { v /= 1024; i += 1 }
        return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
    }

    var rate: String {
        let t = Date().timeIntervalSince(start)
        return t > 0 ? Self.size(Int64(Double(doneBytes) / t)) + "/s" : "-"
    }

    mutating func draw(force: Bool) {
        guard enabled else { return }
        let now = Date()
        guard force || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        let line = "\r\u{1B}[K[\(doneFiles)/\(totalFiles) files] \(Self.size(doneBytes)) of \(Self.size(totalBytes)), \(rate)  \(current.prefix(40))"
        FileHandle.standardError.write(Data(line.utf8))
        shown = true
    }

    mutating func clear() {
        guard enabled, shown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        shown = false
    }

    func summary(imported: Int, refused: Int) -> String {
        let t = Date().timeIntervalSince(start)
        return
            "docfs: \(imported) imported, \(refused) refused; \(doneFiles) files, \(Self.size(doneBytes)) in \(String(format: "%.1f", t)) s (\(rate))"
    }
}
