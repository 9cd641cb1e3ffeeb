import Foundation
import DocFSProvider

// The actions of the provider's opt-in sides (found by a cast in `Bridge.init`), or, for a
// provider without one, the refusal a filesystem without the feature gives: the same errno and
// reason, logged with the path as any provider refusal is.
extension Bridge {
    /// `TrashProvider.trashItem`, or EROFS.
    func trashItem(_ identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        guard let trash else { throw Self.readOnly("trash items") }
        return try await trash.trashItem(withIdentifier: identifier)
    }

    /// `TrashProvider.untrashItem`, or EROFS.
    func untrashItem(_ identifier: ItemIdentifier, to parent: ItemIdentifier, newName: String) async throws(ProviderError) -> Item {
        guard let trash else { throw Self.readOnly("restore items") }
        return try await trash.untrashItem(withIdentifier: identifier, toParentItemIdentifier: parent, newName: newName)
    }

    /// Where a trashed item came from; nil without a `TrashProvider`.
    func trashOrigin(of identifier: ItemIdentifier) -> TrashOrigin? {
        trash?.trashOrigin(of: identifier)
    }

    /// `AppleMetadataProvider.setTagData`, or EOPNOTSUPP.
    func setTagData(_ tagData: Data?, of identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        guard let appleMetadata else { throw ProviderError(.unsupported, "this provider does not keep tags") }
        return try await appleMetadata.setTagData(tagData, forItemIdentifier: identifier)
    }

    /// `AppleMetadataProvider.setFavoriteRank`, or EOPNOTSUPP.
    func setFavoriteRank(_ rank: Int64?, of identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        guard let appleMetadata else { throw ProviderError(.unsupported, "this provider does not keep favourite ranks") }
        return try await appleMetadata.setFavoriteRank(rank, forItemIdentifier: identifier)
    }

    /// The item's stored `user.*` attribute names; none without an `ExtendedAttributeProvider`.
    func storedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] {
        try storedAttributes?.extendedAttributeNames(of: identifier) ?? []
    }

    /// One stored `user.*` attribute; without an `ExtendedAttributeProvider` none is set (ENODATA).
    func storedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        guard let storedAttributes else { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
        return try storedAttributes.extendedAttribute(named: name, of: identifier)
    }

    /// `ExtendedAttributeProvider.setExtendedAttribute`, or EOPNOTSUPP.
    func setStoredAttribute(
        named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
        of identifier: ItemIdentifier
    ) async throws(ProviderError) {
        guard let storedAttributes else { throw ProviderError(.unsupported, "this provider does not store extended attributes") }
        try await storedAttributes.setExtendedAttribute(named: name, to: value, mode: mode, forItemIdentifier: identifier)
    }

    /// `SpecialItemProvider.createSpecialItem`, or EPERM.
    func createSpecialItem(
        named name: String, kind: ItemKind, in parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        guard let specialItems else { throw ProviderError(.notPermitted, "this provider does not keep FIFOs or sockets") }
        return try await specialItems.createSpecialItem(withName: name, kind: kind, inParentItemIdentifier: parent, attributes: attributes)
    }

    private static func readOnly(_ what: String) -> ProviderError {
        ProviderError(.readOnly, "this provider does not \(what)")
    }
}
