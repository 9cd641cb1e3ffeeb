import Foundation
import DocFSProvider
import Yams

/// What `docfs init --layout FILE` declares: the trash flag, content types of the user's own, and
/// folders with their capabilities. Parsed from YAML or JSON (JSON is YAML's flow style).
package struct Layout: Sendable, Codable, Equatable {
    /// A content type of the user's own (UTType-style declaration).
    package struct TypeDeclaration: Sendable, Codable, Equatable {
        package var identifier: String
        package var conformsTo: [String]
        package var extensions: [String]
        /// MIME types of the type (`mime:`); nil when none were given.
        package var mime: [String]?
        /// Like `DocumentGroup(viewing:)`: items of this type are never writable.
        package var viewOnly: Bool
        /// A file (or package directory) that `docfs new` copies for a new document of this type;
        /// a relative path is relative to the layout file. nil when none was given.
        package var template: String?

        package init(
            identifier: String, conformsTo: [String] = [], extensions: [String] = [], mime: [String]? = nil, viewOnly: Bool = false,
            template: String? = nil
        ) {
            self.identifier = identifier
            self.conformsTo = conformsTo
            self.extensions = extensions
            self.mime = mime
            self.viewOnly = viewOnly
            self.template = template
        }
    }

    /// A folder the store creates at init, with what it allows.
    package struct Folder: Sendable, Codable, Equatable {
        /// Relative path from the root, normalised (`Projects/Team`, no leading or trailing `/`).
        package var path: String
        /// Capability words for the folder itself; nil means all.
        package var capabilities: [String]?
        /// Content types accepted in the folder; nil means any.
        package var allowedContentTypes: [String]?
        /// Capability words given to items created inside the folder; nil means all.
        package var contents: [String]?
        /// With `allowedContentTypes`: whether plain subfolders may be made inside (nil: yes).
        package var subfolders: Bool?

        package init(
            path: String, capabilities: [String]? = nil, allowedContentTypes: [String]? = nil, contents: [String]? = nil,
            subfolders: Bool? = nil
        ) {
            self.path = path
            self.capabilities = capabilities
            self.allowedContentTypes = allowedContentTypes
            self.contents = contents
            self.subfolders = subfolders
        }

        /// The folder's own capabilities (all when none were given).
        package var folderCapabilities: Capabilities {
            get throws(ProviderError) { try capabilities.map { list throws(ProviderError) in try Capabilities(words: list) } ?? .all }
        }

        /// The capabilities of items created inside the folder (all when none were given).
        package var contentsCapabilities: Capabilities {
            get throws(ProviderError) { try contents.map { list throws(ProviderError) in try Capabilities(words: list) } ?? .all }
        }

        /// The path split into components.
        package var components: [String] { path.split(separator: "/").map(String.init) }
    }

    /// `rm` on the mount moves items to `/.Trash`.
    package var trash: Bool
    package var types: [TypeDeclaration]
    package var folders: [Folder]

    package init(trash: Bool = false, types: [TypeDeclaration] = [], folders: [Folder] = []) {
        self.trash = trash
        self.types = types
        self.folders = folders
    }

    /// The folder declared at `path` (normalised), if any.
    package func folder(atPath path: String) -> Folder? {
        let wanted = path.split(separator: "/").map(String.init).joined(separator: "/")
        return folders.first { $0.path == wanted }
    }
}

/// A layout file that cannot be used; the message names the file, the line and the bad key or word.
package struct LayoutError: Error, Sendable, CustomStringConvertible, LocalizedError {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
    package var errorDescription: String? { message }
}

extension Layout {
    /// Reads a layout file (YAML or JSON).
    package static func load(from url: URL) throws -> Layout {
        let text: String
        do {
            let data = try Data(contentsOf: url)
            guard let decoded = String(data: data, encoding: .utf8) else {
                throw LayoutError("layout file \(url.path): not UTF-8 text")
            }
            text = decoded
        } catch let error as LayoutError {
            throw error
        } catch {
            throw LayoutError("layout file \(url.path): cannot read: \(error.localizedDescription)")
        }
        return try parse(text, source: url.path)
    }

    /// Parses layout text (YAML or JSON). `source` names the file in error messages.
    package static func parse(_ text: String, source: String = "layout") throws -> Layout {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw LayoutError("layout file \(source): not valid YAML or JSON: \(error)")
        }
        var parser = LayoutParser(source: source)
        return try parser.parse(root)
    }
}

private struct LayoutParser {
    let source: String

    func fail(_ node: Node?, _ message: String) -> LayoutError {
        if let mark = node?.mark {
            return LayoutError("layout file \(source), line \(mark.line): \(message)")
        }
        return LayoutError("layout file \(source): \(message)")
    }

    mutating func parse(_ root: Node?) throws -> Layout {
        guard let root else { return Layout() }
        if case .scalar(let scalar) = root, scalar.string.isEmpty || root.null != nil { return Layout() }
        guard let mapping = root.mapping else {
            throw fail(root, "expected a mapping with the keys trash, types, folders at the top")
        }
        var layout = Layout()
        for (keyNode, value) in mapping {
            let key = try keyString(keyNode)
            switch key {
            case "trash":
                layout.trash = try bool(value, key: "trash")
            case "types":
                layout.types = try list(value, key: "types").enumerated().map { try typeDeclaration($0.element, index: $0.offset) }
            case "folders":
                layout.folders = try list(value, key: "folders").enumerated().map { try folder($0.element, index: $0.offset) }
            default:
                throw fail(keyNode, "unknown key '\(key)' at the top (expected trash, types, folders)")
            }
        }
        var seen = Set<String>()
        for folder in layout.folders where !seen.insert(folder.path).inserted {
            throw LayoutError("layout file \(source): folder '\(folder.path)' is declared twice")
        }
        var typeIDs = Set<String>()
        for type in layout.types where !typeIDs.insert(type.identifier).inserted {
            throw LayoutError("layout file \(source): type '\(type.identifier)' is declared twice")
        }
        return layout
    }

