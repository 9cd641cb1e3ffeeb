import Glibc

/// An open file (what `fi->fh` points to).
final class OpenFile: @unchecked Sendable {
    let node: InodeNode
    /// Descriptor on the stored contents for read-only handles; -1 when reads go through the session.
    let readFD: Int32
    let writable: Bool

    init(node: InodeNode, readFD: Int32, writable: Bool) {
        self.node = node
        self.readFD = readFD
        self.writable = writable
    }
    deinit { if readFD >= 0 { close(readFD) } }
}
