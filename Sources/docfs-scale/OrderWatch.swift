import Foundation
import DocFSRemote

/// Checks, while a run goes on, that every client takes the server's changes in order and skips
/// none: a client's anchor (the change-log position it has applied up to) never goes back, and
/// every item created at or below that position is in its store then. The creates come from the
/// change log itself (read with a connection of the harness's own, as a psql would), not from
/// what the writers think they made.
final class OrderWatch: @unchecked Sendable {
    private let log: RemoteDatabase
    private let start: Int64
    /// The creates after `start`, in position order, as far as the log has been read.
    private(set) var creates: [(position: Int64, item: Int64)] = []
    private var readUpTo: Int64
    /// Change-log entries read (every kind): the operations the server committed.
    private(set) var entries = 0
    /// Per client: the index in `creates` of the first not checked yet, and its last anchor.
    private var checked: [Int]
    private var lastAnchor: [Int64]
    private(set) var skipped: [String] = []
    private(set) var wentBack: [String] = []

    init(log: RemoteDatabase, after start: Int64, clients: Int) {
        self.log = log
        self.start = start
        readUpTo = start
        checked = Array(repeating: 0, count: clients)
        lastAnchor = Array(repeating: start, count: clients)
    }

    /// Reads the change log on from where the last read ended.
    func readLog() async throws {
        while true {
            let page = try await log.changes(since: readUpTo, limit: 1000)
            guard let last = page.last else { return }
            for change in page where change.kind == .create { creates.append((change.position, change.itemID)) }
            readUpTo = last.position
            entries += page.count
        }
    }

    /// The last position read from the log.
    var latestRead: Int64 { readUpTo }

    /// One look at every client: its anchor first, then the creates at or below it.
    func sweep(_ clients: [HarnessClient]) {
        for client in clients {
            let i = client.index
            let anchor = client.anchor()
            if anchor < lastAnchor[i] {
                wentBack.append("client \(i): anchor \(anchor) after \(lastAnchor[i])")
            }
            lastAnchor[i] = max(lastAnchor[i], anchor)
            while checked[i] < creates.count, creates[checked[i]].position <= anchor {
                let create = creates[checked[i]]
                if !client.has(create.item) {
                    skipped.append("client \(i): anchor \(anchor) but item \(create.item) (position \(create.position)) missing")
                }
                checked[i] += 1
            }
        }
    }

    /// Clients whose anchor has reached `position` (every create up to it checked).
    func caughtUp(_ clients: [HarnessClient], to position: Int64) -> Int {
        clients.filter { lastAnchor[$0.index] >= position && checked[$0.index] == creates.count }.count
    }

    /// Per client, the creates up to the log's end it has not been seen to hold.
    func missing(_ clients: [HarnessClient]) -> Int {
        clients.reduce(0) { $0 + (creates.count - checked[$1.index]) }
    }
}
