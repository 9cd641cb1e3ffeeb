import Foundation
import Logging
import PostgresNIO
import DocFSProvider

// What several replicas of one tree need from the server besides the operations: reading items by
// identifier (a replica applying the change log), the first position the log still keeps, and the
// two rules that keep concurrent work: a name taken by someone else's item gets a suffix, and an
// item or folder deleted elsewhere comes back when a replica still puts something in it.
extension RemoteDatabase {
    /// The items with these identifiers, deleted ones included (a replica applies the deletion).
    package func items(_ ids: [Int64]) async throws -> [RemoteItem] {
        guard !ids.isEmpty else { return [] }
        return try await mapped { [self] in
            let rows = try await client.query(
                "SELECT \(unescaped: Self.itemColumns) FROM docfs_items WHERE id = ANY(\(ids))", logger: logger)
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

    /// `name`, or the first of "BASE 2.EXT", "BASE 3.EXT", … that no live item in the folder has,
    /// each cut to 255 bytes whole (`ItemNames.numbered`, the local store's rule). Candidates are
    /// asked for by name, a batch at a time: a cut base is no prefix to search by.
    static func freeName(_ name: String, isFolder: Bool, parentID: Int64, except: Int64?,
                         conn: PostgresConnection, logger: Logger) async throws -> String {
        var counter = 2
        var candidates = [name]
        while true {
            var taken: Set<String> = []
            let rows = try await conn.query("""
                SELECT id, name FROM docfs_items
                WHERE parent_id = \(parentID) AND NOT deleted AND trashed_ns IS NULL AND name = ANY(\(candidates))
                """, logger: logger)
            for try await (id, other) in rows.decode((Int64, String).self) where id != except { taken.insert(other) }
            if let free = candidates.first(where: { !taken.contains($0) }) { return free }
            candidates = (counter..<counter + 32).map { ItemNames.numbered(name, $0, isFolder: isFolder) }
            counter += 32
        }
    }

    /// Brings a deleted folder (and its deleted ancestors) back, each under its old name or a
    /// free one, logging each as a change: a replica put something in it after another deleted it.
    static func resurrectFolder(_ id: Int64, operationID: UUID, conn: PostgresConnection, logger: Logger) async throws {
        var chain: [(id: Int64, parent: Int64?, name: String)] = []
        var cursor: Int64? = id
        while let current = cursor {
            let rows = try await conn.query(
                "SELECT parent_id, name, deleted, kind FROM docfs_items WHERE id = \(current) FOR UPDATE", logger: logger)
            var next: Int64?
            var found = false
            for try await (parent, name, deleted, kind) in rows.decode((Int64?, String, Bool, String).self) {
                found = true
                guard deleted else { break }
                guard kind == "directory" else { throw RemoteError.invalid("item \(current) is not a directory") }
                chain.append((current, parent, name))
                next = parent
            }
            guard found else { throw RemoteError.notFound(itemID: current) }
            cursor = next
        }
        for link in chain.reversed() {
            guard let parent = link.parent else { continue }
            let name = try await freeName(link.name, isFolder: true, parentID: parent, except: link.id, conn: conn, logger: logger)
            let versions = try await updateReturningVersions(conn: conn, logger: logger, """
                UPDATE docfs_items SET deleted = false, trashed_ns = NULL, name = \(name),
                       metadata_version = metadata_version + 1, changed_ns = \(unescaped: Self.serverNow)
                WHERE id = \(link.id) RETURNING content_version, metadata_version
                """)
            try await conn.query("""
                INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns)
                VALUES (\(link.id), 'create', \(operationID), \(versions.0), \(versions.1), \(unescaped: Self.serverNow))
                """, logger: logger)
        }
    }

    /// The folder a replica puts something into: alive (brought back if it was deleted) and a folder.
    static func destinationFolder(_ id: Int64, operationID: UUID, conn: PostgresConnection, logger: Logger) async throws {
        // The usual case in one round trip: a live folder, locked.
        let rows = try await conn.query("SELECT kind, deleted FROM docfs_items WHERE id = \(id) FOR UPDATE", logger: logger)
        for try await (kind, deleted) in rows.decode((String, Bool).self) where kind == "directory" && !deleted { return }
        try await resurrectFolder(id, operationID: operationID, conn: conn, logger: logger)
        let parent = try await liveItem(id, conn: conn, logger: logger)
        guard parent.kind == "directory" else { throw RemoteError.invalid("item \(id) is not a directory") }
    }

    static func currentName(_ id: Int64, conn: PostgresConnection, logger: Logger) async throws -> String? {
        let rows = try await conn.query("SELECT name FROM docfs_items WHERE id = \(id)", logger: logger)
        for try await (name) in rows.decode(String.self) { return name }
        return nil
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
