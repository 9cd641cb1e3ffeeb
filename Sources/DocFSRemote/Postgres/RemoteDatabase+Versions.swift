import Foundation
import Logging
import PostgresNIO

/// One content version of a file on the server (`docfs versions`).
package struct RemoteVersion: Sendable, Equatable, Codable {
    package var number: Int64
    package var createdNs: Int64
    package var size: Int64
    package var key: String?
    /// `docfs remote gc` removed its object: listed, no longer restorable.
    package var collected: Bool
    /// The replica that sent it ("HOST:STORE"; nil before schema 8).
    package var replica: String?
}

extension RemoteDatabase {
    /// A file's content versions the server remembers, oldest first.
    package func versions(of itemID: Int64) async throws -> [RemoteVersion] {
        try await mapped { [self] in
            let rows = try await client.query("""
                SELECT content_version, created_ns, size, content_key, collected_ns IS NOT NULL, to_jsonb(v) ->> 'replica'
                FROM docfs_versions v WHERE item_id = \(itemID) ORDER BY content_version
                """, logger: logger)
            var out: [RemoteVersion] = []
            for try await (number, created, size, key, collected, replica) in rows.decode((Int64, Int64, Int64, String?, Bool, String?).self) {
                out.append(RemoteVersion(number: number, createdNs: created, size: size, key: key, collected: collected, replica: replica))
            }
            return out
        }
    }
}

extension RemoteDatabase {
    /// The SHA-256 the replica that uploaded `key` recorded (nil: not recorded, an older replica's).
    package func expectedSHA256(key: String) async throws -> String? {
        try await mapped { [self] in
            let rows = try await client.query(
                "SELECT sha256 FROM docfs_versions WHERE content_key = \(key) AND sha256 IS NOT NULL LIMIT 1", logger: logger)
            for try await (hex) in rows.decode(String.self) { return hex }
            return nil
        }
    }
}

extension RemoteDatabase {
    /// A content version's row. The SHA-256 and replica columns are named only when there is one
    /// to record, so that the same code writes to a server set up before schema 7 or 8 (a test of
    /// an older one).
    static func insertVersion(_ itemID: Int64, _ version: Int64, _ content: RemoteContent?, now: String,
                              conn: PostgresConnection, logger: Logger) async throws {
        switch (content?.sha256, content?.replica) {
        case (let sha256?, let replica?):
            try await conn.query("""
                INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, sha256, replica)
                VALUES (\(itemID), \(version), \(content?.key), \(content?.size ?? 0), \(unescaped: now), \(sha256), \(replica))
                """, logger: logger)
        case (let sha256?, nil):
            try await conn.query("""
                INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, sha256)
                VALUES (\(itemID), \(version), \(content?.key), \(content?.size ?? 0), \(unescaped: now), \(sha256))
                """, logger: logger)
        case (nil, let replica?):
            try await conn.query("""
                INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns, replica)
                VALUES (\(itemID), \(version), \(content?.key), \(content?.size ?? 0), \(unescaped: now), \(replica))
                """, logger: logger)
        case (nil, nil):
            try await conn.query("""
                INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns)
                VALUES (\(itemID), \(version), \(content?.key), \(content?.size ?? 0), \(unescaped: now))
                """, logger: logger)
        }
    }
}
