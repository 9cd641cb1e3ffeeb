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
    /// cut to 255 bytes whole (`fitted`).
    public static func unique(_ name: String, isFolder: Bool, taken: (String) -> Bool) -> String {
        if !taken(name) { return name }
        var counter = 2
        while true {
            let candidate = numbered(name, counter, isFolder: isFolder)
            if !taken(candidate) { return candidate }
            counter += 1
        }
    }

    /// The `counter`th candidate of `unique` ("BASE N.EXT"): one rule for the providers and the
    /// server, so that a replica and the server suffix a taken name the same way.
    public static func numbered(_ name: String, _ counter: Int, isFolder: Bool) -> String {
        let (base, ext) = isFolder ? (name, "") : split(name)
        return fitted(base: base, marker: " \(counter)", ext: ext)
    }

    /// A file name's base and extension ("notes", ".txt"); a leading dot is no extension.
    public static func split(_ name: String) -> (base: String, ext: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        return (String(name[..<dot]), String(name[dot...]))
    }

    /// `base + marker + ext` within 255 bytes, counted whole: the longer of the base and the
    /// extension loses characters from its end first (whole characters, never part of a UTF-8
    /// sequence), so a long extension is cut too and the marker (" 2", " (conflicted copy …)")
    /// stays readable; only a marker over 255 bytes by itself is cut.
    public static func fitted(base: String, marker: String, ext: String) -> String {
        var base = base, ext = ext
        var bytes: Int { base.utf8.count + marker.utf8.count + ext.utf8.count }
        while bytes > 255 {
            let extBody = max(ext.utf8.count - 1, 0)
            if !base.isEmpty, base.utf8.count >= extBody || ext.count <= 1 {
                base.removeLast()
            } else if ext.count > 1 {
                ext.removeLast() // never the dot itself while the extension has more
            } else if !ext.isEmpty {
                ext = ""
            } else {
                var cut = marker
                while cut.utf8.count > 255 { cut.removeLast() }
                return cut
            }
        }
        return base + marker + ext
    }
}
