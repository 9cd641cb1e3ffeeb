#if canImport(Glibc)
import Glibc
#endif

/// What a Linux filesystem accepts as a name or a link target, and the macOS way of making a
/// name unique: one copy of these rules for every provider (the store, the in-memory provider).
public enum ItemNames {
    /// Not empty, not `.` or `..`, no `/` or NUL, at most 255 bytes (ENAMETOOLONG).
    public static func validate(_ name: String) throws(ProviderError) {
        if name.isEmpty { throw ProviderError(.invalidName, "a name may not be empty") }
        if name == "." || name == ".." { throw ProviderError(.invalidName, "'\(name)' is not a valid name") }
        if name.utf8.contains(UInt8(ascii: "/")) { throw ProviderError(.invalidName, "'\(name)' contains '/'") }
        if name.utf8.contains(0) { throw ProviderError(.invalidName, "a name may not contain a NUL byte") }
        if name.utf8.count > 255 {
            throw ProviderError(.nameTooLong, "'\(name.prefix(40))…' is \(name.utf8.count) bytes long; names are limited to 255 bytes")
        }
    }

    /// A symbolic link's target: not empty, shorter than PATH_MAX.
    public static func validateSymbolicLinkTarget(_ target: String) throws(ProviderError) {
        if target.isEmpty { throw ProviderError(.invalidArgument, "a symbolic link needs a target") }
        if target.utf8.count >= Int(PATH_MAX) { throw ProviderError(.nameTooLong, "symbolic link target is longer than \(PATH_MAX) bytes") }
    }

    /// `name` if `taken` says it is free, else `name 2`, `name 3`, … before a file's extension,
    /// shortened to stay within 255 bytes.
    public static func unique(_ name: String, isFolder: Bool, taken: (String) -> Bool) -> String {
        if !taken(name) { return name }
        var base = name
        var ext = ""
        if !isFolder, let dot = name.lastIndex(of: "."), dot != name.startIndex {
            base = String(name[..<dot])
            ext = String(name[dot...])
        }
        var counter = 2
        while true {
            var suffix = " \(counter)" + ext
            if suffix.utf8.count > 200 { suffix = " \(counter)" }
            var candidateBase = base
            while (candidateBase + suffix).utf8.count > 255 { candidateBase.removeLast() }
            let candidate = candidateBase + suffix
            if !taken(candidate) { return candidate }
            counter += 1
        }
    }
}
