import Foundation
import DocFSProvider

// Healing damaged blocks: which of the server's contents this replica holds here, byte for byte.
extension LocalStore {
    /// Of these items (server identifiers with the content key the server names), the ones whose
    /// contents are here (downloaded or written here, not evicted), with the path of their
    /// content file (a file kept in a segment gets one): those whose recorded key is that key
    /// first. A file whose recorded key is another (its completion lost to a crash, a copy kept
    /// under a key of its own) is offered too: the uploader sends only blocks whose hashes are
    /// the damaged ones, so bytes that differ send nothing.
    package func heldContents(_ wanted: [(row: Int64, key: String)]) -> [(row: Int64, path: String)] {
        wanted.compactMap { want in
            let row = currentRow(want.row)
            let record = state.withLock { $0.record(row) }
            guard let record, record.item.kind == .file, record.item.isDownloaded,
                  let url = contentURL(of: Self.identifier(forRow: row)) else { return nil }
            return (row, url.path)
        }
    }
}
