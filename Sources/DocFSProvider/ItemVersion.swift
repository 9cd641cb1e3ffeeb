/// Versions that change when an item's contents or metadata change (NSFileProviderItemVersion).
public struct ItemVersion: Hashable, Sendable {
    public var contentVersion: UInt64
    public var metadataVersion: UInt64
    public init(contentVersion: UInt64 = 1, metadataVersion: UInt64 = 1) {
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
    }
}
