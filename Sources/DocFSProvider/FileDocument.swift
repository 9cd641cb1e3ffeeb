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
