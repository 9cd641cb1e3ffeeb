import Foundation
import Glibc
import Synchronization

/// One line of progress on standard error, redrawn in place at most ten times a second, as
/// `docfs import` shows its own (ImportProgress): only when standard error is a terminal, so a
/// pipe or a log file gets nothing extra. Safe to call from any thread.
final class ProgressLine: @unchecked Sendable {
    let enabled: Bool
    private let start = Date()
    private let lock = Mutex<Void>(())
    private var lastDraw = Date.distantPast
    private var shown = false

    init(enabled: Bool = isatty(2) != 0) { self.enabled = enabled }

    /// Draws `text` (with the seconds since the start) unless one was drawn under 0.1 s ago.
    func update(_ text: @autoclosure () -> String, force: Bool = false) {
        guard enabled else { return }
        lock.withLock { _ in
            let now = Date()
            guard force || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
            lastDraw = now
            let line = "\r\u{1B}[K\(text()), \(String(format: "%.1f", now.timeIntervalSince(start))) s"
            FileHandle.standardError.write(Data(line.utf8))
            shown = true
        }
    }

    /// Bytes per second since the start, for a line that moves bytes.
    func rate(_ bytes: Int64) -> String {
        let t = Date().timeIntervalSince(start)
        return t > 0 ? ImportProgress.size(Int64(Double(bytes) / t)) + "/s" : "-"
    }

    /// Erases the line, before the command's own output.
    func clear() {
        guard enabled else { return }
        lock.withLock { _ in
            guard shown else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
            shown = false
        }
    }
}
