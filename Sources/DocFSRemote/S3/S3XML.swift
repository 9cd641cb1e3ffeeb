import Foundation

/// Just enough XML for S3's answers (flat elements, no attributes that matter, no CDATA):
/// the texts of the elements with a name, inside a given parent element, entity-unescaped.
/// moto and AWS send keys in list answers XML-escaped (`&amp;`), so every text goes through
/// `unescape`.
enum S3XML {
    /// The inner texts (raw) of every `<name>…</name>` in `xml`, in order. `<name/>` gives "".
    static func elements(_ name: String, in xml: Substring) -> [Substring] {
        var result: [Substring] = []
        let open = "<\(name)>", empty = "<\(name)/>", close = "</\(name)>"
        var rest = xml[...]
        while let start = rest.range(of: open) ?? nil {
            if let e = rest.range(of: empty), e.lowerBound < start.lowerBound {
                result.append(""); rest = rest[e.upperBound...]; continue
            }
            guard let end = rest[start.upperBound...].range(of: close) else { break }
            result.append(rest[start.upperBound..<end.lowerBound])
            rest = rest[end.upperBound...]
        }
        return result
    }

    static func elements(_ name: String, in xml: String) -> [Substring] { elements(name, in: xml[...]) }

    static func text(_ name: String, in xml: Substring) -> String? { elements(name, in: xml).first.map { unescape($0) } }
    static func text(_ name: String, in xml: String) -> String? { text(name, in: xml[...]) }

    /// An ISO 8601 time as S3 writes it (`2026-11-24T01:02:03.000Z`, fractions optional).
    static func date(_ text: String) -> Date? {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return withFraction.date(from: text) ?? ISO8601DateFormatter().date(from: text)
    }

    static func unescape(_ s: Substring) -> String {
        guard s.contains("&") else { return String(s) }
        var out = ""
        var i = s.startIndex
        while i < s.endIndex {
            let ch = s[i]
            if ch == "&", let semi = s[i...].firstIndex(of: ";"), s.distance(from: i, to: semi) <= 10 {
                let entity = s[s.index(after: i)..<semi]
                var replacement: String?
                switch entity {
                case "amp": replacement = "&"
                case "lt": replacement = "<"
                case "gt": replacement = ">"
                case "quot": replacement = "\""
                case "apos": replacement = "'"
                default:
                    if entity.hasPrefix("#x") || entity.hasPrefix("#X"), let v = UInt32(entity.dropFirst(2), radix: 16),
                        let u = Unicode.Scalar(v)
                    {
                        replacement = String(Character(u))
                    } else if entity.hasPrefix("#"), let v = UInt32(entity.dropFirst(1)), let u = Unicode.Scalar(v) {
                        replacement = String(Character(u))
                    }
                }
                if let replacement { out += replacement; i = s.index(after: semi); continue }
            }
            out.append(ch)
            i = s.index(after: i)
        }
        return out
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for ch in s {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(ch)
            }
        }
        return out
    }
}
