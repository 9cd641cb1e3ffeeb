import Foundation
import Logging
import PostgresNIO

extension RemoteDatabase {
    /// The `application_name` of the pool's connections and of the listening one: what
    /// `pg_stat_activity` (and pgbouncer's `SHOW CLIENTS`) names a replica's sessions by.
    package static let poolApplicationName = "docfs"
    package static let listenApplicationName = "docfs listen"

    /// LISTENs on `docfs_changes` on a connection of its own, to `listenURL`, outside the pool
    /// (a LISTEN holds its session for as long as `body` runs: a pooled connection would be one
    /// fewer for the calls, and a pgbouncer in transaction pooling cannot carry it at all); each
    /// element is the change log position a committed change wrote. The connection is closed
    /// however `body` ends.
    package func withChangeNotifications<T: Sendable>(
        _ body: (AsyncCompactMapSequence<PostgresNotificationSequence, Int64>) async throws -> T
    ) async throws -> T {
        let url = listenURL
        do {
            var configuration = PostgresConnection.Configuration(
                host: url.host, port: url.port, username: url.user,
                password: url.password, database: url.database,
                tls: try url.connectionTLS())
            configuration.options.connectTimeout = .seconds(10)
            configuration.options.additionalStartupParameters = [("application_name", Self.listenApplicationName)]
            let logger = self.logger
            // The connect deadline covers the start-up exchange too: a server that accepts and
            // never answers fails this attempt, and the follower tries again later.
            let connection = try await PostgresConnection.connect(
                configuration: configuration, id: Int.random(in: 1 ... .max),
                logger: logger)
            do {
                let result = try await connection.listen(on: Self.notificationChannel) { notifications in
                    try await body(notifications.compactMap { Int64($0.payload) })
                }
                try? await connection.close()
                return result
            } catch {
                try? await connection.close()
                throw error
            }
        } catch {
            throw Self.map(error)
        }
    }
}
