import Foundation
import Logging
import PostgresNIO
import DocFSWire

// What several replicas of one tree read besides the operations: items by identifier (a replica
// applying the change log), the first position the log still keeps. (The rules that keep their
// concurrent work, a taken name suffixed and a deleted folder brought back when a replica puts
// something in it, are the server's: `docfs_free_name`, `docfs_destination`.)
extension RemoteDatabase {
    /// The items with these identifiers, deleted ones included (a replica applies the deletion).
    package func items(_ ids: [Int64]) async throws -> [ServerItem] {
        guard !ids.isEmpty else { return [] }
        let columns = try await itemColumns()
        return try await mapped { [self] in
            let rows = try await client.query(
                "SELECT \(unescaped: columns) FROM docfs_items WHERE id = ANY(\(ids))", logger: logger)
            return try await Self.decodeItems(rows)
        }
    }

    /// The first change log position still kept (`docfs remote gc` trims older entries): a replica
    /// whose anchor is below `logStart - 1` has missed changes and rebuilds from a full listing.
    package func logStart() async throws -> Int64 {
        try await mapped { [self] in
            let rows = try await client.query("SELECT value FROM docfs_meta WHERE key = 'log_start'", logger: logger)
            for try await (value) in rows.decode(String.self) { return Int64(value) ?? 1 }
            return 1
        }
    }
}

extension RemoteDatabase {
    /// Every item's identifier, deleted ones included, but the root (a replica rebuilding).
    package func allItemIDs() async throws -> [Int64] {
        try await mapped { [self] in
            let rows = try await client.query("SELECT id FROM docfs_items WHERE parent_id IS NOT NULL ORDER BY id", logger: logger)
            var ids: [Int64] = []
            for try await (id) in rows.decode(Int64.self) { ids.append(id) }
            return ids
        }
    }
}
