import DocFSProvider

/// Works out an item's content type from its filename: the layout's own `types` first
/// (their extensions win), then a small built-in table, else `public.data`.
struct ContentTypeTable: Sendable {
    private var byExtension: [String: ContentType] = [
        "txt": .plainText, "text": .plainText,
        "pdf": .pdf,
        "png": .png,
        "jpg": .jpeg, "jpeg": .jpeg,
        "json": .json,
        "html": .html, "htm": .html,
        "xml": .xml,
        "zip": .zip,
    ]

    init(layout: Layout) {
        for type in layout.types {
            for ext in type.extensions where !ext.isEmpty {
                byExtension[ext.lowercased()] = ContentType(type.identifier)
            }
        }
    }

    /// The content type of a file named `filename`.
    func fileType(forFilename filename: String) -> ContentType {
        guard let dot = filename.lastIndex(of: "."), dot != filename.startIndex else { return .data }
        let ext = filename[filename.index(after: dot)...].lowercased()
        guard !ext.isEmpty else { return .data }
        return byExtension[ext] ?? .data
    }

    func type(forFilename filename: String, kind: ItemKind) -> ContentType {
        switch kind {
        case .file: return fileType(forFilename: filename)
        case .folder: return .folder
        case .symlink: return .symbolicLink
        }
    }
}