    func keyString(_ node: Node) throws -> String {
        guard case .scalar(let scalar) = node else { throw fail(node, "keys must be plain words") }
        return scalar.string
    }

    func isNull(_ node: Node) -> Bool {
        if case .scalar = node, node.null != nil { return true }
        return false
    }

    func bool(_ node: Node, key: String) throws -> Bool {
        guard case .scalar = node, let value = node.bool else {
            throw fail(node, "'\(key)' must be true or false, not '\(node.string ?? "a collection")'")
        }
        return value
    }

    func string(_ node: Node, key: String) throws -> String {
        guard case .scalar(let scalar) = node, !isNull(node) else {
            throw fail(node, "'\(key)' must be a single word or path")
        }
        return scalar.string
    }

    func list(_ node: Node, key: String) throws -> [Node] {
        if isNull(node) { return [] }
        guard let sequence = node.sequence else { throw fail(node, "'\(key)' must be a list") }
        return Array(sequence)
    }

    func words(_ node: Node, key: String) throws -> [String] {
        // A single word is accepted as a one-element list (`capabilities: all`).
        if case .scalar = node, !isNull(node) { return [try string(node, key: key)] }
        return try list(node, key: key).map { try string($0, key: key) }
    }

    func capabilityWords(_ node: Node, key: String, folder: String) throws -> [String] {
        let list = try words(node, key: key)
        for word in list {
            do { _ = try Capabilities(words: [word]) } catch {
                throw fail(
                    node,
                    "folder '\(folder)': \(key): unknown capability word '\(word)' (expected one of: all, \(Capabilities.words.map(\.word).joined(separator: ", ")))"
                )
            }
        }
        return list
    }

    func typeDeclaration(_ node: Node, index: Int) throws -> Layout.TypeDeclaration {
        guard let mapping = node.mapping else {
            throw fail(node, "types[\(index)] must be a mapping with identifier, conformsTo, extensions, mime, viewOnly")
        }
        var identifier: String?
        var declaration = Layout.TypeDeclaration(identifier: "")
        for (keyNode, value) in mapping {
            let key = try keyString(keyNode)
            switch key {
            case "identifier": identifier = try string(value, key: "identifier")
            case "conformsTo": declaration.conformsTo = try words(value, key: "conformsTo")
            case "extensions":
                declaration.extensions = try words(value, key: "extensions").map { ext in
                    let trimmed = ext.hasPrefix(".") ? String(ext.dropFirst()) : ext
                    return trimmed.lowercased()
                }
            case "mime", "mimeTypes": declaration.mime = try words(value, key: key).map { $0.lowercased() }
            case "viewOnly": declaration.viewOnly = try bool(value, key: "viewOnly")
            case "template": declaration.template = try string(value, key: "template")
            default:
                throw fail(keyNode, "types[\(index)]: unknown key '\(key)' (expected identifier, conformsTo, extensions, mime, viewOnly, template)")
            }
        }
        guard let identifier, !identifier.isEmpty else { throw fail(node, "types[\(index)]: 'identifier' is missing") }
        guard !identifier.contains(where: { $0.isWhitespace || $0 == "/" }) else {
            throw fail(node, "types[\(index)]: identifier '\(identifier)' must be a reverse-DNS word like com.example.invoice")
        }
        declaration.identifier = identifier
        return declaration
    }

    func folder(_ node: Node, index: Int) throws -> Layout.Folder {
        guard let mapping = node.mapping else {
            throw fail(node, "folders[\(index)] must be a mapping with path, capabilities, allowedContentTypes, contents")
        }
        var path: String?
        var pathNode: Node?
        var pending: [(String, Node, Node)] = []
        for (keyNode, value) in mapping {
            let key = try keyString(keyNode)
            if key == "path" {
                path = try string(value, key: "path")
                pathNode = value
            } else {
                pending.append((key, keyNode, value))
            }
        }
        guard let rawPath = path else { throw fail(node, "folders[\(index)]: 'path' is missing") }
        let components = rawPath.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !components.isEmpty else { throw fail(pathNode, "folders[\(index)]: path '\(rawPath)' names the root; give a folder below it") }
        for component in components {
            if component == "." || component == ".." {
                throw fail(pathNode, "folders[\(index)]: path '\(rawPath)' may not contain '.' or '..'")
            }
            if component.utf8.count > 255 {
                throw fail(pathNode, "folders[\(index)]: path '\(rawPath)' has a name longer than 255 bytes")
            }
            if component.utf8.contains(0) {
                throw fail(pathNode, "folders[\(index)]: path '\(rawPath)' contains a NUL byte")
            }
        }
        let normalized = components.joined(separator: "/")
        if components.first == ".Trash" {
            throw fail(pathNode, "folders[\(index)]: '.Trash' is reserved for the trash")
        }
        var folder = Layout.Folder(path: normalized)
        for (key, keyNode, value) in pending {
            switch key {
            case "capabilities": folder.capabilities = isNull(value) ? nil : try capabilityWords(value, key: key, folder: normalized)
            case "contents": folder.contents = isNull(value) ? nil : try capabilityWords(value, key: key, folder: normalized)
            case "allowedContentTypes": folder.allowedContentTypes = isNull(value) ? nil : try words(value, key: key)
            case "subfolders": folder.subfolders = isNull(value) ? nil : try bool(value, key: key)
            default:
                throw fail(
                    keyNode, "folder '\(normalized)': unknown key '\(key)' (expected path, capabilities, allowedContentTypes, contents, subfolders)")
            }
        }
        return folder
    }
}
