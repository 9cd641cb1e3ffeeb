import Foundation
import Logging
import PostgresNIO

extension RemoteDatabase {
    /// One connection made and closed, to say at once why a server cannot be used (refused,
    /// no such database, wrong password) where the pool would keep retrying until a timeout.
    package static func probe(_ url: PostgresURL, timeout: Duration = .seconds(10), logger: Logger = Logger(label: "docfs.postgres")) async throws {
        let configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user,
            password: url.password, database: url.database,
            tls: try url.connectionTLS())
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
                    try await connection.close()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return false
                }
                defer { group.cancelAll() }
                guard try await group.next() == true else {
                    throw RemoteError.unreachable("\(url.host):\(url.port) did not answer within \(timeout)")
                }
            }
        } catch let error as PSQLError where error.serverInfo == nil {
            // Connect-level failures: say which (refused, unknown host) rather than the bare code.
            let underlying = error.underlying.map { "\($0)" } ?? "\(error.code)"
            let mode = url.effectiveSSLMode.rawValue
            if error.code == .sslUnsupported {
                throw RemoteError.unreachable("\(url.host):\(url.port) does not offer TLS, which sslmode=\(mode) requires")
            }
            if underlying.contains("CERTIFICATE_VERIFY_FAILED") || underlying.contains("handshakeFailed") {
                let roots = url.sslRootCert.map { "sslrootcert=\($0)" } ?? "the system's CAs"
                throw RemoteError.unreachable(
                    "\(url.host):\(url.port): its TLS certificate was not accepted (sslmode=\(mode), \(roots)): \(underlying.contains("CERTIFICATE_VERIFY_FAILED") ? "CERTIFICATE_VERIFY_FAILED" : underlying)"
                )
            }
            throw RemoteError.unreachable("cannot connect to \(url.host):\(url.port): \(underlying)")
        } catch {
            throw map(error)
        }
    }
}

extension RemoteDatabase {
    /// Why calls find no answer, when the server refuses this role's login (a replica removed
    /// with `docfs remote remove-replica`, a password changed) or has no connection slot for it
    /// (max_connections or the role's connection limit reached): the pool keeps retrying its
    /// connections and a call only times out, so one connection of its own asks. Nil otherwise.
    package func loginRefusal() async -> RemoteError? {
        do {
            try await Self.probe(url, timeout: .seconds(5), logger: logger)
        } catch let error as RemoteError {
            switch error {
            case .authentication: return error
            case .unreachable(let message) where message.hasPrefix(Self.noConnectionSlot): return error
            default: break
            }
        } catch {}
        return nil
    }
}
