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
                let state = info[.sqlState] ?? ""
                let message = info[.message] ?? "\(e)"
                if state.hasPrefix("28") { return RemoteError.authentication(message) }  // invalid authorization
                if state == "3D000" { return RemoteError.authentication(message) }       // no such database
                if state.hasPrefix("08") || state.hasPrefix("57P") { return RemoteError.unreachable(message) }
                if state == "23514", message.hasPrefix("the server's layout") { return RemoteError.refused(message) }
                if state == "42501" { return RemoteError.notPermitted(message) }  // insufficient_privilege
                // The manifest a version names was collected meanwhile: upload it again.
                if state == "DF001" { return RemoteError.server(message) }
                // Worth retrying: serialization failures and deadlocks (40), resources (53: a full
                // disk, memory), a lock not had or a statement cancelled, system and internal
                // errors, and schema errors (42: the whole server, not one change).
                let transient = ["40", "53", "58", "XX", "42"].contains(String(state.prefix(2))) || state == "55P03" || state == "57014"
                if transient || state.isEmpty { return RemoteError.server("\(message) (SQLSTATE \(state))") }
                return RemoteError.rejected("\(message) (SQLSTATE \(state))")
            }
            return RemoteError.unreachable("\(e.code)")
        default:
            return RemoteError.unreachable("\(error)")
        }
    }
}
