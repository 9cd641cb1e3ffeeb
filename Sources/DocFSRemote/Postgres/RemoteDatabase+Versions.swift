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
    /// The replica that sent it ("HOST:STORE", as it said; nil before schema 8).
    package var replica: String?
    /// The login role that sent it, as the server knew it (nil before schema 11).
    package var role: String? = nil
}

extension RemoteDatabase {
    /// A file's content versions the server remembers, oldest first.
    package func versions(of itemID: Int64) async throws -> [RemoteVersion] {
        try await mapped { [self] in
            let rows = try await client.query(
                """
                SELECT content_version, created_ns, size, content_key, collected_ns IS NOT NULL, to_jsonb(v) ->> 'replica',
                       to_jsonb(v) ->> 'role'
                FROM docfs_versions v WHERE item_id = \(itemID) ORDER BY content_version
                """, logger: logger)
            var out: [RemoteVersion] = []
            for try await (number, created, size, key, collected, replica, role)
                in rows.decode((Int64, Int64, Int64, String?, Bool, String?, String?).self)
            {
                out.append(
                    RemoteVersion(
                        number: number, createdNs: created, size: size, key: key, collected: collected,
                        replica: replica, role: role))
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
