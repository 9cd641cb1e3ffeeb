import Foundation

/// `--json` output: Foundation's JSONEncoder with sorted keys, so field order never changes.
/// Absent values are written as null (never left out), so a script can rely on every key.
/// The fields are listed in docs/USING.md, "Output for scripts".
enum JSONOutput {
    /// One object on one line (JSON Lines when printed once per result).
    static func line<T: Encodable>(_ value: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(value) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    static func print<T: Encodable>(_ value: T) {
        FileHandle.standardOutput.write(Data((line(value) + "\n").utf8))
    }
}
