/// A provider's persistent name for an item, as in NSFileProviderItemIdentifier.
/// The root and trash containers have fixed identifiers; everything else is the provider's choice.
public struct ItemIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let rootContainer = ItemIdentifier("NSFileProviderRootContainerItemIdentifier")
    public static let trashContainer = ItemIdentifier("NSFileProviderTrashContainerItemIdentifier")

    public var description: String { rawValue }
}
