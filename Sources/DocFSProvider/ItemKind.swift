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
