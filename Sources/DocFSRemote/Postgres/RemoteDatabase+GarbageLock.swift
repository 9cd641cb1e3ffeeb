import Foundation
import Logging
import PostgresNIO

/// What a `docfs remote gc` run holds for its whole length: the `gc` row of `docfs_locks` (schema
/// 14; an advisory key before, which any role could take) in a transaction of a connection of its
/// own, so two runs never decide at once; a run that dies (kill -9, a cut connection) lets go
/// with its session.
package final class GarbageLock: Sendable {
    let connection: PostgresConnection
    let timeout: Duration
    init(_ connection: PostgresConnection, timeout: Duration) {
        self.connection = connection
        self.timeout = timeout
    }
    /// Closes the session (its transaction, and the lock, end with it), waiting at most `timeout`:
    /// a link cut mid-close leaves the server to end the session itself.
    package func release() async {
        let connection = self.connection
        _ = try? await withDeadline(timeout, timedOut: { RemoteError.unreachable("the gc lock's session did not close") }) {
            try await connection.close()
        }
    }
}

extension RemoteDatabase {
    /// The advisory lock key of gc runs before schema 14 (beside `writeLock` and `migrationLock`).
    package static let garbageLockKey: Int64 = 0x646f_6366_7303

    /// The gc lock, or nil when another run holds it (asked, never waited for).
    package func takeGarbageLock() async throws -> GarbageLock? {
        do {
            let connection = try await connectAlone()
            let lock = GarbageLock(connection, timeout: operationTimeout)
            let logger = self.logger
            let taken: Bool
            do {
                let guards = try await schemaVersion() >= RemoteSchema.guardsVersion
                // Asked, never waited for (SKIP LOCKED, a try lock): bounded like every call.
                taken = try await withDeadline(operationTimeout, timedOut: { RemoteError.unreachable("no answer within \(self.operationTimeout)") }) {
                    var taken = false
                    if guards {
                        try await connection.perform("BEGIN", logger: logger)
                        let rows = try await connection.query(PostgresQuery(unsafeSQL: RemoteSchema.garbageLockQuery), logger: logger)
                        for try await (n) in rows.decode(Int64.self) { taken = n == 1 }
                    } else {
                        let rows = try await connection.query("SELECT pg_try_advisory_lock(\(Self.garbageLockKey))", logger: logger)
                        for try await (got) in rows.decode(Bool.self) { taken = got }
                    }
                    return taken
                }
            } catch {
                await lock.release()
                throw error
            }
            guard taken else {
                await lock.release()
                return nil
            }
            return lock
        } catch {
            throw Self.map(error)
        }
    }
}

extension RemoteDatabase {
    /// A connection of its own, outside the pool: for what holds a session (a batch's
    /// transaction, gc's lock). The caller closes it.
    func connectAlone() async throws -> PostgresConnection {
        let configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user,
            password: url.password, database: url.database,
            tls: try url.connectionTLS())
        let logger = self.logger
        return try await withDeadline(operationTimeout, timedOut: { RemoteError.unreachable("no connection within \(self.operationTimeout)") }) {
            try await PostgresConnection.connect(configuration: configuration, id: Int.random(in: 1 ... .max), logger: logger)
        }
    }
}
