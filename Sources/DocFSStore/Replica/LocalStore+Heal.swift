import Foundation
import DocFSProvider

// Healing damaged blocks: which of the server's contents this replica holds here, byte for byte.
extension LocalStore {
    /// Of these items (server identifiers with the content key the server names), the ones whose
    /// current contents here are that key's (downloaded or written here, not evicted), with the
    /// path of their content file (a file kept in a segment gets one).
    package func heldContents(_ wanted: [(row: Int64, key: String)]) -> [(row: Int64, path: String)] {
        wanted.compactMap { want in
            let row = currentRow(want.row)
            let record = state.withLock { $0.record(row) }
            guard let record, record.item.kind == .file, record.item.isDownloaded, record.remoteKey == want.key,
                  let url = contentURL(of: Self.identifier(forRow: row)) else { return nil }
            return (row, url.path)
        }
    }
}
