import Foundation
import Logging
import DocFSRemote
import DocFSReplica
import DocFSStore

/// N clients of one tree in this process. The first store is made by `docfs init --remote`'s own
/// code (`ReplicaBootstrap`, against `--remote`); the others are copies of its folder (what init
/// makes of an empty tree, without N round trips of init), each opened and synced on its own.
final class HarnessFleet: @unchecked Sendable {
    let clients: [HarnessClient]
    /// Stores that could not be opened or given an engine, with the first reason.
    let unopened: Int
    let firstFailure: String?

    private init(clients: [HarnessClient], unopened: Int, firstFailure: String?) {
        self.clients = clients
        self.unopened = unopened
        self.firstFailure = firstFailure
    }

    static func make(
        count: Int, work: URL, link: RemoteLink, bootstrap: ReplicaConfiguration, engines: ReplicaConfiguration,
        logger: Logger
    ) async throws -> HarnessFleet {
        let first = work.appendingPathComponent("client0")
        _ = try await ReplicaBootstrap.initialize(store: first, link: link, configuration: bootstrap, layout: nil, logger: logger)
        let folders = (0..<count).map { work.appendingPathComponent("client\($0)") }
        for folder in folders.dropFirst() { try FileManager.default.copyItem(at: first, to: folder) }
        // Opened a few at a time: each open reads its database and cleans its folder.
        let opened = UnsafeOpened(count)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            do {
                opened.set(index, .success(try HarnessClient(index: index, folder: folders[index], configuration: engines, logger: logger)))
            } catch {
                opened.set(index, .failure(error))
            }
        }
        var clients: [HarnessClient] = []
        var unopened = 0
        var firstFailure: String?
        for result in opened.results {
            switch result {
            case .success(let client): clients.append(client)
            case .failure(let error):
                unopened += 1
                if firstFailure == nil { firstFailure = "\(error)" }
            case nil: unopened += 1
            }
        }
        return HarnessFleet(clients: clients, unopened: unopened, firstFailure: firstFailure)
    }

    /// Starts the engines `wave` at a time, each wave once every engine in it has finished its
    /// first pass (idle, or an error reported) or after `timeout` seconds: a thousand replicas do
    /// not all start in one second, and a thousand logins at once through one pgbouncer (SCRAM
    /// each) keep every call past its answer timeout.
    func start(wave: Int, timeout: Double) async {
        var next = 0
        while next < clients.count {
            let group = clients[next..<min(next + wave, clients.count)]
            for client in group { client.start() }
            let began = ContinuousClock.now
            while elapsed(since: began) < timeout, group.contains(where: { !$0.settled }) {
                try? await Task.sleep(for: .milliseconds(20))
            }
            next += group.count
        }
    }

    func stop() async {
        await withTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { await client.stop() } }
        }
    }

    /// Clients whose engine's last call found no server (a connection refused or not answered).
    var offline: Int { clients.filter { !$0.online }.count }
}

/// Results filled in from concurrentPerform's threads, one slot each.
private final class UnsafeOpened: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var results: [Result<HarnessClient, any Error>?]
    init(_ count: Int) { results = Array(repeating: nil, count: count) }
    func set(_ index: Int, _ result: Result<HarnessClient, any Error>) {
        lock.lock()
        results[index] = result
        lock.unlock()
    }
}
