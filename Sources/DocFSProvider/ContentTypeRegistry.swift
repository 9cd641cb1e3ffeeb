/// What a content type is: what it conforms to, its filename extensions and MIME types
/// (a UTType declaration).
public struct ContentTypeDeclaration: Sendable, Hashable {
    public var identifier: ContentType
    /// Direct parents in the conformance graph (`public.png` → `public.image`).
    public var conformsTo: [ContentType]
    /// Filename extensions without the dot, lowercased; the first is the preferred one.
    public var extensions: [String]
    /// MIME types, lowercased; the first is the preferred one.
    public var mimeTypes: [String]
    /// Like `DocumentGroup(viewing:)`: items of this type are never writable.
    public var viewOnly: Bool

    public init(
        _ identifier: ContentType, conformsTo: [ContentType] = [], extensions: [String] = [],
        mimeTypes: [String] = [], viewOnly: Bool = false
    ) {
        self.identifier = identifier
        self.conformsTo = conformsTo
        self.extensions = extensions.map { ($0.hasPrefix(".") ? String($0.dropFirst()) : $0).lowercased() }
        self.mimeTypes = mimeTypes.map { $0.lowercased() }
        self.viewOnly = viewOnly
    }
}

/// The content types a provider knows: the built-in UTType-style ones plus the user's own, with
/// conformance worked out once (transitively) so a query is a dictionary lookup.
///
/// Conformance is reflexive and transitive; every type conforms to `public.item`. A type nobody
/// declared conforms to itself and `public.item` only.
public final class ContentTypeRegistry: Sendable {
    /// The built-in types only.
    public static let standard = ContentTypeRegistry(declarations: [])

    public let declarations: [ContentType: ContentTypeDeclaration]
    /// For each declared type, its supertypes (itself excluded), nearest first.
    private let ancestors: [ContentType: [ContentType]]
    private let ancestorSets: [ContentType: Set<ContentType>]
    private let byExtension: [String: ContentType]
    private let byMIMEType: [String: ContentType]
    private let byUserExtension: [String: ContentType]
    /// The identifiers the user declared (layout `types:`).
    public let userTypes: Set<ContentType>

    /// The built-ins plus `userTypes`. A user type may add extensions, MIME types and parents to a
    /// built-in identifier; a user type's extensions and MIME types win over the built-ins'.
    public init(declarations userTypes: [ContentTypeDeclaration]) {
        var all: [ContentType: ContentTypeDeclaration] = [:]
        var extensionOrder: [(String, ContentType)] = []
        var mimeOrder: [(String, ContentType)] = []
        for declaration in Self.builtIns {
            all[declaration.identifier] = declaration
            for ext in declaration.extensions { extensionOrder.append((ext, declaration.identifier)) }
            for mime in declaration.mimeTypes { mimeOrder.append((mime, declaration.identifier)) }
        }
        for declaration in userTypes {
            if var existing = all[declaration.identifier] {
                existing.conformsTo += declaration.conformsTo.filter { !existing.conformsTo.contains($0) }
                existing.extensions = declaration.extensions + existing.extensions.filter { !declaration.extensions.contains($0) }
                existing.mimeTypes = declaration.mimeTypes + existing.mimeTypes.filter { !declaration.mimeTypes.contains($0) }
                existing.viewOnly = existing.viewOnly || declaration.viewOnly
                all[declaration.identifier] = existing
            } else {
                var declared = declaration
                if declared.conformsTo.isEmpty { declared.conformsTo = [.data] }
                all[declaration.identifier] = declared
            }
        }
        // User extensions and MIME types are added last so they win.
        for declaration in userTypes {
            for ext in declaration.extensions { extensionOrder.append((ext, declaration.identifier)) }
            for mime in declaration.mimeTypes { mimeOrder.append((mime, declaration.identifier)) }
        }
        var byExtension: [String: ContentType] = [:]
        for (ext, type) in extensionOrder {
            // Among built-ins the first declaration of an extension is the preferred type.
            if userTypes.contains(where: { $0.identifier == type && $0.extensions.contains(ext) }) || byExtension[ext] == nil {
                byExtension[ext] = type
            }
        }
        var byMIME: [String: ContentType] = [:]
        for (mime, type) in mimeOrder {
            if userTypes.contains(where: { $0.identifier == type && $0.mimeTypes.contains(mime) }) || byMIME[mime] == nil {
                byMIME[mime] = type
            }
        }
        // Transitive closure, breadth first so nearer supertypes come first; cycles are harmless.
        var ancestors: [ContentType: [ContentType]] = [:]
        for type in all.keys {
            var order: [ContentType] = []
            var seen: Set<ContentType> = [type]
            var queue = all[type]?.conformsTo ?? []
            var index = 0
            while index < queue.count {
                let next = queue[index]
                index += 1
                guard seen.insert(next).inserted else { continue }
                order.append(next)
                queue += all[next]?.conformsTo ?? []
            }
            if type != .item, !seen.contains(.item) { order.append(.item) }
            ancestors[type] = order
        }
        self.declarations = all
        self.ancestors = ancestors
        self.ancestorSets = ancestors.mapValues { Set($0) }
        self.byExtension = byExtension
        self.byMIMEType = byMIME
        var userExtensions: [String: ContentType] = [:]
        for declaration in userTypes { for ext in declaration.extensions { userExtensions[ext] = declaration.identifier } }
        self.byUserExtension = userExtensions
        self.userTypes = Set(userTypes.map(\.identifier))
    }

