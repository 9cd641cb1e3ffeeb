/// A filename compared byte for byte, as a Linux filesystem does (Swift's `String ==` would
/// treat canonically equivalent spellings as equal; SQLite's unique index would not).
struct NameKey: Hashable {
    let name: String
    init(_ name: String) { self.name = name }

    static func == (lhs: NameKey, rhs: NameKey) -> Bool {
        lhs.name.utf8.elementsEqual(rhs.name.utf8)
    }

    func hash(into hasher: inout Hasher) {
        var name = name
        name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
