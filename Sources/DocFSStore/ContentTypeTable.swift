import DocFSProvider
import DocFSContentTypes

/// The content types of a store: the built-in types plus the layout's own (`types:`), detection
/// through the shared-mime-info database, the document types that validate contents, and the
/// folders whose layout entry restricts what they take (`allowedContentTypes`).
struct ContentTypeTable: Sendable {
    /// What a folder of the layout accepts.
    struct FolderRule: Sendable {
        /// The layout path of the folder that declared the rule (`Inbox`).
        var path: String
        var allowed: [ContentType]
        /// Plain subfolders may be made inside (`subfolders:`; default yes).
        var subfolders: Bool

        func admits(_ type: ContentType, in registry: ContentTypeRegistry) -> Bool {
            registry.conforms(type, toAnyOf: allowed)
        }

        var allowedList: String { "[" + allowed.map(\.identifier).joined(separator: ", ") + "]" }
    }

    let registry: ContentTypeRegistry
    let detector: ContentTypeDetector
    let documents: DocumentTypes
    /// Declared rules by normalised layout path.
    let rules: [String: FolderRule]
    /// Whether an import may leave a file's type undetected until asked: no type of the layout
    /// is view-only, so no type takes capabilities away (`capabilities(_:for:)`).
    let detectsLazily: Bool

    init(layout: Layout, database: SharedMimeDatabase = .system) {
        let registry = ContentTypeRegistry(
            declarations: layout.types.map { type in
                ContentTypeDeclaration(
                    ContentType(type.identifier), conformsTo: type.conformsTo.map { ContentType($0) },
                    extensions: type.extensions, mimeTypes: type.mime ?? [], viewOnly: type.viewOnly)
            })
        let detector = ContentTypeDetector(registry: registry, database: database)
        self.registry = registry
        self.detector = detector
        self.documents = .builtIn
        var rules: [String: FolderRule] = [:]
        for folder in layout.folders {
            guard let allowed = folder.allowedContentTypes else { continue }
            rules[folder.path] = FolderRule(
                path: folder.path,
                allowed: allowed.map { Self.resolve($0, registry: registry, detector: detector) },
                subfolders: folder.subfolders ?? true)
        }
        self.rules = rules
        self.detectsLazily = !layout.types.contains { $0.viewOnly }
    }

    /// An allowed-type word of the layout: an identifier, or a MIME type (`image/png`).
    static func resolve(_ word: String, registry: ContentTypeRegistry, detector: ContentTypeDetector) -> ContentType {
        if word.contains("/") { return detector.contentType(forMIMEType: word) }
        return ContentType(word)
    }

    /// `docfs init`: every allowed type must be one the store knows (a built-in, a layout type, or
    /// a MIME type), so a typo does not make a folder refuse everything.
    static func check(_ layout: Layout) throws(ProviderError) {
        let table = ContentTypeTable(layout: layout)
        for folder in layout.folders {
            for word in folder.allowedContentTypes ?? [] where !word.contains("/") {
                guard table.registry.isDeclared(ContentType(word)) else {
                    throw ProviderError(
                        .invalidArgument,
                        "folder '\(folder.path)': allowedContentTypes: unknown content type '\(word)' (declare it under types:, or use a built-in such as public.image, com.adobe.pdf, public.plain-text)"
                    )
                }
            }
        }
        for type in layout.types {
            for parent in type.conformsTo where !table.registry.isDeclared(ContentType(parent)) {
                throw ProviderError(.invalidArgument, "type '\(type.identifier)': conformsTo: unknown content type '\(parent)'")
            }
        }
    }

    /// Whether any folder restricts its content types (when none does, admission is free).
    var hasRules: Bool { !rules.isEmpty }

    // MARK: Types from names

    /// The content type of a file named `filename` from its name alone (`public.data` when the
    /// name says nothing).
    func fileType(forFilename filename: String) -> ContentType {
        detector.type(forFilename: filename) ?? .data
    }

    func type(forFilename filename: String, kind: ItemKind) -> ContentType {
        switch kind {
        case .file: return fileType(forFilename: filename)
        case .folder: return detector.type(forFolderNamed: filename)
        case .symlink: return .symbolicLink
        case .fifo, .socket, .characterDevice, .blockDevice: return .item
        }
    }

    /// An item's capabilities given its type: a view-only type takes `allowsWriting` away.
    func capabilities(_ capabilities: Capabilities, for type: ContentType) -> Capabilities {
        registry.isViewOnly(type) ? capabilities.subtracting(.allowsWriting) : capabilities
    }

    /// An item renamed to `name`: its type follows the new name when the name tells one (a file
    /// whose new name says nothing keeps the type its bytes gave), and a view-only type takes
    /// writing away (leaving one gives it back when `policy` allows writing).
    func retyped(_ item: Item, name: String, policy: Capabilities?) -> Item {
        var item = item
        let old = item.contentType
        switch item.kind {
        case .file:
            if let type = detector.type(forFilename: name) { item.contentType = type }
        case .folder:
            item.contentType = detector.type(forFolderNamed: name)
        case .symlink, .fifo, .socket, .characterDevice, .blockDevice:
            return item
        }
        if registry.isViewOnly(item.contentType) {
            item.capabilities.remove(.allowsWriting)
        } else if registry.isViewOnly(old), (policy ?? .all).contains(.allowsWriting) {
            item.capabilities.insert(.allowsWriting)
        }
        return item
    }

    // MARK: Refusals

    /// The refusal of `type` by `rule`, with the reason the daemon logs next to the path.
    func refusal(_ type: ContentType, by rule: FolderRule, detail: String = "") -> ProviderError {
        ProviderError(
            .typeNotAllowed, "type \(type.identifier) is not among the folder's allowed types \(rule.allowedList) (rule of /\(rule.path))\(detail)")
    }
}

extension Layout {
    /// The MIME words of the allowed types (`image/png`), each as the content type a store with
    /// this layout resolves it to: what the owner gives the server to check them by
    /// (`docfs_set_layout_mime`), the same rules as every replica's own.
    package var mimeWords: [String: String] {
        let words = folders.flatMap { $0.allowedContentTypes ?? [] }.filter { $0.contains("/") }
        guard !words.isEmpty else { return [:] }
        let table = ContentTypeTable(layout: self)
        var resolved: [String: String] = [:]
        for word in words {
            resolved[word] = ContentTypeTable.resolve(word, registry: table.registry, detector: table.detector).identifier
        }
        return resolved
    }
}
