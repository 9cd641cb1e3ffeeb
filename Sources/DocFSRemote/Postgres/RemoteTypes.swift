import Foundation
import DocFSProvider
import DocFSWire

/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=…&sslrootcert=FILE&sslcert=FILE&sslkey=FILE]`.
/// The password may also come from `PGPASSWORD`. `description` never shows the password.
///
/// TLS with libpq's words and meanings: `sslmode` `disable`, `allow`/`prefer` (TLS when the
/// server offers it, nothing verified), `require` (TLS or nothing; verified against
/// `sslrootcert` like `verify-ca` when one is given), `verify-ca` (the chain checked against
/// `sslrootcert`, or the system's CAs), `verify-full` (the chain and the host name). Without
/// `sslmode`, a loopback host is `prefer` and any other host `verify-full`: names, paths and the
/// password never travel in clear off this machine unless asked. `sslcert`/`sslkey`: a client
/// certificate.
package struct PostgresURL: Sendable, Equatable, CustomStringConvertible {
    package enum SSLMode: String, Sendable, Equatable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    package var host: String
    package var port: Int
    package var user: String
    package var password: String?
    package var database: String
    /// As given (nil: the default for the host, `effectiveSSLMode`).
    package var sslMode: SSLMode?
    package var sslRootCert: String?
    package var sslCert: String?
    package var sslKey: String?

    package init(
        host: String, port: Int = 5432, user: String, password: String? = nil, database: String,
        sslMode: SSLMode? = nil, sslRootCert: String? = nil
    ) {
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.sslMode = sslMode
        self.sslRootCert = sslRootCert
    }

    package init?(_ string: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let u = URLComponents(string: string), let scheme = u.scheme,
            scheme == "postgres" || scheme == "postgresql",
            let host = u.host, !host.isEmpty, let user = u.user, !user.isEmpty
        else { return nil }
        let database = String(u.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else { return nil }
        self.host = host
        self.port = u.port ?? 5432
        self.user = user
        self.password = u.password ?? environment["PGPASSWORD"]
        self.database = database
        for item in u.queryItems ?? [] {
            guard let value = item.value, !value.isEmpty else { return nil }
            switch item.name {
            case "sslmode":
                guard let mode = SSLMode(rawValue: value) else { return nil }
                sslMode = mode
            case "sslrootcert": sslRootCert = value
            case "sslcert": sslCert = value
            case "sslkey": sslKey = value
            default: return nil // a parameter this docfs would ignore is refused, not dropped
            }
        }
        if (sslCert == nil) != (sslKey == nil) { return nil }
    }

    /// Whether the host is this machine (127.0.0.0/8, ::1, localhost).
    package var isLoopback: Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// The mode the connection uses: as given, else `prefer` on loopback and `verify-full` elsewhere.
    package var effectiveSSLMode: SSLMode { sslMode ?? (isLoopback ? .prefer : .verifyFull) }

    /// The TLS parameters as a query (`?sslmode=…`), empty when none was given.
    package var tlsQuery: String {
        var items: [String] = []
        if let sslMode { items.append("sslmode=" + sslMode.rawValue) }
        if let sslRootCert { items.append("sslrootcert=" + sslRootCert) }
        if let sslCert { items.append("sslcert=" + sslCert) }
        if let sslKey { items.append("sslkey=" + sslKey) }
        return items.isEmpty ? "" : "?" + items.joined(separator: "&")
    }

    /// The URL without its password: what a store keeps (TLS settings included, no secret).
    package var withoutPassword: String { "postgres://\(user)@\(host):\(port)/\(database)" + tlsQuery }

    package var description: String {
        "postgres://\(user)\(password == nil ? "" : ":<hidden>")@\(host):\(port)/\(database)" + tlsQuery
    }
}

extension ServerItem {
    /// The kind the server's column names; a word other than its three reads as a file.
    static func serverKind(_ word: String) -> ItemKind {
        ItemKind(storedName: word).flatMap { $0.isReplicated ? $0 : nil } ?? .file
    }
}

/// A content version's object in the bucket.
package struct RemoteContent: Sendable, Equatable {
    package var key: String
    package var size: Int64
    /// SHA-256 (hex) of the object's bytes as the replica sent them: every download is checked
    /// against it (nil: an older replica's version, not checked).
    package var sha256: String?
    /// The replica that sent it ("HOST:STORE"; schema 8).
    package var replica: String?
    package init(key: String, size: Int64, sha256: String? = nil, replica: String? = nil) {
        self.key = key
        self.size = size
        self.sha256 = sha256
        self.replica = replica
    }
}

/// What an operation did: the item it touched (for a create, its new permanent id), the item's
/// versions after it, and the change log position it wrote. `replayed` is true when the
/// operation id had been applied before and nothing was done again.
package struct AppliedChange: Sendable, Equatable {
    package var itemID: Int64
    package var contentVersion: Int64
    package var metadataVersion: Int64
    /// The change log position: a replay's as logged; 0 for a change this call made on a
    /// server of schema 17 on, which gives positions as the call commits (`RemoteSchema+Positions`).
    package var position: Int64
    package var replayed: Bool
    /// The item's name after the operation (a create or move into a taken name got a suffix).
    package var name: String?

    package init(itemID: Int64, contentVersion: Int64, metadataVersion: Int64, position: Int64, replayed: Bool, name: String? = nil) {
        self.itemID = itemID
        self.contentVersion = contentVersion
        self.metadataVersion = metadataVersion
        self.position = position
        self.replayed = replayed
        self.name = name
    }
}

/// One entry of the change log. `position` is the sync anchor: ask for `changes(since:)` the
/// last position you applied.
package struct RemoteChange: Sendable, Equatable {
    package enum Kind: String, Sendable, Equatable {
        case create, content, move, delete, trash, untrash, attributes, layout
        /// A file's further name made, removed, renamed or moved (schema 12, `RemoteSchema+Links`).
        case link, unlink
        case moveName = "move_name"
    }
    package var position: Int64
    package var itemID: Int64
    package var kind: Kind
    package var operationID: UUID
    package var contentVersion: Int64
    package var metadataVersion: Int64
    package var atNs: Int64
}

package enum RemoteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Compare-and-swap on the content version failed: someone else wrote a newer version.
    case versionConflict(itemID: Int64, expected: Int64, current: Int64)
    case notFound(itemID: Int64)
    case nameCollision(parentID: Int64, name: String)
    case notEmpty(itemID: Int64)
    /// A move found the item no longer where the replica saw it: another replica moved it first.
    case movedElsewhere(itemID: Int64)
    /// The request cannot be applied as asked (parent not a directory, a move into itself, …).
    case invalid(String)
    /// The operation id was applied before as an operation of another kind.
    case operationReused(UUID, previousKind: String)
    /// The server's schema is newer than this docfs understands.
    case schemaTooNew(found: Int, supported: Int)
    /// The server's schema is older than this docfs needs (replicas never migrate: its owner
    /// runs `docfs remote setup`).
    case schemaTooOld(found: Int, needed: Int)
    /// The role lacks a privilege (SQLSTATE 42501): a replica role asked for an owner's work.
    case notPermitted(String)
    /// The server could not be reached or the connection broke: retry later.
    case unreachable(String)
    /// The server refused the login: report it, retrying will not help.
    case authentication(String)
    /// The server's layout refuses the item in that place (its trigger's check_violation).
    case refused(String)
    /// The server refused this change for a reason of its own that a retry will not mend (a
    /// trigger or a constraint it has and docfs does not know): the change's item is set aside.
    case rejected(String)
    /// Any other error the server reported (a retry may go through: a deadlock, a full disk, a
    /// statement cancelled, an internal error).
    case server(String)

    package var isRetryable: Bool {
        if case .unreachable = self { return true }
        return false
    }

    package var description: String {
        switch self {
        case let .versionConflict(id, expected, current):
            return "item \(id) is at content version \(current), not \(expected)"
        case let .notFound(id): return "no item \(id) on the server"
        case let .nameCollision(parent, name): return "item \(parent) already has a child named \"\(name)\""
        case let .notEmpty(id): return "directory \(id) is not empty"
        case let .movedElsewhere(id): return "item \(id) was moved or renamed on another replica first"
        case let .invalid(why): return why
        case let .operationReused(id, kind): return "operation \(id) was already applied as \(kind)"
        case let .schemaTooNew(found, supported):
            return "the server's docfs schema is version \(found); this docfs knows up to \(supported): upgrade docfs"
        case let .schemaTooOld(found, needed):
            return found == 0
                ? "the server has no docfs schema yet: its owner runs `docfs remote setup`"
                : "the server's docfs schema is version \(found); this docfs needs \(needed): its owner runs `docfs remote setup`"
        case let .notPermitted(why):
            return "PostgreSQL refused: \(why) (this role may not; the server's owner runs `docfs remote setup`)"
        case let .unreachable(why): return "PostgreSQL unreachable: \(why)"
        case let .authentication(why): return "PostgreSQL refused the login: \(why)"
        case let .refused(why): return why
        case let .rejected(why): return "PostgreSQL refused the change: \(why)"
        case let .server(why): return "PostgreSQL: \(why)"
        }
    }
}
