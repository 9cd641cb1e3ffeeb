/// What a user may do with an item (NSFileProviderItemCapabilities).
public struct Capabilities: OptionSet, Hashable, Sendable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let allowsReading = Capabilities(rawValue: 1 << 0)
    public static let allowsWriting = Capabilities(rawValue: 1 << 1)
    public static let allowsReparenting = Capabilities(rawValue: 1 << 2)
    public static let allowsRenaming = Capabilities(rawValue: 1 << 3)
    public static let allowsTrashing = Capabilities(rawValue: 1 << 4)
    public static let allowsDeleting = Capabilities(rawValue: 1 << 5)
    public static let allowsAddingSubItems = Capabilities(rawValue: 1 << 6)
    public static let allowsContentEnumerating = Capabilities(rawValue: 1 << 7)
    public static let allowsEvicting = Capabilities(rawValue: 1 << 8)
    public static let allowsExcludingFromSync = Capabilities(rawValue: 1 << 9)

    public static let all: Capabilities = [
        .allowsReading, .allowsWriting, .allowsReparenting, .allowsRenaming, .allowsTrashing,
        .allowsDeleting, .allowsAddingSubItems, .allowsContentEnumerating, .allowsEvicting,
        .allowsExcludingFromSync,
    ]

    /// The words used in layout files and `docfs info`, in display order.
    public static let words: [(word: String, capability: Capabilities)] = [
        ("read", .allowsReading), ("write", .allowsWriting), ("add", .allowsAddingSubItems),
        ("rename", .allowsRenaming), ("reparent", .allowsReparenting), ("delete", .allowsDeleting),
        ("trash", .allowsTrashing), ("enumerate", .allowsContentEnumerating),
        ("evict", .allowsEvicting), ("exclude-from-sync", .allowsExcludingFromSync),
    ]

    /// Parses layout words (`read`, `write`, `add`, …, or `all`). Unknown words are an error.
    public init(words list: [String]) throws(ProviderError) {
        var result: Capabilities = []
        for raw in list {
            let word = raw.lowercased()
            if word == "all" { result.formUnion(.all); continue }
            guard let match = Capabilities.words.first(where: { $0.word == word }) else {
                throw ProviderError(
                    .invalidArgument,
                    "unknown capability word '\(raw)' (expected one of: all, \(Capabilities.words.map(\.word).joined(separator: ", ")))")
            }
            result.formUnion(match.capability)
        }
        self = result
    }

    /// The capabilities as words, e.g. "read, enumerate, add".
    public var wordList: [String] {
        Capabilities.words.filter { contains($0.capability) }.map(\.word)
    }
}