    public func declaration(for type: ContentType) -> ContentTypeDeclaration? { declarations[type] }

    public func isDeclared(_ type: ContentType) -> Bool { declarations[type] != nil }

    /// Whether `type` is `other` or conforms to it (directly or through its parents).
    public func conforms(_ type: ContentType, to other: ContentType) -> Bool {
        if type == other || other == .item { return true }
        return ancestorSets[type]?.contains(other) ?? false
    }

    /// Whether `type` conforms to any of `types`.
    public func conforms(_ type: ContentType, toAnyOf types: [ContentType]) -> Bool {
        types.contains { conforms(type, to: $0) }
    }

    /// Everything `type` conforms to, itself excluded, nearest first (`public.png` →
    /// `public.image, public.data, public.content, public.item`).
    public func supertypes(of type: ContentType) -> [ContentType] {
        ancestors[type] ?? (type == .item ? [] : [.item])
    }

    /// The type a filename extension declares (`pdf` → `com.adobe.pdf`), case-insensitive.
    public func type(forFilenameExtension ext: String) -> ContentType? {
        byExtension[ext.lowercased()]
    }

    /// The type a MIME type declares (`image/png` → `public.png`).
    public func type(forMIMEType mime: String) -> ContentType? {
        byMIMEType[Self.essence(of: mime)]
    }

    public func preferredMIMEType(for type: ContentType) -> String? { declarations[type]?.mimeTypes.first }
    public func preferredFilenameExtension(for type: ContentType) -> String? { declarations[type]?.extensions.first }

    /// A directory of this type is one document (`com.apple.package`).
    public func isPackage(_ type: ContentType) -> Bool { conforms(type, to: .package) }

    /// Items of this type are never writable: the type, or a type it conforms to, is declared view-only.
    public func isViewOnly(_ type: ContentType) -> Bool {
        if declarations[type]?.viewOnly == true { return true }
        return supertypes(of: type).contains { declarations[$0]?.viewOnly == true }
    }

    /// The type whose extension the name ends with, the longest matching extension first
    /// (`a.tar.gz` tries `tar.gz`, then `gz`); with `userTypesOnly`, only the user's declarations
    /// count. Nil when no declared extension matches (a leading dot does not start an extension).
    public func type(forFilename name: String, userTypesOnly: Bool = false) -> ContentType? {
        let table = userTypesOnly ? byUserExtension : byExtension
        guard !table.isEmpty else { return nil }
        var index = name.startIndex
        while let dot = name[index...].firstIndex(of: ".") {
            let ext = name[name.index(after: dot)...]
            if dot != name.startIndex, !ext.isEmpty, let type = table[ext.lowercased()] { return type }
            index = name.index(after: dot)
        }
        return nil
    }

    /// `text/plain; charset=utf-8` → `text/plain`.
    static func essence(of mime: String) -> String {
        var base = Substring(mime.split(separator: ";", maxSplits: 1).first ?? Substring(mime))
        while base.first == " " || base.first == "\t" { base.removeFirst() }
        while base.last == " " || base.last == "\t" { base.removeLast() }
        return base.lowercased()
    }
}

