import Foundation

/// Reads /proc/self/mounts. Never stats a mountpoint, which may belong to a hung daemon.
enum MountTable {
    struct Entry {
        var source: String
        var mountpoint: String
        var type: String
    }

    static func entries() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ", omittingEmptySubsequences: false)
            guard f.count >= 3 else { return nil }
            return Entry(source: unescape(f[0]), mountpoint: unescape(f[1]), type: String(f[2]))
        }
    }

    /// The store behind the docfs mount that holds `path` (the kernel shows it as docfs:STORE).
    static func store(holding path: String) -> String? {
        let p = canonical(path)
        let mounts = entries().filter {
            $0.type == "fuse.docfs" && (p == $0.mountpoint || p.hasPrefix($0.mountpoint == "/" ? "/" : $0.mountpoint + "/"))
        }
        guard let entry = mounts.max(by: { $0.mountpoint.count < $1.mountpoint.count }), entry.source.hasPrefix("docfs:") else { return nil }
        return String(entry.source.dropFirst("docfs:".count))
    }

    static func entry(at mountpoint: String) -> Entry? {
        entries().last { $0.mountpoint == mountpoint }
    }

    /// The kernel writes space, tab, newline and backslash as octal escapes.
    static func unescape(_ s: Substring) -> String {
        guard s.contains("\\") else { return String(s) }
        var bytes: [UInt8] = []
        var i = s.utf8.startIndex
        let u = s.utf8
        while i < u.endIndex {
            if u[i] == UInt8(ascii: "\\"), let end = u.index(i, offsetBy: 4, limitedBy: u.endIndex),
                let v = UInt8(String(decoding: u[u.index(after: i)..<end], as: UTF8.self), radix: 8)
            {
                bytes.append(v)
                i = end
            } else {
                bytes.append(u[i])
                i = u.index(after: i)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// An absolute path with symlinks resolved, as the kernel shows it in the mount table.
    static func canonical(_ path: String) -> String {
        guard let r = realpath(path, nil) else { return URL(fileURLWithPath: path).standardizedFileURL.path }
        defer { free(r) }
        return String(cString: r)
    }
}
