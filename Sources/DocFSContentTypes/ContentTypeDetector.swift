import Foundation
import DocFSProvider
import Synchronization
#if canImport(Glibc)
    import Glibc
#endif

/// What a detection found and how.
package struct Detection: Sendable, Hashable, CustomStringConvertible {
    package enum Source: String, Sendable {
        /// Given explicitly (a `user.mime_type` attribute, a caller's choice).
        case explicit
        /// From the name alone (no bytes to look at, or the bytes had nothing to say against it).
        case name
        /// From the name, confirmed by the magic of its type.
        case nameAndContents = "name and contents"
        /// From the bytes: the name said nothing, or the bytes contradicted it.
        case contents
        /// Nothing told: `public.data`.
        case none
    }

    package var type: ContentType
    /// The MIME type behind it, when the shared-mime-info database gave one.
    package var mimeType: String?
    package var source: Source
    /// When the bytes overruled the name: the type the name gave.
    package var typeFromName: ContentType?

    package init(type: ContentType, mimeType: String? = nil, source: Source, typeFromName: ContentType? = nil) {
        self.type = type
        self.mimeType = mimeType
        self.source = source
        self.typeFromName = typeFromName
    }

    /// The name said one type and the bytes another.
    package var nameContradicted: Bool { typeFromName != nil && typeFromName != type }

    package var description: String {
        var text = "\(type.identifier)"
        if let mimeType { text += " (\(mimeType))" }
        text += " from \(source.rawValue)"
        if let typeFromName, typeFromName != type { text += "; the name says \(typeFromName.identifier)" }
        return text
    }
}

