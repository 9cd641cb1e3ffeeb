import DocFSProvider

/// What a failure is about, resolved to a path only when it is logged.
enum Subject {
    case none
    case item(ItemIdentifier)
    case child(ItemIdentifier, String)
    case ino(UInt64)
}

/// Why a FUSE request was refused or failed: the provider's error plus what it was about
/// (its errno is the reply, `Bridge.report`).
struct RequestError: Error {
    var error: ProviderError
    var subject: Subject
    init(_ error: ProviderError, _ subject: Subject) {
        self.error = error
        self.subject = subject
    }
}
