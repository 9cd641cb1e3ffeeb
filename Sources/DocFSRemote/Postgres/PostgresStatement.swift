import Logging
import PostgresNIO

// A statement whose answer nobody reads. postgres-nio hands back the rows once their
// description arrives; an error the server raises after that (a function's RAISE: a refused
// intent, a quota, a pack another replica's) reaches only a reader of the rows, and a caller
// that drops them never hears of it. `perform` reads the answer to its end, so the error is
// thrown where the statement was sent.
extension PostgresClient {
    func perform(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}

extension PostgresConnection {
    func perform(_ query: PostgresQuery, logger: Logger) async throws {
        for try await _ in try await self.query(query, logger: logger) {}
    }
}
