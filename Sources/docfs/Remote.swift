import ArgumentParser
import Foundation

/// `docfs remote …`: work on the server a replica belongs to, rather than on one mount.
struct Remote: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Work on a replica's server (PostgreSQL and the bucket).",
        subcommands: [
            RemoteSetupCommand.self, RemoteAddReplica.self, RemoteReplicas.self, RemoteRemoveReplica.self, RemoteQuota.self,
            RemoteGC.self, RemoteCheck.self,
        ])
}
