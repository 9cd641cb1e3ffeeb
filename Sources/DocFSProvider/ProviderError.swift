#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A provider failure with a File Provider code and a human reason.
/// The reason is what the daemon logs next to the path: it names the rule that refused.
public struct ProviderError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        // NSFileProviderError codes
        case noSuchItem, filenameCollision, insufficientQuota, directoryNotEmpty, deletionRejected
        case notAuthenticated, serverUnreachable, cannotSynchronize, syncAnchorExpired
        case pageExpired, versionOutOfDate, providerNotFound, excludedFromSync
        // refusals by capability or type
        case notPermitted // EPERM: the item's capabilities do not allow the action
        case accessDenied // EACCES: the parent does not allow adding, or reading is refused
        case typeNotAllowed // EPERM: the folder does not accept this content type
        case corruptFile // EIO: contents are not a valid document of their type
        // filesystem-shaped failures
        case invalidName, nameTooLong, illegalByteSequence, invalidArgument
        case isDirectory, notDirectory, noSpace, readOnly, unsupported, busy, ioError
        case crossDevice
        case noSuchAttribute // ENODATA: an extended attribute that is not set
    }

    public var code: Code
    public var reason: String
    /// An errno to report instead of the code's default (e.g. the exact failure of a syscall).
    public var errnoOverride: Int32?

    public init(_ code: Code, _ reason: String = "", errno: Int32? = nil) {
        self.code = code
        self.reason = reason
        self.errnoOverride = errno
    }

    /// Wraps a failed system call.
    public static func posix(_ err: Int32, _ what: String) -> ProviderError {
        let code: Code
        switch err {
        case ENOENT: code = .noSuchItem
        case EEXIST: code = .filenameCollision
        case ENOSPC: code = .noSpace
        case EDQUOT: code = .insufficientQuota
        case ENOTEMPTY: code = .directoryNotEmpty
        case EACCES: code = .accessDenied
        case EPERM: code = .notPermitted
        case ENAMETOOLONG: code = .nameTooLong
        case EISDIR: code = .isDirectory
        case ENOTDIR: code = .notDirectory
        case EROFS: code = .readOnly
        case EXDEV: code = .crossDevice
        default: code = .ioError
        }
        return ProviderError(code, "\(what): \(String(cString: strerror(err)))", errno: err)
    }

    /// The errno a Linux filesystem gives for this failure.
    public var errno: Int32 {
        if let errnoOverride { return errnoOverride }
        switch code {
        case .noSuchItem, .providerNotFound: return ENOENT
        case .filenameCollision: return EEXIST
        case .insufficientQuota: return EDQUOT
        case .noSpace: return ENOSPC
        case .directoryNotEmpty: return ENOTEMPTY
        case .deletionRejected, .notPermitted, .typeNotAllowed: return EPERM
        case .notAuthenticated, .accessDenied: return EACCES
        case .serverUnreachable, .cannotSynchronize, .syncAnchorExpired, .pageExpired,
            .corruptFile, .ioError, .excludedFromSync:
            return EIO
        case .versionOutOfDate: return ESTALE
        case .invalidName, .invalidArgument: return EINVAL
        case .nameTooLong: return ENAMETOOLONG
        case .illegalByteSequence: return EILSEQ
        case .isDirectory: return EISDIR
        case .notDirectory: return ENOTDIR
        case .readOnly: return EROFS
        case .unsupported: return EOPNOTSUPP
        case .busy: return EBUSY
        case .crossDevice: return EXDEV
        case .noSuchAttribute: return ENODATA
        }
    }

    public var description: String {
        reason.isEmpty ? code.rawValue : "\(code.rawValue): \(reason)"
    }
}
