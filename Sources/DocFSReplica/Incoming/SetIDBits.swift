import DocFSProvider

/// Set-user-ID and set-group-ID bits from the server (docs/REMOTE.md, "No setuid from the wire"):
/// any replica's credentials can write an item's mode, so a file arriving with 04755 and uid 0
/// would be a setuid-root program another machine planted. Such bits are kept only where this
/// replica's owner allows them, by mounting with `-o suid` explicitly; otherwise cleared when
/// the item is applied here. A folder keeps its set-group-ID bit: it only gives new items the
/// folder's group, no privilege.
enum SetIDBits {
    static let setUID: UInt16 = 0o4000
    static let setGID: UInt16 = 0o2000

    /// `mode` (permission bits) as this replica takes it: set-ID bits of a file or link cleared
    /// unless `keep`.
    static func applied(_ mode: UInt16, kind: ItemKind, keep: Bool) -> UInt16 {
        if keep || kind == .folder { return mode }
        return mode & ~(setUID | setGID)
    }
}
