/// A filename compared byte for byte, as a Linux filesystem does (Swift's `String ==` would
/// treat canonically equivalent spellings, NFC and NFD `café`, as one name; SQLite's unique
/// index would not). The key providers index a folder's children by.
public struct NameKey: Hashable, Sendable {
    public let name: String
    public init(_ name: String) { self.name = name }

    public static func == (lhs: NameKey, rhs: NameKey) -> Bool {
        lhs.name.utf8.elementsEqual(rhs.name.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var name = name
        name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
