import Foundation

/// What a document type is handed to read itself (SwiftUI's `FileDocumentReadConfiguration`).
public struct FileDocumentReadConfiguration: Sendable {
    /// The item's content type.
    public let contentType: ContentType
    /// The file (or package directory) to read.
    public let file: FileWrapper
    public init(contentType: ContentType, file: FileWrapper) {
        self.contentType = contentType
        self.file = file
    }
}

/// What a document type is handed to write itself (SwiftUI's `FileDocumentWriteConfiguration`).
public struct FileDocumentWriteConfiguration: Sendable {
    public let contentType: ContentType
    /// The file as it is stored now, if there is one.
    public let existingFile: FileWrapper?
    public init(contentType: ContentType, existingFile: FileWrapper? = nil) {
        self.contentType = contentType
        self.existingFile = existingFile
    }
}

/// A document type, the Linux twin of SwiftUI's `FileDocument`: it declares the content types it
/// reads and writes, reads itself from a file wrapper and writes itself to one.
///
/// `init(configuration:)` must fail loudly on contents it cannot read — throw `.corruptFile`
/// (the seeds' `fileReadCorruptFile`), never produce a half-loaded document. Both methods run on a
/// background thread (the provider executor), never on a FUSE request thread.
public protocol FileDocument: Sendable {
    typealias ReadConfiguration = FileDocumentReadConfiguration
    typealias WriteConfiguration = FileDocumentWriteConfiguration

    /// The types this document opens; conformance counts (plain text opens `public.log`).
    static var readableContentTypes: [ContentType] { get }
    /// The types it saves as; the readable ones unless it says otherwise.
    static var writableContentTypes: [ContentType] { get }

    init(configuration: ReadConfiguration) throws(ProviderError)
    func fileWrapper(configuration: WriteConfiguration) throws(ProviderError) -> FileWrapper
}

extension FileDocument {
    public static var writableContentTypes: [ContentType] { readableContentTypes }
}

// MARK: - Built-in document types

/// Plain text: the bytes must be valid UTF-8.
public struct PlainTextDocument: FileDocument {
    public static var readableContentTypes: [ContentType] { [.plainText] }
    public var text: String

    public init(text: String = "") { self.text = text }

    public init(configuration: ReadConfiguration) throws(ProviderError) {
        guard let data = configuration.file.regularFileContents else {
            throw ProviderError(.corruptFile, "a \(configuration.contentType) document must be a readable regular file")
        }
        guard let text = String(validating: data, as: UTF8.self) else {
            let offset = Self.firstInvalidUTF8Offset(data) ?? 0
            throw ProviderError(.corruptFile, "contents are not valid UTF-8 text (first bad byte at offset \(offset)); \(configuration.contentType) must be UTF-8")
        }
        self.text = text
    }

    public func fileWrapper(configuration: WriteConfiguration) throws(ProviderError) -> FileWrapper {
        FileWrapper(regularFileWithContents: Data(text.utf8))
    }

    /// Where the UTF-8 decoding first fails, for the log line.
    static func firstInvalidUTF8Offset(_ data: Data) -> Int? {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = data.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded): offset += encoded.count
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }
}

/// JSON: the bytes must parse (any JSON value, fragments included).
public struct JSONDocument: FileDocument {
    public static var readableContentTypes: [ContentType] { [.json] }
    public var data: Data

    public init(data: Data = Data("{}".utf8)) { self.data = data }

    public init(configuration: ReadConfiguration) throws(ProviderError) {
        guard let data = configuration.file.regularFileContents else {
            throw ProviderError(.corruptFile, "a JSON document must be a readable regular file")
        }
        do {
            _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw ProviderError(.corruptFile, "contents are not valid JSON (\(Self.describe(error)))")
        }
        self.data = data
    }

    public func fileWrapper(configuration: WriteConfiguration) throws(ProviderError) -> FileWrapper {
        FileWrapper(regularFileWithContents: data)
    }

    private static func describe(_ error: Error) -> String {
        let ns = error as NSError
        if let detail = ns.userInfo["NSDebugDescription"] as? String { return detail }
        return ns.localizedDescription
    }
}

/// A package: a directory that is one document (`com.apple.package`). Its size is the sum of
/// everything inside it.
public struct PackageDocument: FileDocument {
    public static var readableContentTypes: [ContentType] { [.package] }
    public var root: FileWrapper

    public init(configuration: ReadConfiguration) throws(ProviderError) {
        guard configuration.file.isDirectory else {
            throw ProviderError(.corruptFile, "a \(configuration.contentType) package must be a folder")
        }
        root = configuration.file
    }

    /// The package's documentSize: the bytes of everything inside it.
    public var documentSize: Int64 { root.totalSize }

    public func fileWrapper(configuration: WriteConfiguration) throws(ProviderError) -> FileWrapper { root }
}

// MARK: - Choosing a document type

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
