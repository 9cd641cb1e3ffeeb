import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// The freedesktop.org shared MIME-info database (`/usr/share/mime`, Debian's `shared-mime-info`),
/// read once: `globs2` (names), `magic` (bytes), `subclasses` and `aliases` (the MIME hierarchy).
///
/// Matching follows the shared-mime-info specification: among glob matches only the highest
/// weight counts, and among those the longest pattern; case-sensitive globs (`cs`) match the name
/// as it is, the others its lowercased form. A magic section matches when one of its top-level
/// rules matches and, if that rule has nested rules, one of them matches too; sections are tried
/// in priority order.
package final class SharedMimeDatabase: Sendable {
    /// The system database, from `$XDG_DATA_HOME` and `$XDG_DATA_DIRS` (default
    /// `/usr/local/share:/usr/share`), loaded on first use and shared by every caller.
    package static let system = SharedMimeDatabase(directories: defaultDirectories())

    struct Glob: Sendable {
        var weight: Int
        var mimeType: String
        var pattern: String
        var caseSensitive: Bool
        /// Position in the file: earlier lines win ties.
        var order: Int
    }

    struct MagicRule: Sendable {
        var offset: Int
        var value: [UInt8]
        var mask: [UInt8]?
        var range: Int
        var children: [MagicRule]
    }

    struct MagicSection: Sendable {
        var priority: Int
        var mimeType: String
        var rules: [MagicRule]
        /// When every top-level rule tests one fixed offset without a mask: the (offset, first
        /// byte) pairs, one of which the data must have for the section to match. Checked before
        /// the rules, it rules most sections out at a glance.
        var gate: [(offset: Int, byte: UInt8)]?

        init(priority: Int, mimeType: String, rules: [MagicRule]) {
            self.priority = priority
            self.mimeType = mimeType
            self.rules = rules
            gate = nil
        }

        mutating func computeGate() {
            guard !rules.isEmpty, rules.allSatisfy({ $0.range == 1 && $0.mask == nil && !$0.value.isEmpty }) else { gate = nil; return }
            gate = rules.map { ($0.offset, $0.value[0]) }
        }

        func passesGate(_ data: UnsafeRawBufferPointer) -> Bool {
            guard let gate else { return true }
            for entry in gate where entry.offset < data.count && data[entry.offset] == entry.byte { return true }
            return false
        }
    }

    /// The directories that held a database (`…/mime`).
    package let sources: [String]
    private let literalGlobs: [String: [Glob]]
    private let suffixGlobs: [String: [Glob]]
    private let suffixLengths: [Int]
    private let otherGlobs: [Glob]
    private let sections: [MagicSection]
    private let sectionsByType: [String: [Int]]
    private let parentsByType: [String: [String]]
    private let aliases: [String: String]
    /// How many leading bytes the magic rules can look at.
    package let magicExtent: Int

    /// True when no database was found: names and bytes then say nothing.
    package var isEmpty: Bool { sources.isEmpty }

    package static func defaultDirectories() -> [String] {
        let env = ProcessInfo.processInfo.environment
        var dirs: [String] = []
        if let home = env["XDG_DATA_HOME"], !home.isEmpty {
            dirs.append(home)
        } else if let home = env["HOME"], !home.isEmpty {
            dirs.append(home + "/.local/share")
        }
        let system = env["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        dirs += system.split(separator: ":").map(String.init)
        return dirs.map { $0 + "/mime" }
    }

    /// Reads the databases in `directories` (each a `…/mime` folder); earlier ones take precedence
    /// for magic and aliases, as the specification says.
    package init(directories: [String]) {
        var globs: [Glob] = []
        var sections: [MagicSection] = []
        var parents: [String: [String]] = [:]
        var aliases: [String: String] = [:]
        var sources: [String] = []
        var order = 0
        for dir in directories {
            var found = false
            if let text = Self.readText(dir + "/globs2") {
                found = true
                for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                    let fields = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
                    guard fields.count >= 3, let weight = Int(fields[0]) else { continue }
                    let flags = fields.count > 3 ? fields[3].split(separator: ",") : []
                    globs.append(
                        Glob(
                            weight: weight, mimeType: String(fields[1]), pattern: String(fields[2]),
                            caseSensitive: flags.contains("cs"), order: order))
                    order += 1
                }
            }
            if let data = FileManager.default.contents(atPath: dir + "/magic") {
                found = true
                sections += Self.parseMagic([UInt8](data))
            }
            if let text = Self.readText(dir + "/subclasses") {
                for line in text.split(separator: "\n") {
                    let fields = line.split(separator: " ")
                    guard fields.count == 2 else { continue }
                    let child = String(fields[0])
                    if !(parents[child]?.contains(String(fields[1])) ?? false) { parents[child, default: []].append(String(fields[1])) }
                }
            }
            if let text = Self.readText(dir + "/aliases") {
                for line in text.split(separator: "\n") {
                    let fields = line.split(separator: " ")
                    guard fields.count == 2, aliases[String(fields[0])] == nil else { continue }
                    aliases[String(fields[0])] = String(fields[1])
                }
            }
            if found { sources.append(dir) }
        }
        // Stable by priority, highest first (the file is already sorted; several files are merged).
        sections = sections.enumerated().sorted { a, b in
            a.element.priority != b.element.priority ? a.element.priority > b.element.priority : a.offset < b.offset
        }.map(\.element)

        var literal: [String: [Glob]] = [:]
        var suffix: [String: [Glob]] = [:]
        var other: [Glob] = []
        let wild: Set<Character> = ["*", "?", "["]
        for glob in globs {
            if !glob.pattern.contains(where: { wild.contains($0) }) {
                literal[glob.caseSensitive ? glob.pattern : glob.pattern.lowercased(), default: []].append(glob)
            } else if glob.pattern.hasPrefix("*"), !glob.pattern.dropFirst().contains(where: { wild.contains($0) }) {
                let tail = String(glob.pattern.dropFirst())
                suffix[glob.caseSensitive ? tail : tail.lowercased(), default: []].append(glob)
            } else {
                other.append(glob)
            }
        }
        var byType: [String: [Int]] = [:]
        for (index, section) in sections.enumerated() { byType[section.mimeType, default: []].append(index) }
        var extent = 0
        func walk(_ rules: [MagicRule]) {
            for rule in rules {
                extent = max(extent, rule.offset + rule.range - 1 + rule.value.count)
                walk(rule.children)
            }
        }
        for section in sections { walk(section.rules) }

        self.sources = sources
        self.literalGlobs = literal
        self.suffixGlobs = suffix
        self.suffixLengths = Set(suffix.keys.map { $0.utf8.count }).sorted()
        self.otherGlobs = other
        self.sections = sections
        self.sectionsByType = byType
        self.parentsByType = parents
        self.aliases = aliases
        self.magicExtent = extent
    }

    private static func readText(_ path: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: - Names

    /// The MIME types the name's best glob matches give (highest weight, then longest pattern),
    /// in database order; empty when no glob matches.
    package func mimeTypes(forFilename name: String) -> [String] {
        guard !name.isEmpty else { return [] }
        let lower = name.lowercased()
        var best: [Glob] = []
        var bestWeight = Int.min
        var bestLength = Int.min
        func consider(_ glob: Glob) {
            let length = glob.pattern.utf8.count
            if glob.weight > bestWeight || (glob.weight == bestWeight && length > bestLength) {
                best = [glob]
                bestWeight = glob.weight
                bestLength = length
            } else if glob.weight == bestWeight && length == bestLength {
                best.append(glob)
            }
        }
        // Every import runs this: no temporary collections (they were most of its cost).
        let sameCase = lower == name
        for glob in literalGlobs[name] ?? [] where (glob.caseSensitive ? name : lower) == name { consider(glob) }
        if !sameCase {
            for glob in literalGlobs[lower] ?? [] where (glob.caseSensitive ? name : lower) == lower { consider(glob) }
        }
        let nameBytes = Array(name.utf8)
        let lowerBytes = sameCase ? nameBytes : Array(lower.utf8)
        for length in suffixLengths {
            if length > nameBytes.count { break }
            let tail = String(decoding: nameBytes[(nameBytes.count - length)...], as: UTF8.self)
            for glob in suffixGlobs[tail] ?? [] where glob.caseSensitive { consider(glob) }
            // Lowercasing can change the byte count (rarely, outside ASCII): never cut past the start.
            let lowerTail = sameCase ? tail : String(decoding: lowerBytes[(lowerBytes.count - min(length, lowerBytes.count))...], as: UTF8.self)
            for glob in suffixGlobs[lowerTail] ?? [] where !glob.caseSensitive { consider(glob) }
        }
        for glob in otherGlobs where fnmatch(glob.pattern, glob.caseSensitive ? name : lower, 0) == 0 { consider(glob) }
        var seen = Set<String>()
        return best.sorted { $0.order < $1.order }.map(\.mimeType).filter { seen.insert($0).inserted }
    }

    // MARK: - Bytes

    /// The highest-priority magic match for `data`, if any section at or above `minimumPriority` matches.
    package func sniff(_ data: UnsafeRawBufferPointer, minimumPriority: Int = 0) -> (mimeType: String, priority: Int)? {
        guard !data.isEmpty else { return nil }
        for section in sections {
            if section.priority < minimumPriority { break }
            if section.passesGate(data), Self.matches(section.rules, data) { return (section.mimeType, section.priority) }
        }
        return nil
    }

    /// Whether the type has magic rules of its own.
    package func hasMagic(_ mimeType: String) -> Bool { sectionsByType[canonical(mimeType)] != nil }

    /// Whether `data` matches the magic of `mimeType`; nil when the type has no magic.
    package func magicMatches(_ mimeType: String, _ data: UnsafeRawBufferPointer) -> Bool? {
        let type = canonical(mimeType)
        guard let indices = sectionsByType[type] else { return nil }
        for index in indices where sections[index].passesGate(data) && Self.matches(sections[index].rules, data) { return true }
        return false
    }

    static func matches(_ rules: [MagicRule], _ data: UnsafeRawBufferPointer) -> Bool {
        for rule in rules where test(rule, data) {
            if rule.children.isEmpty || matches(rule.children, data) { return true }
        }
        return false
    }

    private static func test(_ rule: MagicRule, _ data: UnsafeRawBufferPointer) -> Bool {
        let length = rule.value.count
        guard length > 0, rule.offset + length <= data.count, let base = data.baseAddress else { return false }
        let lastStart = min(rule.offset + rule.range - 1, data.count - length)
        guard lastStart >= rule.offset else { return false }
        return rule.value.withUnsafeBytes { value -> Bool in
            if let mask = rule.mask {
                for start in rule.offset...lastStart {
                    var ok = true
                    for k in 0..<length where (data[start + k] & mask[k]) != (value[k] & mask[k]) { ok = false; break }
                    if ok { return true }
                }
                return false
            }
            let first = value[0]
            var start = rule.offset
            while start <= lastStart {
                // Find the first byte, then compare the rest.
                guard let hit = memchr(base + start, Int32(first), lastStart - start + 1) else { return false }
                let at = base.distance(to: UnsafeRawPointer(hit))
                if memcmp(base + at, value.baseAddress!, length) == 0 { return true }
                start = at + 1
            }
            return false
        }
    }

    /// Parses the binary `magic` file: `[priority:type]` sections of
    /// `[indent]>offset=<u16 length><value>[&mask][~word-size][+range]\n` rules.
    static func parseMagic(_ bytes: [UInt8]) -> [MagicSection] {
        let header = Array("MIME-Magic\0\n".utf8)
        guard bytes.count >= header.count, Array(bytes[0..<header.count]) == header else { return [] }
        var sections: [MagicSection] = []
        var i = header.count
        var current: MagicSection?
        // Rules of the current section, flat with their indents; nested at the end of the section.
        var flat: [(indent: Int, rule: MagicRule)] = []

        func finish() {
            guard var section = current else { return }
            section.rules = nest(flat[...], indent: 0)
            section.computeGate()
            if !section.rules.isEmpty { sections.append(section) }
            current = nil
            flat = []
        }
        func number() -> Int? {
            var n = 0
            var any = false
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
                n = n * 10 + Int(bytes[i] - 0x30)
                i += 1
                any = true
            }
            return any ? n : nil
        }
        func skipLine() {
            while i < bytes.count, bytes[i] != 0x0A { i += 1 }
            i += 1
        }

        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "[") {
                finish()
                i += 1
                let priority = number() ?? 50
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { skipLine(); continue }
                i += 1
                var name: [UInt8] = []
                while i < bytes.count, bytes[i] != UInt8(ascii: "]"), bytes[i] != 0x0A { name.append(bytes[i]); i += 1 }
                skipLine()
                current = MagicSection(priority: priority, mimeType: String(decoding: name, as: UTF8.self), rules: [])
                continue
            }
            // A rule line.
            let indent = number() ?? 0
            guard i < bytes.count, bytes[i] == UInt8(ascii: ">"), let _ = current else { skipLine(); continue }
            i += 1
            guard let offset = number(), i + 2 < bytes.count, bytes[i] == UInt8(ascii: "=") else { skipLine(); continue }
            i += 1
            let length = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            i += 2
            guard i + length <= bytes.count else { break }
            var value = Array(bytes[i..<(i + length)])
            i += length
            var mask: [UInt8]?
            var wordSize = 1
            var range = 1
            var bad = false
            while i < bytes.count, bytes[i] != 0x0A {
                switch bytes[i] {
                case UInt8(ascii: "&"):
                    i += 1
                    guard i + length <= bytes.count else { bad = true; break }
                    mask = Array(bytes[i..<(i + length)])
                    i += length
                case UInt8(ascii: "~"):
                    i += 1
                    wordSize = number() ?? 1
                case UInt8(ascii: "+"):
                    i += 1
                    range = max(number() ?? 1, 1)
                default:
                    // An extension this parser does not know: the specification says to ignore the rule.
                    bad = true
                }
                if bad { break }
            }
            skipLine()
            if bad { continue }
            // Values of 2- and 4-byte words are stored big-endian; files hold them in host order.
            if (wordSize == 2 || wordSize == 4), UInt16(1).littleEndian == 1, length % wordSize == 0 {
                value = swapWords(value, wordSize)
                mask = mask.map { swapWords($0, wordSize) }
            }
            flat.append((indent, MagicRule(offset: offset, value: value, mask: mask, range: range, children: [])))
        }
        finish()
        return sections
    }

    private static func swapWords(_ bytes: [UInt8], _ size: Int) -> [UInt8] {
        var out = bytes
        var start = 0
        while start + size <= bytes.count {
            for k in 0..<size { out[start + k] = bytes[start + size - 1 - k] }
            start += size
        }
        return out
    }

    private static func nest(_ flat: ArraySlice<(indent: Int, rule: MagicRule)>, indent: Int) -> [MagicRule] {
        var result: [MagicRule] = []
        var index = flat.startIndex
        while index < flat.endIndex {
            let entry = flat[index]
            guard entry.indent == indent else { index += 1; continue }
            var end = index + 1
            while end < flat.endIndex, flat[end].indent > indent { end += 1 }
            var rule = entry.rule
            rule.children = nest(flat[(index + 1)..<end], indent: indent + 1)
            result.append(rule)
            index = end
        }
        return result
    }

    // MARK: - The hierarchy

    /// The canonical name of a MIME type (aliases resolved), lowercased, parameters dropped.
    package func canonical(_ mimeType: String) -> String {
        // Fast path: already lowercase, no parameters, no blanks (what the database holds).
        if !mimeType.utf8.contains(where: { $0 == UInt8(ascii: ";") || $0 == UInt8(ascii: " ") || $0 == 9 || ($0 >= 65 && $0 <= 90) }) {
            return aliases[mimeType] ?? mimeType
        }
        let base = String(mimeType.split(separator: ";", maxSplits: 1).first ?? Substring(mimeType))
            .trimmingCharacters(in: .whitespaces).lowercased()
        return aliases[base] ?? base
    }

    /// Direct parents, the implicit ones included: every `text/*` is a `text/plain`, and every
    /// type but `inode/*` an `application/octet-stream`.
    package func parents(of mimeType: String) -> [String] {
        let type = canonical(mimeType)
        var result = parentsByType[type] ?? []
        if type.hasPrefix("text/"), type != "text/plain", !result.contains("text/plain") { result.append("text/plain") }
        if !type.hasPrefix("inode/"), type != "application/octet-stream", !result.contains("application/octet-stream") {
            result.append("application/octet-stream")
        }
        return result
    }

    /// Whether `type` is `other` or a subclass of it. With `implicitOctetStream` false, the
    /// catch-all `application/octet-stream` parent is not counted.
    package func isSubclass(_ type: String, of other: String, implicitOctetStream: Bool = true) -> Bool {
        let target = canonical(other)
        if !implicitOctetStream, target == "application/octet-stream" { return canonical(type) == target }
        var queue = [canonical(type)]
        var seen = Set<String>()
        var index = 0
        while index < queue.count {
            let next = queue[index]
            index += 1
            if next == target { return true }
            guard seen.insert(next).inserted else { continue }
            queue += parents(of: next)
        }
        return false
    }

    /// The supertypes of a MIME type, nearest first (breadth first), the implicit ones last.
    package func ancestors(of mimeType: String) -> [String] {
        var queue = parents(of: mimeType)
        var seen = Set<String>([canonical(mimeType)])
        var result: [String] = []
        var index = 0
        while index < queue.count {
            let next = queue[index]
            index += 1
            guard seen.insert(next).inserted else { continue }
            result.append(next)
            queue += parents(of: next)
        }
        return result
    }

    // MARK: - Text or binary

    /// The specification's fallback when no magic matches: data whose first bytes hold no NUL
    /// and no control characters other than whitespace, backspace and escape, and that decode as
    /// UTF-8 (a sequence cut off at the end is allowed), is `text/plain`; anything else is
    /// `application/octet-stream`.
    package static func looksLikeText(_ data: UnsafeRawBufferPointer, limit: Int = 1024) -> Bool {
        let n = min(data.count, limit)
        guard n > 0 else { return false }
        var i = 0
        while i < n {
            let b = data[i]
            if b < 0x20 {
                switch b {
                case 0x09, 0x0A, 0x0C, 0x0D, 0x08, 0x1B: i += 1; continue
                default: return false
                }
            }
            if b == 0x7F { return false }
            if b < 0x80 { i += 1; continue }
            let need: Int
            if b & 0xE0 == 0xC0, b >= 0xC2 {
                need = 1
            } else if b & 0xF0 == 0xE0 {
                need = 2
            } else if b & 0xF8 == 0xF0, b <= 0xF4 {
                need = 3
            } else {
                return false
            }
            for k in 1...need {
                if i + k >= n { return true } // a sequence cut off by the limit or the end
                if data[i + k] & 0xC0 != 0x80 { return false }
            }
            i += need + 1
        }
        return true
    }
}
