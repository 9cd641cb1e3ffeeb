import Foundation

// The writers' lock as the owner's own transactions (gc's trims) take it: the row of
// `docfs_writers` since schema 14 (`RemoteSchema+Guards`), the advisory key on an older server.
extension RemoteDatabase {
    func writersLockQuery() async throws -> String {
        try await schemaVersion() >= RemoteSchema.guardsVersion
            ? RemoteSchema.writersLockQuery : "SELECT pg_advisory_xact_lock(\(Self.writeLock))"
    }
}
