import Foundation

/// The document types a provider validates with, chosen per item by content type.
public struct DocumentTypes: Sendable {
    public let types: [any FileDocument.Type]

    /// Plain text, JSON and packages.
    public static let builtIn = DocumentTypes(types: [JSONDocument.self, PlainTextDocument.self, PackageDocument.self])

    public init(types: [any FileDocument.Type]) { self.types = types }

    /// The document type that reads `contentType`: the one that names the type itself, else the
    /// one that names its nearest supertype. Nil when none reads it (such items are stored as bytes).
    public func documentType(for contentType: ContentType, in registry: ContentTypeRegistry) -> (any FileDocument.Type)? {
        for candidate in [contentType] + registry.supertypes(of: contentType) {
            if let match = types.first(where: { $0.readableContentTypes.contains(candidate) }) { return match }
        }
        return nil
    }

    /// Reads `file` as a document of `contentType`; throws the document type's error
    /// (`.corruptFile`) when the contents are not a valid document of that type.
    public func validate(_ file: FileWrapper, as contentType: ContentType, in registry: ContentTypeRegistry) throws(ProviderError) {
        guard let type = documentType(for: contentType, in: registry) else { return }
        _ = try type.init(configuration: FileDocumentReadConfiguration(contentType: contentType, file: file))
    }
}
