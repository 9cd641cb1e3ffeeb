import DocFS
import DocFSRemote

/// What `docfs --version`, `docfs status --json` and the metrics' `docfs_build_info` report.
enum BuildInfo {
    /// The release; raised with each one.
    static let version = "0.1.0"
    /// Written by the BuildCommit plugin before each build (Plugins/BuildCommit).
    static let commit = buildCommit
    /// The libfuse this process runs with (the shared library loaded, which may differ from the
    /// headers it was built against).
    static let libfuse = ProviderMount.libfuseVersion
    /// The server schema a replica speaks (RemoteSchema.latest).
    static let schema = RemoteSchema.latest

    static var text: String {
        "docfs \(version)\ncommit \(commit)\nlibfuse \(libfuse)\nserver schema \(schema)"
    }

    static var fields: [String: Any] {
        ["version": version, "commit": commit, "libfuse": libfuse, "schema": schema]
    }

    static var labels: [(String, String)] {
        [("version", version), ("commit", commit), ("libfuse", libfuse), ("schema", String(schema))]
    }
}
