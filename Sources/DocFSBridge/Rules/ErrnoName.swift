import Glibc

/// Symbolic errno names for log lines ("EACCES" reads better than 13).
enum ErrnoName {
    static func of(_ err: Int32) -> String {
        switch err {
        case EPERM: return "EPERM"
        case ENOENT: return "ENOENT"
        case EIO: return "EIO"
        case EBADF: return "EBADF"
        case EACCES: return "EACCES"
        case EBUSY: return "EBUSY"
        case EEXIST: return "EEXIST"
        case EXDEV: return "EXDEV"
        case ENOTDIR: return "ENOTDIR"
        case EISDIR: return "EISDIR"
        case EINVAL: return "EINVAL"
        case EFBIG: return "EFBIG"
        case ENOSPC: return "ENOSPC"
        case EROFS: return "EROFS"
        case EMLINK: return "EMLINK"
        case ERANGE: return "ERANGE"
        case ENAMETOOLONG: return "ENAMETOOLONG"
        case ENOSYS: return "ENOSYS"
        case ENOTEMPTY: return "ENOTEMPTY"
        case ENODATA: return "ENODATA"
        case EOPNOTSUPP: return "EOPNOTSUPP"
        case EDQUOT: return "EDQUOT"
        case ESTALE: return "ESTALE"
        case EILSEQ: return "EILSEQ"
        case E2BIG: return "E2BIG"
        default: return "errno \(err)"
        }
    }
}
