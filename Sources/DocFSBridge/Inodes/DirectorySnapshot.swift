import DocFSProvider

/// A directory listing fixed at opendir, so `rm -rf` deleting under it sees each entry once.
final class DirectorySnapshot: @unchecked Sendable {
    struct Entry {
        var name: String
        var item: Item? // nil for "." and ".." and for files still being copied in
        var node: InodeNode? // set for files still being copied in
        var isFolder: Bool
    }
    let entries: [Entry]
    /// Whether readdirplus may let the kernel cache these names (see `Bridge.cachesNames(below:)`).
    let cacheNames: Bool
    /// The folder listed (readdirplus names its entries' parent when it limits the kernel's inodes).
    var directoryIno: UInt64 = 0
    init(entries: [Entry], cacheNames: Bool = true) {
        self.entries = entries
        self.cacheNames = cacheNames
    }
}
