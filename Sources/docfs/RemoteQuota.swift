import ArgumentParser
import Foundation
import DocFSRemote

/// `docfs remote quota NAME`: the owner sets what one replica role (or, with `default`, every
/// role without quotas of its own) may hold and record; `docfs remote replicas` shows them.
struct RemoteQuota: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quota",
        abstract: "Set a replica role's quotas: upload intents held at once, pack bytes recorded per 24 hours.",
        discussion: """
            NAME `default` sets the quotas of every role without its own. A call past a quota is \
            refused (the replica retries later and says so in its log and docfs status). `none` \
            removes a limit. See docs/REMOTE.md, "Bounds and quotas".
            """)

    @OptionGroup var server: RemoteOptions

    @Argument(help: "The replica's role name, or `default`.")
    var name: String

    @Option(name: .customLong("live-intents"), help: ArgumentHelp("Upload intents the role may hold at once (or none).", valueName: "N"))
    var liveIntents: String?

    @Option(
        name: .customLong("bytes-per-day"),
        help: ArgumentHelp("Pack bytes the role may record in 24 hours: N, or N with K, M, G or T (or none).", valueName: "SIZE"))
    var bytesPerDay: String?

    /// `none` → no limit; `12`, `10G` → bytes (binary units).
    static func limit(_ text: String?, what: String) throws -> Int64?? {
        guard let text else { return nil }
        if text == "none" { return .some(nil) }
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = Substring(text)
        var scale: Int64 = 1
        if let last = text.last?.uppercased().first, let unit = units[last] { scale = unit; digits = digits.dropLast() }
        guard let n = Int64(digits), n >= 0, n <= Int64.max / scale else {
            throw ValidationError("\(what): \(text) is not a count (N, N with K/M/G/T, or none)")
        }
        return .some(n * scale)
    }

    func run() throws {
        let live = try Self.limit(liveIntents, what: "--live-intents")
        let bytes = try Self.limit(bytesPerDay, what: "--bytes-per-day")
        guard live != nil || bytes != nil else { throw ValidationError("give --live-intents or --bytes-per-day") }
        let role = name == "default" ? RemoteDatabase.defaultQuotaRole : name
        try ReplicaRoleCommand.withDatabase(server, "quota") {
            try await $0.setQuota(role: role, liveIntents: live, bytesPerDay: bytes)
        }
        print("docfs: quotas of \(name == "default" ? "every replica without its own" : name) set")
    }
}

/// A replica as `docfs remote replicas --json` prints it: its record and its quotas.
struct ReplicaListing: Encodable {
    var replica: ReplicaRecord
    var quota: DocFSRemote.ReplicaQuota?

    enum CodingKeys: String, CodingKey { case quota }

    func encode(to encoder: any Encoder) throws {
        try replica.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(quota, forKey: .quota)
    }

    /// `12 (20000)\t1.2 MiB (1 TiB)`: the intents column and the pack bytes column.
    static func usage(_ quota: DocFSRemote.ReplicaQuota?) -> String {
        guard let quota else { return "-\t-" }
        return "\(quota.heldIntents) (\(quota.liveIntents.map(String.init) ?? "none"))\t"
            + "\(Status.bytesText(quota.bytesToday)) (\(quota.bytesPerDay.map(Status.bytesText) ?? "none"))"
    }
}
