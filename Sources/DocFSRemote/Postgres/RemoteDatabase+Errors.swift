import Foundation
import PostgresNIO

// PostgreSQL's errors as the replica sorts them (`RemoteError`): unreachable, refused login,
// worth retrying (server), or refused for good (rejected).
extension RemoteDatabase {
    static func map(_ error: any Error) -> any Error {
        switch error {
        case is RemoteError, is CancellationError:
            return error
        case let e as PostgresTransactionError:
            if let inner = e.closureError ?? e.beginError ?? e.commitError { return map(inner) }
            return RemoteError.server("\(e)")
        case let e as PSQLError:
            if let info = e.serverInfo {
                return classify(state: info[.sqlState] ?? "", message: info[.message] ?? "\(e)")
            }
            return RemoteError.unreachable("\(e.code)")
        default:
            return RemoteError.unreachable("\(error)")
        }
    }

    /// A SQLSTATE and its message, sorted.
    /// How a refused connection for want of a slot begins (`loginRefusal` looks for it).
    static let noConnectionSlot = "the server has no connection slot for this role"

    static func classify(state: String, message: String) -> RemoteError {
        if state.hasPrefix("28") { return .authentication(message) } // invalid authorization
        if state == "3D000" { return .authentication(message) } // no such database
        if state.hasPrefix("08") || state.hasPrefix("57P") { return .unreachable(message) }
        // too_many_connections: max_connections, or the role's or database's CONNECTION LIMIT,
        // reached. No different from no server (work goes on offline), said as what it is.
        if state == "53300" { return .unreachable("\(noConnectionSlot): \(message)") }
        if state == "23514", message.hasPrefix("the server's layout") { return .refused(message) }
        if state == "42501" { return .notPermitted(message) } // insufficient_privilege
        // The manifest a version names, or a pack's intent, was collected meanwhile: upload again.
        if state == "DF001" { return .server(message) }
        // Worth retrying: serialization failures and deadlocks (40), resources (53: a full
        // disk, memory), a lock not had or a statement cancelled, system and internal
        // errors, and schema errors (42: the whole server, not one change).
        let transient = ["40", "53", "58", "XX", "42"].contains(String(state.prefix(2))) || state == "55P03" || state == "57014"
        if transient || state.isEmpty { return .server("\(message) (SQLSTATE \(state))") }
        return .rejected("\(message) (SQLSTATE \(state))")
    }
}
