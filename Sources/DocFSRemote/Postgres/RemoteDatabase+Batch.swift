import Foundation
import Logging
import PostgresNIO
import Synchronization

/// A transaction several operations share (`RemoteDatabase.batched`): the write lock taken
/// once, one commit (one WAL flush) for a whole chunk of the outbox instead of one per entry.
/// Each operation runs inside a savepoint, so one the server refuses (a conflict, a name it will
/// not take) is rolled back alone and the others stay, exactly as if each had its own
/// transaction.
///
/// The batch has a connection of its own (not the pool's: every wait on it has a deadline, and a
/// connection whose answer is late is closed, which ends its transaction on the server), and
/// asks the server to end its session if it sits in a transaction without a word for a minute
/// (a replica stopped or cut off mid-batch never holds the writers' lock for long).
package final class OperationBatch: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    let timeout: Duration
    /// A query failed in a way a savepoint does not undo (the connection broke, a timeout):
    /// nothing more goes into this transaction, and it is rolled back.
    private let broken = Mutex<(any Error)?>(nil)

    static let lockTimeout: Duration = .seconds(30)

    init(connection: PostgresConnection, logger: Logger, timeout: Duration) {
        self.connection = connection
        self.logger = logger
        self.timeout = timeout
    }

    /// `sql` on the batch's connection, within `limit` (else the connection is closed).
    func run(_ sql: String, within limit: Duration? = nil) async throws {
        let (connection, logger) = (self.connection, self.logger)
        try await guarded(limit ?? timeout) { _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
    }

    private func guarded<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        if let failure = broken.withLock({ $0 }) { throw failure }
        do {
            return try await withDeadline(limit, timedOut: { RemoteError.unreachable("no answer within \(limit)") }, body)
        } catch {
            if case RemoteError.unreachable = error { await breakOff(error) }
            throw error
        }
    }

    /// One operation in a savepoint: undone alone when it fails.
    func savepoint<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await run("SAVEPOINT docfs_operation")
        let connection = self.connection
        do {
            let result = try await guarded(timeout) { try await body(connection) }
            try await run("RELEASE SAVEPOINT docfs_operation")
            return result
        } catch {
            if broken.withLock({ $0 }) == nil {
                do { try await run("ROLLBACK TO SAVEPOINT docfs_operation") } catch { await breakOff(error) }
            }
            throw error
        }
    }

    func begin() async throws {
        try await run("BEGIN")
        // The other replicas' batches hold the lock for a chunk at most.
        try await run("SELECT pg_advisory_xact_lock(\(RemoteDatabase.writeLock))", within: Self.lockTimeout)
    }

    func commit() async throws {
        try await run("COMMIT")
    }

    /// Closed: the server rolls back what was not committed.
    func breakOff(_ error: any Error) async {
        broken.withLock { if $0 == nil { $0 = error } }
        try? await connection.close()
    }
}

extension RemoteDatabase {
    /// Runs `body` with every operation it applies through this database object (`createItem`,
    /// `newContentVersion`, …) in one transaction, committed when it returns (rolled back when it
    /// throws). Operations keep their own answers and errors; what the server decided is only
    /// committed at the end, so a caller acts on it locally after `batched` returned, or after
    /// `commitBatch()`. Reads (`item`, …) go through the pool and see what is committed.
    package func batched<T>(_ body: () async throws -> T) async throws -> T {
        let batch: OperationBatch
        do {
            batch = try await openBatch()
        } catch {
            throw Self.map(error)
        }
        activeBatch.withLock { $0 = batch }
        do {
            let result = try await body()
            activeBatch.withLock { $0 = nil }
            try await batch.commit()
            try? await batch.connection.close()
            return result
        } catch {
            activeBatch.withLock { $0 = nil }
            await batch.breakOff(error)
            throw Self.map(error)
        }
    }

    /// Commits what the running batch applied so far and goes on in a new transaction: before
    /// the caller acts locally on an answer (a conflicted copy made here) or reads what it wrote.
    package func commitBatch() async throws {
        guard let batch = activeBatch.withLock({ $0 }) else { return }
        do {
            try await batch.commit()
            try await batch.begin()
        } catch {
            throw Self.map(error)
        }
    }

    /// A connection of its own, outside the pool: for what holds a session (a batch's
    /// transaction, gc's lock). The caller closes it.
    func connectAlone() async throws -> PostgresConnection {
        let configuration = PostgresConnection.Configuration(host: url.host, port: url.port, username: url.user,
                                                             password: url.password, database: url.database,
                                                             tls: try url.connectionTLS())
        let logger = self.logger
        return try await withDeadline(operationTimeout, timedOut: { RemoteError.unreachable("no connection within \(self.operationTimeout)") }) {
            try await PostgresConnection.connect(configuration: configuration, id: Int.random(in: 1 ... .max), logger: logger)
        }
    }

    private func openBatch() async throws -> OperationBatch {
        let logger = self.logger
        let connection = try await connectAlone()
        let batch = OperationBatch(connection: connection, logger: logger, timeout: operationTimeout)
        do {
            // A replica stopped or cut off mid-batch: the server ends its session (and its hold
            // on the writers' lock) after a minute.
            try await batch.run("SET idle_in_transaction_session_timeout = '60s'")
            try await batch.begin()
        } catch {
            await batch.breakOff(error)
            throw error
        }
        return batch
    }
}
