import ArgumentParser
import Foundation
import Glibc
import DocFSProvider
import DocFSStore

/// `docfs new TYPE --in FOLDER [--name NAME]`: SwiftUI's NewDocumentAction on the command line.
///
/// The document is made through the mount (open O_EXCL, write the template, close — the close is
/// the import; a package is mkdir plus its template's files), so the daemon's rules apply as for
/// `cp`. Templates: `STORE/templates/IDENTIFIER/template.EXT` (a file or a package directory),
/// written by `docfs init` from the layout's `template:` keys and for declared package, JSON and
/// text types; else the built-in ones (empty text, `{}` for JSON).
struct New: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a new, empty document of a content type in a folder of a mount (NewDocumentAction).",
        discussion: """
            TYPE is a content type identifier (public.plain-text, net.daringfireball.markdown, \
            public.json, or one the layout declares, such as com.example.deck) or a filename \
            extension (txt, md, json, deck).

            The new document is a copy of the type's template: the file the layout names with \
            `template:` for that type, else the built-in one (an empty text or Markdown file, `{}` \
            for JSON, an empty package for package types). It is named Untitled.EXT, or \
            Untitled 2.EXT, Untitled 3.EXT, … when that name is taken (NAME instead of Untitled \
            with --name), and made through the mount, so the folder's rules apply: a folder that \
            does not allow adding, or does not accept the type, refuses it.

            Prints the path it made.
            """)

    @Argument(help: "A content type identifier or a filename extension.")
    var type: String

    @Option(name: .customLong("in"), help: ArgumentHelp("The folder: a path inside a docfs mount.", valueName: "folder"))
    var folder: String

    @Option(help: "The name without its extension (default: Untitled).")
    var name: String = "Untitled"

    func validate() throws {
        if name.isEmpty || name.contains("/") { throw ValidationError("--name must be a name without '/'") }
    }

    func run() throws {
        var st = stat()
        guard stat(folder, &st) == 0 else { throw UserFacingError("docfs: \(folder): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw UserFacingError("docfs: \(folder) is not a folder") }
        guard Info.attribute(folder, "user.docfs.identifier") != nil else {
            throw UserFacingError("docfs: \(folder) is not inside a docfs mount")
        }
        let store = MountTable.store(holding: folder)
        guard let template = Templates.find(type, store: store) else {
            throw UserFacingError(
                "docfs: no template for '\(type)': give a text, Markdown or JSON type, a package type, or name a template for it in the layout (types: - identifier: … template: FILE)"
            )
        }
        // The folder's own rule, said plainly before anything is tried.
        if let words = Info.attribute(folder, "user.docfs.capabilities"),
            !words.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }).contains("add")
        {
            throw UserFacingError("docfs: \(folder) does not allow adding documents (its capabilities: \(words.isEmpty ? "none" : words))")
        }
        for n in 1...10_000 {
            let base = n == 1 ? name : "\(name) \(n)"
            let fileName = template.ext.isEmpty ? base : "\(base).\(template.ext)"
            let path = (folder.hasSuffix("/") ? folder : folder + "/") + fileName
            let e = make(path, from: template)
            switch e {
            case 0:
                print(path)
                return
            case EEXIST:
                continue
            case EPERM:
                throw UserFacingError(
                    "docfs: \(folder) does not accept \(template.type.identifier) documents: it is not among the folder's allowed content types (\(fileName): \(String(cString: strerror(e))))"
                )
            case EACCES:
                throw UserFacingError("docfs: \(folder) does not allow adding documents (\(fileName): \(String(cString: strerror(e))))")
            default:
                throw UserFacingError("docfs: cannot make \(path): \(String(cString: strerror(e)))")
            }
        }
        throw UserFacingError("docfs: no free name for \(name) in \(folder)")
    }

    /// Makes `path` from the template; 0 or an errno (EEXIST: the name is taken, try the next).
    private func make(_ path: String, from template: Templates.Template) -> Int32 {
        switch template.contents {
        case .file(let bytes):
            return New.writeNew(path, bytes, mode: 0o644)
        case .package(let source):
            guard mkdir(path, 0o755) == 0 else { return errno }
            let e = New.copyInto(source, path)
            if e != 0 { try? FileManager.default.removeItem(atPath: path) }
            return e
        }
    }

    /// open(O_EXCL), write, close: close() is the import and returns its verdict.
    static func writeNew(_ path: String, _ bytes: [UInt8], mode: mode_t) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { return errno }
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno; unlink(path); close(fd); return e
            }
            off += n
        }
        return close(fd) == 0 ? 0 : errno
    }

    /// Copies the contents of a template package (outside the mount) into `target` (inside it).
    static func copyInto(_ source: String, _ target: String) -> Int32 {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: source)) ?? []).sorted()
        for name in names {
            let from = source + "/" + name, to = target + "/" + name
            var st = stat()
            guard lstat(from, &st) == 0 else { return errno }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                guard mkdir(to, st.st_mode & 0o7777) == 0 else { return errno }
                let e = copyInto(from, to)
                if e != 0 { return e }
            case S_IFREG:
                guard let data = FileManager.default.contents(atPath: from) else { return EIO }
                let e = writeNew(to, [UInt8](data), mode: st.st_mode & 0o7777)
                if e != 0 { return e }
            case S_IFLNK:
                guard let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: from) else { return EIO }
                guard symlink(dest, to) == 0 else { return errno }
            default: continue
            }
        }
        return 0
    }

}

