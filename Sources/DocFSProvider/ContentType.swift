/// A uniform type identifier such as `public.plain-text` (UTType-style).
/// Conformance and detection are deliberately small here; `ContentTypeRegistry` grows them.
public struct ContentType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ identifier: String) { self.rawValue = identifier }
    public var identifier: String { rawValue }
    public var description: String { rawValue }

    public static let item = ContentType("public.item")
    public static let data = ContentType("public.data")
    public static let content = ContentType("public.content")
    public static let text = ContentType("public.text")
    public static let plainText = ContentType("public.plain-text")
    public static let utf8PlainText = ContentType("public.utf8-plain-text")
    public static let json = ContentType("public.json")
    public static let xml = ContentType("public.xml")
    public static let html = ContentType("public.html")
    public static let image = ContentType("public.image")
    public static let png = ContentType("public.png")
    public static let jpeg = ContentType("public.jpeg")
    public static let pdf = ContentType("com.adobe.pdf")
    public static let archive = ContentType("public.archive")
    public static let zip = ContentType("public.zip-archive")
    public static let folder = ContentType("public.folder")
    public static let directory = ContentType("public.directory")
    public static let package = ContentType("com.apple.package")
    public static let symbolicLink = ContentType("public.symlink")
    public static let sourceCode = ContentType("public.source-code")
}
