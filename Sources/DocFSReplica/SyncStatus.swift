import Foundation

/// What `docfs status` shows (`user.docfs.status` on the mount's root, as JSON). The first four
/// field names are a promise to scripts: `online`, `pending`, `pendingBytes`, `lastError`.
public struct SyncStatus: Codable, Sendable, Equatable {
    /// The last request to the server got an answer (false: unreachable, retrying with backoff).
    public var online: Bool
    /// Changes not yet on the server.
    public var pending: Int
    /// Bytes of contents still to upload.
    public var pendingBytes: Int64
    /// The last error the sync met (cleared by the next success), or null.
    public var lastError: String?
    /// When the last error happened (ISO 8601), or null.
    public var lastErrorAt: String?
    /// "idle", "uploading", "offline", or "stalled" (an error retrying will not mend soon:
    /// credentials, a missing bucket; retried every minute).
    public var state: String
    /// Bytes uploaded since the mount started, and the upload rate over the last seconds.
    public var uploadedBytes: Int64
    public var uploadRate: Double
    /// Changes sent since the mount started.
    public var sent: Int
    /// How long the oldest pending change has waited, in seconds (null when none).
    public var oldestPendingSeconds: Double?
    /// Items whose change the server refused (each has `user.docfs.sync` = "error: …").
    public var failedItems: Int
    /// The server, without secrets.
    public var remote: String

    static func encoded(_ status: SyncStatus) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Every key, absent values as null (synthesized encoding would leave them out).
        guard var object = (try? JSONSerialization.jsonObject(with: encoder.encode(status))) as? [String: Any] else { return "{}" }
        for key in ["lastError", "lastErrorAt", "oldestPendingSeconds"] where object[key] == nil { object[key] = NSNull() }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