/// Templates for `docfs new`: the store's own (written at `docfs init`), then the built-in ones.
enum Templates {
    enum Contents {
        case file([UInt8])
        case package(String) // a directory whose contents are copied
    }

    struct Template {
        var type: ContentType
        var ext: String
        var contents: Contents
    }

    static let directoryName = "templates"
    static let emptyJSON = Array("{}\n".utf8)

    /// A template for TYPE (an identifier or an extension): the store's first, then built-in.
    static func find(_ wanted: String, store: String?) -> Template? {
        let word = wanted.hasPrefix(".") ? String(wanted.dropFirst()) : wanted
        if let store, let t = stored(word, store: store) { return t }
        let registry = ContentTypeRegistry.standard
        let type: ContentType
        if registry.isDeclared(ContentType(word)) {
            type = ContentType(word)
        } else if let t = registry.type(forFilenameExtension: word.lowercased()) {
            type = t
        } else {
            return nil
        }
        guard let ext = registry.preferredFilenameExtension(for: type) else { return nil }
        if registry.conforms(type, to: ContentType.json) { return Template(type: type, ext: ext, contents: .file(emptyJSON)) }
        if registry.conforms(type, to: ContentType.plainText) { return Template(type: type, ext: ext, contents: .file([])) }
        return nil
    }

    /// STORE/templates/IDENTIFIER/template.EXT, matched by identifier or by extension.
    static func stored(_ word: String, store: String) -> Template? {
        let dir = store + "/" + directoryName
        guard let types = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return nil }
        var candidates: [(identifier: String, file: String)] = []
        for identifier in types.sorted() {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/" + identifier)) ?? []
            if let file = files.first(where: { $0.hasPrefix("template.") || $0 == "template" }) {
                candidates.append((identifier, file))
            }
        }
        func ext(_ file: String) -> String { file == "template" ? "" : String(file.dropFirst("template.".count)) }
        guard
            let hit = candidates.first(where: { $0.identifier == word })
                ?? candidates.first(where: { ext($0.file).lowercased() == word.lowercased() })
        else { return nil }
        let path = dir + "/" + hit.identifier + "/" + hit.file
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        if st.st_mode & S_IFMT == S_IFDIR {
            return Template(type: ContentType(hit.identifier), ext: ext(hit.file), contents: .package(path))
        }
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return Template(type: ContentType(hit.identifier), ext: ext(hit.file), contents: .file([UInt8](data)))
    }

    /// At `docfs init`: the layout's templates (and empty ones for its package, JSON and text
    /// types) are copied into STORE/templates, so `docfs new` finds them through any mount.
    /// Checked before the store is made; returns the work to do after.
    static func plan(for layout: Layout, layoutFile: URL) throws -> [(identifier: String, file: String, source: Contents)] {
        let registry = ContentTypeRegistry(
            declarations: layout.types.map {
                ContentTypeDeclaration(ContentType($0.identifier), conformsTo: $0.conformsTo.map { ContentType($0) }, extensions: $0.extensions)
            })
        var out: [(String, String, Contents)] = []
        for decl in layout.types {
            let type = ContentType(decl.identifier)
            let file = decl.extensions.first.map { "template.\($0)" } ?? "template"
            if let template = decl.template {
                let url = URL(fileURLWithPath: template, relativeTo: layoutFile.deletingLastPathComponent())
                var st = stat()
                guard lstat(url.path, &st) == 0 else {
                    throw UserFacingError(
                        "docfs: cannot use layout \(layoutFile.path): type \(decl.identifier): template \(template): \(String(cString: strerror(errno)))"
                    )
                }
                if st.st_mode & S_IFMT == S_IFDIR {
                    out.append((decl.identifier, file, .package(url.path)))
                } else {
                    guard let data = FileManager.default.contents(atPath: url.path) else {
                        throw UserFacingError(
                            "docfs: cannot use layout \(layoutFile.path): type \(decl.identifier): template \(template) cannot be read")
                    }
                    out.append((decl.identifier, file, .file([UInt8](data))))
                }
            } else if !decl.extensions.isEmpty {
                if registry.isPackage(type) {
                    out.append((decl.identifier, file, .package("")))
                } else if registry.conforms(type, to: ContentType.json) {
                    out.append((decl.identifier, file, .file(emptyJSON)))
                } else if registry.conforms(type, to: ContentType.plainText) {
                    out.append((decl.identifier, file, .file([])))
                }
            }
        }
        return out
    }

    static func install(_ plan: [(identifier: String, file: String, source: Contents)], store: String) throws {
        let fm = FileManager.default
        for entry in plan {
            let dir = store + "/" + directoryName + "/" + entry.identifier
            do {
                try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
                let target = dir + "/" + entry.file
                switch entry.source {
                case .file(let bytes): try Data(bytes).write(to: URL(fileURLWithPath: target))
                case .package(let source):
                    if source.isEmpty {
                        try fm.createDirectory(atPath: target, withIntermediateDirectories: false)
                    } else {
                        try fm.copyItem(atPath: source, toPath: target)
                    }
                }
            } catch {
                throw UserFacingError("docfs: cannot write the template of \(entry.identifier) into \(store): \(error.localizedDescription)")
            }
        }
    }
}
