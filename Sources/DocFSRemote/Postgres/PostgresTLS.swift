import Foundation
import NIOSSL
import PostgresNIO

// libpq's sslmode words as postgres-nio's TLS settings.
extension PostgresURL {
    /// The TLS configuration and whether TLS is required (nil: `disable`); throws when a
    /// certificate file cannot be read.
    func tlsConfiguration() throws -> (configuration: TLSConfiguration, required: Bool)? {
        let mode = effectiveSSLMode
        var tls = TLSConfiguration.makeClientConfiguration()
        switch mode {
        case .disable: return nil
        case .allow, .prefer: tls.certificateVerification = .none
        // libpq: with a root certificate given, `require` verifies the chain as `verify-ca` does.
        case .require: tls.certificateVerification = sslRootCert == nil ? .none : .noHostnameVerification
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let root = sslRootCert {
            guard FileManager.default.isReadableFile(atPath: root) else {
                throw RemoteError.invalid("sslrootcert \(root) cannot be read")
            }
            tls.trustRoots = .file(root)
        }
        if let cert = sslCert, let key = sslKey {
            do {
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) }
            } catch {
                throw RemoteError.invalid("sslcert \(cert) cannot be read: \(error)")
            }
            guard FileManager.default.isReadableFile(atPath: key) else { throw RemoteError.invalid("sslkey \(key) cannot be read") }
            tls.privateKey = .file(key)
        }
        return (tls, mode != .allow && mode != .prefer)
    }

    /// For one connection (`RemoteDatabase.probe`).
    func connectionTLS() throws -> PostgresConnection.Configuration.TLS {
        guard let (tls, required) = try tlsConfiguration() else { return .disable }
        let context = try NIOSSLContext(configuration: tls)
        return required ? .require(context) : .prefer(context)
    }

    /// For the pool.
    func clientTLS() throws -> PostgresClient.Configuration.TLS {
        guard let (tls, required) = try tlsConfiguration() else { return .disable }
        return required ? .require(tls) : .prefer(tls)
    }
}

extension RemoteDatabase {
    /// Whether this client's connection to the server is encrypted, as the server sees it.
    package func connectionIsEncrypted() async throws -> Bool {
        try await mapped { [self] in
            let rows = try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: logger)
            for try await (ssl) in rows.decode(Bool.self) { return ssl }
            return false
        }
    }
}
