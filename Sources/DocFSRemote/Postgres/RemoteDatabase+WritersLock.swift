import Foundation
import Logging
import PostgresNIO

// The owner's locks, none of which a replica can take (`RemoteSchema+Guards`): the writers' lock
// as gc's trims take it (a row of `docfs_locks` since schema 14, the advisory key on an older
// server), and the migrations' lock.
extension RemoteDatabase {
    /// Serializes set-ups and add-replica: a lock on `docfs_schema_migrations` (SHARE ROW
    /// EXCLUSIVE, which needs a write privilege replicas lack; their reads do not conflict with
    /// it). Only on a database without that table yet, where no replica can log in, the
    /// migrations' advisory key.
    static func lockMigrations(_ conn: PostgresConnection, logger: Logger) async throws {
        var exists = false
        for try await (v) in try await conn.query(
            "SELECT to_regclass('docfs_schema_migrations') IS NOT NULL",
            logger: logger
        ).decode(Bool.self) { exists = v }
        if exists {
            try await conn.perform("LOCK TABLE docfs_schema_migrations IN SHARE ROW EXCLUSIVE MODE", logger: logger)
        } else {
            try await conn.perform("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
        }
    }

    /// What gc's trims take so that no writer runs meanwhile: `docfs_locks` in SHARE mode since
    /// schema 17 (writers share it; `RemoteSchema+Positions`), the writers' row before.
    func writersLockQuery() async throws -> String {
        let version = try await schemaVersion()
        if version >= RemoteSchema.positionsVersion { return RemoteSchema.trimsLockQuery }
        return version >= RemoteSchema.guardsVersion
            ? RemoteSchema.writersLockQuery : "SELECT pg_advisory_xact_lock(\(Self.writeLock))"
    }
}
