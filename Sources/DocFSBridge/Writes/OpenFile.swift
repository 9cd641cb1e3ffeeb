import Glibc
import DocFSProvider

/// An open file (what `fi->fh` points to).
final class OpenFile: @unchecked Sendable {
    let node: InodeNode
    /// Descriptor on the stored contents for read-only handles; -1 when reads go through the session.
    let readFD: Int32
    let writable: Bool
    /// Contents still downloading: reads wait for their range. nil for contents all here.
    let arrival: ContentArrival?
    /// The item a read-only handle was opened on, told to the provider at release.
    let reading: ItemIdentifier?
    /// A small file read in place from a larger one (`StoredSliceProvider.openStoredSlice`): where
    /// its bytes are in `readFD`. nil: `readFD` is the file's own.
    let window: Range<Int64>?
    /// Read by the kernel from its backing file (`Passthrough`): released there too.
    var passthrough = false

    init(
        node: InodeNode, readFD: Int32, writable: Bool, arrival: ContentArrival? = nil, reading: ItemIdentifier? = nil,
        window: Range<Int64>? = nil
    ) {
        self.window = window
        self.node = node
        self.readFD = readFD
        self.writable = writable
        self.arrival = arrival
        self.reading = reading
    }
    deinit { if readFD >= 0 { close(readFD) } }
}
