import Foundation

// The built-in document types.

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
            throw ProviderError(
                .corruptFile, "contents are not valid UTF-8 text (first bad byte at offset \(offset)); \(configuration.contentType) must be UTF-8")
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
