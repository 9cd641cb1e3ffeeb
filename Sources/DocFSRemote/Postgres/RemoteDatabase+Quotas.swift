import Foundation
import Logging
import PostgresNIO

/// One replica role's quotas (schema 15, `docfs_quotas`) and what it uses of them now, as
/// `docfs remote replicas` shows them. A nil limit is none.
package struct ReplicaQuota: Sendable, Equatable, Codable {
    /// Upload intents the role may hold at once, and holds now.
    package var liveIntents: Int64?
    package var heldIntents: Int64
    /// Pack bytes the role may record in 24 hours, and recorded in the last 24 hours.
    package var bytesPerDay: Int64?
    package var bytesToday: Int64
    /// The limits are the role's own (false: the default row `*`'s).
    package var own: Bool
}

// The owner sets each replica role's quotas, or the default for every role without its own.
extension RemoteDatabase {
    /// The row that holds every replica role's quotas unless it has its own.
    package static let defaultQuotaRole = "*"

    /// Sets `role`'s quotas (`defaultQuotaRole`: every role without its own). A nil argument keeps
    /// that limit as it is; `.some(nil)` removes it (no limit).
    package func setQuota(role: String, liveIntents: Int64??, bytesPerDay: Int64??) async throws {
        if role != Self.defaultQuotaRole { try Self.checkRoleName(role) }
        for value in [liveIntents, bytesPerDay] {
            if case .some(.some(let n)) = value, n < 0 { throw RemoteError.invalid("a quota is 0 or more") }
        }
        let logger = self.logger
        try await mapped { [self] in
            try await client.withTransaction(logger: logger) { conn in
                // A role's own row starts from the default's limits.
                try await conn.perform(
                    """
                    INSERT INTO docfs_quotas (role, live_intents, bytes_per_day)
                    SELECT \(role), live_intents, bytes_per_day FROM docfs_quotas WHERE role = '*'
                    ON CONFLICT (role) DO NOTHING
                    """, logger: logger)
                try await conn.perform("INSERT INTO docfs_quotas (role) VALUES (\(role)) ON CONFLICT (role) DO NOTHING", logger: logger)
                if let liveIntents {
                    try await conn.perform("UPDATE docfs_quotas SET live_intents = \(liveIntents) WHERE role = \(role)", logger: logger)
                }
                if let bytesPerDay {
                    try await conn.perform("UPDATE docfs_quotas SET bytes_per_day = \(bytesPerDay) WHERE role = \(role)", logger: logger)
                }
            }
        }
    }

    /// Every role's quotas that has a row, the default's under `defaultQuotaRole`, and the usage
    /// of each of `roles`.
    package func quotas(of roles: [String]) async throws -> [String: ReplicaQuota] {
        let logger = self.logger
        return try await mapped { [self] in
            let rows = try await client.query(
                """
                WITH wanted AS (SELECT unnest(\(roles)::text[]) AS role UNION SELECT '*'),
                d AS (SELECT live_intents, bytes_per_day FROM docfs_quotas WHERE role = '*')
                SELECT w.role, coalesce(q.live_intents, CASE WHEN q.role IS NULL THEN d.live_intents END),
                       (SELECT count(*) FROM docfs_upload_intents u WHERE u.role = w.role),
                       coalesce(q.bytes_per_day, CASE WHEN q.role IS NULL THEN d.bytes_per_day END),
                       (SELECT coalesce(sum(p.size), 0)::bigint FROM docfs_packs p
                         WHERE p.role = w.role AND p.created_ns > \(unescaped: Self.serverNow) - 86400000000000),
                       q.role IS NOT NULL
                FROM wanted w LEFT JOIN docfs_quotas q ON q.role = w.role LEFT JOIN d ON true
                """, logger: logger)
            var out: [String: ReplicaQuota] = [:]
            for try await (role, live, held, bytes, today, own) in rows.decode((String, Int64?, Int64, Int64?, Int64, Bool).self) {
                out[role] = ReplicaQuota(liveIntents: live, heldIntents: held, bytesPerDay: bytes, bytesToday: today, own: own)
            }
            return out
        }
    }
}