/// Works out content types the way the shared-mime-info specification recommends: an explicit
/// type if there is one, else the name's glob, then the magic bytes when the name says nothing or
/// when the bytes contradict it; MIME types are mapped to UTType-style identifiers through a
/// `ContentTypeRegistry` (the user's layout types first).
///
/// The database is loaded once (`SharedMimeDatabase.system`); a detection is a few dictionary
/// lookups for the name plus, with bytes, one magic pass over at most `prefixLength` bytes.
package final class ContentTypeDetector: Sendable {
    package let registry: ContentTypeRegistry
    package let database: SharedMimeDatabase
    /// How many leading bytes of a file are read for the magic (covers every rule of the database).
    package let prefixLength: Int
    private let mimeCache = Mutex<[String: ContentType]>([:])

    /// A magic match at or above this priority overrules a name whose type has no magic of its own
    /// even when the bytes look like text.
    package static let strongMagicPriority = 80

    package init(registry: ContentTypeRegistry = .standard, database: SharedMimeDatabase = .system) {
        self.registry = registry
        self.database = database
        self.prefixLength = min(max(database.magicExtent, 4096), 1 << 16)
    }

    // MARK: - MIME types to content types

    /// The content type for a MIME type: the declared one, else that of its nearest declared
    /// supertype in the MIME hierarchy (`text/x-matlab` → `text/plain` → `public.plain-text`),
    /// else by media type (`image/*` → `public.image`), else `public.data`.
    package func contentType(forMIMEType mimeType: String) -> ContentType {
        if let cached = mimeCache.withLock({ $0[mimeType] }) { return cached }
        let type = mapMIMEType(mimeType)
        // Bounded: the database names about a thousand types; stop caching past a few thousand.
        mimeCache.withLock { cache in if cache.count < 4096 { cache[mimeType] = type } }
        return type
    }

    private func mapMIMEType(_ mimeType: String) -> ContentType {
        let canonical = database.canonical(mimeType)
        if let type = registry.type(forMIMEType: canonical) { return type }
        if canonical != mimeType.lowercased(), let type = registry.type(forMIMEType: mimeType) { return type }
        for ancestor in database.ancestors(of: canonical) where ancestor != "application/octet-stream" {
            if let type = registry.type(forMIMEType: ancestor) { return type }
        }
        if let slash = canonical.firstIndex(of: "/"), let type = registry.type(forMIMEType: canonical[..<slash] + "/*") {
            return type == .text ? .plainText : type
        }
        return .data
    }

    /// The MIME type to check a content type's bytes against: its own, or that of its nearest
    /// supertype with magic in the database (a user type conforming to `com.adobe.pdf` must look
    /// like a PDF). Nil when nothing in its ancestry has magic.
    func magicMIMEType(for type: ContentType, own mimeType: String?) -> String? {
        if let mimeType, database.hasMagic(mimeType) { return mimeType }
        for candidate in [type] + registry.supertypes(of: type) {
            for mime in registry.declaration(for: candidate)?.mimeTypes ?? [] where database.hasMagic(mime) { return mime }
        }
        return nil
    }

    // MARK: - Names

    /// The types the name gives, best first: a user type by extension, else the best glob
    /// matches of the database, else a built-in extension. Empty when the name says nothing.
    package func candidates(forFilename name: String) -> [(type: ContentType, mimeType: String?)] {
        if let type = registry.type(forFilename: name, userTypesOnly: true) {
            return [(type, registry.preferredMIMEType(for: type))]
        }
        let globs = database.mimeTypes(forFilename: name)
        if !globs.isEmpty {
            var seen = Set<ContentType>()
            var result: [(ContentType, String?)] = []
            for mime in globs {
                let type = contentType(forMIMEType: mime)
                if seen.insert(type).inserted { result.append((type, mime)) }
            }
            return result
        }
        if let type = registry.type(forFilename: name) { return [(type, registry.preferredMIMEType(for: type))] }
        return []
    }

    /// The type of a file named `name` from the name alone; nil when the name says nothing.
    package func type(forFilename name: String) -> ContentType? {
        candidates(forFilename: name).first?.type
    }

    /// The type of a folder named `name`: a package type when its extension declares one
    /// (`talk.deck`), else `public.folder`.
    package func type(forFolderNamed name: String) -> ContentType {
        if let type = registry.type(forFilename: name), registry.isPackage(type) { return type }
        return .folder
    }

    // MARK: - Names and bytes

    /// The type of `contents` (the leading bytes of a file, or all of it) named `name`.
    package func detect(name: String?, contents: UnsafeRawBufferPointer, explicitType: String? = nil) -> Detection {
        if let explicit = explicitType?.trimmingCharacters(in: .whitespacesAndNewlines), !explicit.isEmpty {
            // A UTType identifier the registry knows, or a MIME type.
            if registry.isDeclared(ContentType(explicit)) { return Detection(type: ContentType(explicit), source: .explicit) }
            if explicit.contains("/") {
                return Detection(type: contentType(forMIMEType: explicit), mimeType: database.canonical(explicit), source: .explicit)
            }
        }
        let named = name.map { candidates(forFilename: $0) } ?? []
        if contents.isEmpty {
            // Nothing to look at: the name stands (an empty file is a placeholder of its type).
            if let first = named.first { return Detection(type: first.type, mimeType: first.mimeType, source: .name) }
            return Detection(type: .data, source: .none)
        }
        if named.isEmpty { return fromContents(database.sniff(contents), contents, typeFromName: nil) }

        let looksLikeText = SharedMimeDatabase.looksLikeText(contents)
        // The full magic pass is the expensive part (~500 sections): only when needed, once.
        var sniffCache: (mimeType: String, priority: Int)??
        func sniffed() -> (mimeType: String, priority: Int)? {
            if let cached = sniffCache { return cached }
            let result = database.sniff(contents)
            sniffCache = .some(result)
            return result
        }
        var unchecked: (type: ContentType, mimeType: String?)?
        for candidate in named {
            let magicType = magicMIMEType(for: candidate.type, own: candidate.mimeType)
            // 1. The bytes match the magic of the name's type: confirmed.
            if let magicType, database.magicMatches(magicType, contents) == true {
                return Detection(type: candidate.type, mimeType: candidate.mimeType, source: .nameAndContents)
            }
            let isTextType =
                candidate.mimeType.map { database.isSubclass($0, of: "text/plain", implicitOctetStream: false) }
                ?? registry.conforms(candidate.type, to: .text)
            if isTextType && looksLikeText {
                // 2a. A text type and text bytes: the name stands (few text formats have a
                //     signature; the document type judges the bytes) unless strong magic says the
                //     bytes are something else.
                if let strong = database.sniff(contents, minimumPriority: Self.strongMagicPriority),
                    !related(strong.mimeType, candidate)
                {
                    continue
                }
                if unchecked == nil { unchecked = candidate }
                continue
            }
            // 2. The name's type is a kind of what the bytes are (a .svg is XML, which is text):
            //    the name is more precise (the specification's rule).
            let bytesMIME = sniffed()?.mimeType ?? (looksLikeText ? "text/plain" : nil)
            if let bytesMIME {
                if let mime = candidate.mimeType, database.isSubclass(mime, of: bytesMIME, implicitOctetStream: false) {
                    return Detection(type: candidate.type, mimeType: candidate.mimeType, source: .name)
                }
                let bytesType = contentType(forMIMEType: bytesMIME)
                if bytesType != .data, registry.conforms(candidate.type, to: bytesType) {
                    return Detection(type: candidate.type, mimeType: candidate.mimeType, source: .name)
                }
            }
            // 3. The name's type has magic and the bytes do not match it: contradicted. Text
            //    types are the exception: few text formats have a signature (text/plain's magic
            //    only knows TeX logs), so for them the text check and the document type decide.
            if let magicType, !database.isSubclass(magicType, of: "text/plain", implicitOctetStream: false) { continue }
            // 4. Nothing to check the name against: it stands unless the magic says the bytes
            //    are something else altogether — a strong match, or any match on bytes that are
            //    not text (a PNG called notes.txt is a PNG).
            if let sniffed = sniffed(), sniffed.priority >= Self.strongMagicPriority || !looksLikeText,
                !related(sniffed.mimeType, candidate)
            {
                continue
            }
            if unchecked == nil { unchecked = candidate }
        }
        if let unchecked { return Detection(type: unchecked.type, mimeType: unchecked.mimeType, source: .name) }
        return fromContents(sniffed(), contents, typeFromName: named.first?.type)
    }

    /// Whether the sniffed MIME type is a kind of the candidate (then the name, being at least as
    /// precise, stands).
    private func related(_ sniffed: String, _ candidate: (type: ContentType, mimeType: String?)) -> Bool {
        if let mime = candidate.mimeType { return database.isSubclass(sniffed, of: mime, implicitOctetStream: false) }
        return registry.conforms(contentType(forMIMEType: sniffed), to: candidate.type)
    }

    private func fromContents(
        _ sniffed: (mimeType: String, priority: Int)?, _ contents: UnsafeRawBufferPointer,
        typeFromName: ContentType?
    ) -> Detection {
        if let sniffed {
            return Detection(
                type: contentType(forMIMEType: sniffed.mimeType), mimeType: sniffed.mimeType,
                source: .contents, typeFromName: typeFromName)
        }
        if SharedMimeDatabase.looksLikeText(contents) {
            return Detection(type: .plainText, mimeType: "text/plain", source: .contents, typeFromName: typeFromName)
        }
        return Detection(type: .data, mimeType: "application/octet-stream", source: .contents, typeFromName: typeFromName)
    }

    /// `fgetxattr(2)`, looked up once (Glibc's Swift module does not export `<sys/xattr.h>`).
    private typealias GetXattr = @convention(c) (Int32, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
    private static let fgetxattr: GetXattr? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "fgetxattr") else { return nil }
        return unsafeBitCast(symbol, to: GetXattr.self)
    }()

    package func detect(name: String?, contents: [UInt8], explicitType: String? = nil) -> Detection {
        contents.withUnsafeBytes { detect(name: name, contents: $0, explicitType: explicitType) }
    }

    /// The type of the file at `path`, named `name` (its own last component when nil): reads the
    /// `user.mime_type` attribute (an explicit type) and the first `prefixLength` bytes — one
    /// open, one read. A folder is a package or a folder by name; a symbolic link is `public.symlink`.
    package func detect(fileAt path: String, name: String? = nil) throws(ProviderError) -> Detection {
        let name = name ?? (path.split(separator: "/").last.map(String.init) ?? path)
        var st = stat()
        guard lstat(path, &st) == 0 else { throw ProviderError.posix(errno, "inspect \(path)") }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: return Detection(type: type(forFolderNamed: name), source: .name)
        case S_IFLNK: return Detection(type: .symbolicLink, source: .name)
        case S_IFREG: return try detect(regularFileAt: path, name: name, size: Int64(st.st_size))
        default: return Detection(type: .item, source: .none)
        }
    }

    /// The same for a path the caller has just seen to be a regular file of `size` bytes (one
    /// `lstat` less per import). O_NOFOLLOW still refuses a symbolic link put there since.
    package func detect(regularFileAt path: String, name: String, size: Int64) throws(ProviderError) -> Detection {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw ProviderError.posix(errno, "open \(path) to detect its type") }
        defer { close(fd) }
        var explicit: String?
        var attribute = [UInt8](repeating: 0, count: 256)
        if let getxattr = Self.fgetxattr {
            let n = getxattr(fd, "user.mime_type", &attribute, attribute.count)
            if n > 0 { explicit = String(decoding: attribute[0..<n], as: UTF8.self) }
        }
        let want = min(Int(size), prefixLength)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(want, 1), alignment: 16)
        defer { buffer.deallocate() }
        var got = 0
        while got < want {
            let r = pread(fd, buffer.baseAddress! + got, want - got, off_t(got))
            if r < 0 { if errno == EINTR { continue }; throw ProviderError.posix(errno, "read \(path) to detect its type") }
            if r == 0 { break }
            got += r
        }
        return detect(name: name, contents: UnsafeRawBufferPointer(rebasing: buffer[0..<got]), explicitType: explicit)
    }
}
