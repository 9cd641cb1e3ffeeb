/// What kind of node an item is in the tree.
public enum ItemKind: UInt8, Sendable, Hashable {
    case file = 0
    case folder = 1
    case symlink = 2
    /// A named pipe (mkfifo): no contents, never a document.
    case fifo = 3
    /// A unix socket's name (bind): no contents, never a document.
    case socket = 4
    /// A character device node (mknod): inert on the `nodev` mount, its numbers in
    /// `Item.deviceNumber`.
    case characterDevice = 5
    /// A block device node (mknod), as inert as a character device.
    case blockDevice = 6

    /// FIFOs, sockets and device nodes: items that only name a kernel object, with no stored
    /// contents.
    public var isSpecial: Bool { self == .fifo || self == .socket || isDevice }
    /// Character and block device nodes.
    public var isDevice: Bool { self == .characterDevice || self == .blockDevice }
}

/// The kind as a word: what a replica's server keeps in its `kind` column ("file", "directory",
/// "symlink") and its outbox entries carry (JSON in the store's SQLite). Both are stored, so the
/// words never change (`ItemKindEncodingTests`); the raw value is what the store's `items` table keeps.
extension ItemKind: Codable {
    public var storedName: String {
        switch self {
        case .file: return "file"
        case .folder: return "directory"
        case .symlink: return "symlink"
        case .fifo: return "fifo"
        case .socket: return "socket"
        case .characterDevice: return "characterDevice"
        case .blockDevice: return "blockDevice"
        }
    }

    public init?(storedName: String) {
        switch storedName {
        case "file": self = .file
        case "directory": self = .folder
        case "symlink": self = .symlink
        case "fifo": self = .fifo
        case "socket": self = .socket
        case "characterDevice": self = .characterDevice
        case "blockDevice": self = .blockDevice
        default: return nil
        }
    }

    /// Files, folders and symbolic links: what a replica sends its server (which keeps no FIFOs,
    /// sockets or device nodes).
    public var isReplicated: Bool { self == .file || self == .folder || self == .symlink }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let word = try container.decode(String.self)
        guard let kind = ItemKind(storedName: word) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "\"\(word)\" is not a kind of item")
        }
        self = kind
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(storedName)
    }
}
