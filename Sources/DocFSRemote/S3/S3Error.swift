/// An S3 request that failed, sorted by what the caller should do about it.
package struct S3Error: Error, Sendable, CustomStringConvertible, Equatable {
    package enum Kind: String, Sendable, Equatable {
        /// Connection refused, reset, DNS: retry later.
        case unreachable
        /// Connect, read or overall deadline passed: retry later.
        case timeout
        /// 5xx, `SlowDown`, `InternalError`, `ServiceUnavailable`: retry with backoff.
        case serverBusy
        /// 403 and the like (`InvalidAccessKeyId`, `SignatureDoesNotMatch`, `AccessDenied`,
        /// `ExpiredToken`): report it; retrying will not help.
        case authentication
        /// The server's TLS certificate is not trusted (a private CA not given): report it.
        case untrusted
        /// `EntityTooLarge`, `QuotaExceeded`, `TooManyBuckets`: report it; not retryable.
        case quota
        /// 404: `NoSuchKey`, `NoSuchBucket`, `NoSuchUpload`, `NoSuchVersion`.
        case notFound
        /// 416: the range asked lies outside the object.
        case invalidRange
        /// Anything else S3 refused (a 4xx we do not sort further), or an answer we could not read.
        case rejected
    }

    package var kind: Kind
    /// HTTP status, when an answer came.
    package var status: Int?
    /// S3's error code (`<Code>`), when the body had one.
    package var code: String?
    package var message: String
    /// The server refused the credentials and others were read since (`S3Client.renewCredentials`):
    /// trying again soon can succeed.
    package var credentialsRenewed = false

    /// The answer of a server to keys it does not know (any more) or a session that ended.
    package var meansStaleCredentials: Bool {
        kind == .authentication
            && [
                "ExpiredToken", "InvalidAccessKeyId", "InvalidToken", "InvalidClientTokenId",
                "TokenRefreshRequired", "ExpiredTokenException",
            ].contains(code ?? "")
    }

    package init(kind: Kind, status: Int? = nil, code: String? = nil, message: String) {
        self.kind = kind
        self.status = status
        self.code = code
        self.message = message
    }

    /// Whether trying the same request again later can succeed.
    package var isRetryable: Bool {
        switch kind {
        case .unreachable, .timeout, .serverBusy: return true
        case .authentication, .untrusted, .quota, .notFound, .invalidRange, .rejected: return false
        }
    }

    package var description: String {
        var parts = ["S3 \(kind.rawValue)"]
        if let status { parts.append("HTTP \(status)") }
        if let code { parts.append(code) }
        return parts.joined(separator: " ") + (message.isEmpty ? "" : ": \(message)")
    }

    /// Sorts an error answer by status and S3 code.
    static func fromResponse(status: Int, body: String, operation: String) -> S3Error {
        let code = S3XML.text("Code", in: body)
        let message = S3XML.text("Message", in: body) ?? "\(operation) failed"
        let kind: Kind
        switch (status, code ?? "") {
        case (_, "SlowDown"), (_, "InternalError"), (_, "ServiceUnavailable"), (_, "RequestTimeout"): kind = .serverBusy
        case (_, "EntityTooLarge"), (_, "QuotaExceeded"), (_, "TooManyBuckets"): kind = .quota
        case (_, "InvalidAccessKeyId"), (_, "SignatureDoesNotMatch"), (_, "AccessDenied"), (_, "ExpiredToken"),
            (_, "InvalidToken"), (_, "AuthorizationHeaderMalformed"), (_, "InvalidSecurity"):
            kind = .authentication
        case (_, "NoSuchKey"), (_, "NoSuchBucket"), (_, "NoSuchUpload"), (_, "NoSuchVersion"), (404, _): kind = .notFound
        case (416, _), (_, "InvalidRange"): kind = .invalidRange
        case (401, _), (403, _): kind = .authentication
        case (413, _): kind = .quota
        case (500..., _), (429, _): kind = .serverBusy
        default: kind = .rejected
        }
        return S3Error(kind: kind, status: status, code: code, message: "\(operation): \(message)")
    }
}
