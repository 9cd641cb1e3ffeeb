import DocFSProvider

/// One stored item: its public value plus what only the store needs.
struct Record: Sendable {
    var row: Int64
    /// The parent's row; nil for the root and the trash.
    var parent: Int64?
    var item: Item
    /// Folders: the capabilities of items created inside (nil: all).
    var contentsPolicy: Capabilities?
    /// Items in the trash: where they came from and under which name.
    var trashedFrom: Int64?
    var trashedName: String?
    /// A replica's file: the server's object holding these very contents (nil: none known, e.g.
    /// changed here and not uploaded yet). An evicted file is downloaded from it.
    var remoteKey: String?
    /// A name row (a hard link's second or later name): the row of the item it names. A name
    /// row has its own place (`parent`, `item.filename`) and nothing else of its own: readers
    /// see the named item under it (`TreeState.presented`).
    var linkOf: Int64?
    /// Set while loading when the record was mended and must be written back.
    var needsSave = false

    init(
        row: Int64, parent: Int64?, item: Item, contentsPolicy: Capabilities? = nil,
        trashedFrom: Int64? = nil, trashedName: String? = nil
    ) {
        self.row = row
        self.parent = parent
        self.item = item
        self.contentsPolicy = contentsPolicy
        self.trashedFrom = trashedFrom
        self.trashedName = trashedName
    }
}