extension ContentTypeRegistry {
    /// The built-in declarations: Apple's UTType hierarchy for the common types.
    public static let builtIns: [ContentTypeDeclaration] = {
        typealias D = ContentTypeDeclaration
        return [
            D(.item),
            D(.content),
            D(.compositeContent, conformsTo: [.content]),
            D(.data, conformsTo: [.item], mimeTypes: ["application/octet-stream"]),
            D(.directory, conformsTo: [.item], mimeTypes: ["inode/directory"]),
            D(.folder, conformsTo: [.directory]),
            D(.package, conformsTo: [.directory]),
            D(.symbolicLink, conformsTo: [.item], mimeTypes: ["inode/symlink"]),
            D(.executable, conformsTo: [.item]),
            D(
                .unixExecutable, conformsTo: [.data, .executable],
                mimeTypes: ["application/x-executable", "application/x-sharedlib", "application/x-pie-executable"]),

            // Text
            D(.text, conformsTo: [.data, .content], mimeTypes: ["text/*"]),
            D(.plainText, conformsTo: [.text], extensions: ["txt", "text"], mimeTypes: ["text/plain"]),
            D(.utf8PlainText, conformsTo: [.plainText], mimeTypes: ["text/plain;charset=utf-8"]),
            D(.json, conformsTo: [.text], extensions: ["json"], mimeTypes: ["application/json"]),
            D(.xml, conformsTo: [.text], extensions: ["xml"], mimeTypes: ["application/xml", "text/xml"]),
            D(.html, conformsTo: [.text], extensions: ["html", "htm"], mimeTypes: ["text/html"]),
            D(.xhtml, conformsTo: [.html, .xml], extensions: ["xhtml"], mimeTypes: ["application/xhtml+xml"]),
            D(.yaml, conformsTo: [.text], extensions: ["yaml", "yml"], mimeTypes: ["application/yaml", "application/x-yaml", "text/yaml"]),
            D(.rtf, conformsTo: [.text], extensions: ["rtf"], mimeTypes: ["application/rtf", "text/rtf"]),
            D(.markdown, conformsTo: [.plainText], extensions: ["md", "markdown"], mimeTypes: ["text/markdown", "text/x-markdown"]),
            D(.delimitedText, conformsTo: [.text]),
            D(.commaSeparatedText, conformsTo: [.delimitedText], extensions: ["csv"], mimeTypes: ["text/csv"]),
            D(.tabSeparatedText, conformsTo: [.delimitedText], extensions: ["tsv"], mimeTypes: ["text/tab-separated-values"]),
            D(.log, conformsTo: [.plainText], extensions: ["log"], mimeTypes: ["text/x-log"]),
            D(.sourceCode, conformsTo: [.plainText]),
            D(.script, conformsTo: [.sourceCode]),
            D(.shellScript, conformsTo: [.script], extensions: ["sh", "command"], mimeTypes: ["application/x-shellscript", "text/x-shellscript"]),
            D(.pythonScript, conformsTo: [.script], extensions: ["py"], mimeTypes: ["text/x-python", "text/x-python3"]),
            D(.javaScript, conformsTo: [.sourceCode], extensions: ["js", "mjs"], mimeTypes: ["application/javascript", "text/javascript"]),
            D(.cSource, conformsTo: [.sourceCode], extensions: ["c"], mimeTypes: ["text/x-csrc"]),
            D(.cHeader, conformsTo: [.sourceCode], extensions: ["h"], mimeTypes: ["text/x-chdr"]),
            D(.cPlusPlusSource, conformsTo: [.sourceCode], extensions: ["cpp", "cc", "cxx"], mimeTypes: ["text/x-c++src"]),
            D(.swiftSource, conformsTo: [.sourceCode], extensions: ["swift"], mimeTypes: ["text/x-swift"]),

            // Images
            D(.image, conformsTo: [.data, .content], mimeTypes: ["image/*"]),
            D(.png, conformsTo: [.image], extensions: ["png"], mimeTypes: ["image/png"]),
            D(.jpeg, conformsTo: [.image], extensions: ["jpeg", "jpg", "jpe"], mimeTypes: ["image/jpeg"]),
            D(.gif, conformsTo: [.image], extensions: ["gif"], mimeTypes: ["image/gif"]),
            D(.tiff, conformsTo: [.image], extensions: ["tiff", "tif"], mimeTypes: ["image/tiff"]),
            D(.bmp, conformsTo: [.image], extensions: ["bmp"], mimeTypes: ["image/bmp"]),
            D(.svg, conformsTo: [.image], extensions: ["svg"], mimeTypes: ["image/svg+xml"]),
            D(.webP, conformsTo: [.image], extensions: ["webp"], mimeTypes: ["image/webp"]),
            D(.heic, conformsTo: [.image], extensions: ["heic"], mimeTypes: ["image/heic"]),

            // Audio and video
            D(.audiovisualContent, conformsTo: [.data, .content]),
            D(.audio, conformsTo: [.audiovisualContent], mimeTypes: ["audio/*"]),
            D(.mp3, conformsTo: [.audio], extensions: ["mp3"], mimeTypes: ["audio/mpeg"]),
            D(.movie, conformsTo: [.audiovisualContent], mimeTypes: ["video/*"]),
            D(.video, conformsTo: [.movie]),
            D(.mpeg4Movie, conformsTo: [.movie], extensions: ["mp4"], mimeTypes: ["video/mp4"]),

            // Documents
            D(.pdf, conformsTo: [.data, .compositeContent], extensions: ["pdf"], mimeTypes: ["application/pdf"]),
            D(.spreadsheet, conformsTo: [.compositeContent]),
            D(.presentation, conformsTo: [.compositeContent]),
            D(.font, conformsTo: [.data, .content], mimeTypes: ["font/*"]),

            // Archives
            D(.archive, conformsTo: [.data]),
            D(.zip, conformsTo: [.archive], extensions: ["zip"], mimeTypes: ["application/zip"]),
            D(.gzip, conformsTo: [.archive], extensions: ["gz"], mimeTypes: ["application/gzip"]),
            D(.bz2, conformsTo: [.archive], extensions: ["bz2"], mimeTypes: ["application/x-bzip2", "application/x-bzip"]),
            D(.tarArchive, conformsTo: [.archive], extensions: ["tar"], mimeTypes: ["application/x-tar"]),
        ]
    }()
}
