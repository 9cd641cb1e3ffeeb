import Foundation
import DocFSProvider
import DocFSRemote

/// What went wrong in an exchange with the server, the object storage or the local store
/// during the sync, sorted by what the engine does about it.
struct ServerExchangeError: Error {
    /// A change the engine itself will not send (its folder never reached the server, …).
    struct Refused: Error { var message: String; init(_ message: String) { self.message = message } }
    /// A change that waits for an item set aside (its folder's create, refused by the server).
    struct WaitsFor: Error {
        var row: Int64
        var message: String
        init(row: Int64, _ message: String) { self.row = row; self.message = message }
    }

    /// offline: retried with backoff, every change waits; stalled: the same, every minute;
    /// item: the server decided otherwise about this change (dropped, the item follows the
    /// server); setAside: refused for a reason a retry will not mend, the item's changes wait
    /// (quarantined) while the others go on.
    enum Kind { case offline, stalled, item, setAside }
    var kind: Kind
    var message: String
    /// The server answered (it refused); false when it could not be reached.
    var reachedServer: Bool

    var stalls: Bool { kind == .stalled }
    var isItemLevel: Bool { kind == .item }
    var setsAside: Bool { kind == .setAside }

    init(_ error: any Error, bucket: String) {
        switch error {
        case let refused as Refused:
            self.init(.item, refused.message, reached: true)
        case let waiting as WaitsFor:
            self.init(.setAside, waiting.message, reached: true)
        case let problem as ReplicaConfiguration.Problem:
            self.init(.stalled, problem.description, reached: true)
        case let remote as RemoteError:
            switch remote {
            case .unreachable: self.init(.offline, remote.description, reached: false)
            case .authentication, .schemaTooNew, .schemaTooOld, .notPermitted: self.init(.stalled, remote.description, reached: true)
            case .server: self.init(.offline, remote.description, reached: true)
            case .rejected: self.init(.setAside, remote.description, reached: true)
            case .versionConflict, .notFound, .nameCollision, .notEmpty, .invalid, .operationReused, .movedElsewhere, .refused:
                self.init(.item, remote.description, reached: true)
            }
        case let s3 as S3Error:
            if s3.isRetryable || s3.credentialsRenewed {
                self.init(.offline, "object storage unreachable: \(s3)", reached: false)
            } else if s3.kind == .untrusted {
                self.init(.stalled, "object storage: \(s3.message)", reached: false)
            } else if s3.kind == .authentication {
                self.init(
                    .stalled,
                    "object storage refused the credentials (\(s3.code ?? "HTTP \(s3.status ?? 0)")): check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
                    reached: true)
            } else if s3.code == "NoSuchBucket" {
                self.init(.stalled, "the bucket \(bucket) does not exist on the object storage", reached: true)
            } else if s3.kind == .quota {
                self.init(.stalled, "object storage is full or refuses the size: \(s3)", reached: true)
            } else {
                self.init(.setAside, "object storage refused the upload: \(s3)", reached: true)
            }
        case let provider as ProviderError:
            self.init(.offline, "local store: \(provider.reason)", reached: true)
        default:
            self.init(.offline, "\(error)", reached: false)
        }
    }

    private init(_ kind: Kind, _ message: String, reached: Bool) {
        self.kind = kind
        self.message = message
        reachedServer = reached
    }
}
