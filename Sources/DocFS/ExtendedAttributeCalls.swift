import CFuse
import Glibc

/// The extended-attribute calls on a path (the l-variants: a symbolic link's own attributes),
/// for programs that use a mount without importing libfuse's headers, which are where Swift
/// finds `<sys/xattr.h>`. Each returns as the call does and leaves `errno` as it set it.
public enum ExtendedAttributeCalls {
    /// `XATTR_CREATE` and `XATTR_REPLACE`.
    public static let createOnly = Int32(XATTR_CREATE)
    public static let replaceOnly = Int32(XATTR_REPLACE)

    /// The attribute's value, or nil (errno: ENODATA when there is none).
    public static func get(_ path: String, _ name: String) -> [UInt8]? {
        while true {
            let size = lgetxattr(path, name, nil, 0)
            guard size >= 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: max(size, 1))
            let n = lgetxattr(path, name, &buffer, buffer.count)
            if n >= 0 { return Array(buffer[0..<n]) }
            if errno != ERANGE { return nil } // grown in between: ask again
        }
    }

    /// 0, or -1 with errno.
    public static func set(_ path: String, _ name: String, _ value: [UInt8], flags: Int32 = 0) -> Int32 {
        lsetxattr(path, name, value, value.count, flags)
    }

    /// 0, or -1 with errno.
    public static func remove(_ path: String, _ name: String) -> Int32 {
        lremovexattr(path, name)
    }

    /// The attributes' names, or nil (errno set).
    public static func names(_ path: String) -> [String]? {
        while true {
            let size = llistxattr(path, nil, 0)
            guard size >= 0 else { return nil }
            var buffer = [CChar](repeating: 0, count: max(size, 1))
            let n = llistxattr(path, &buffer, buffer.count)
            if n >= 0 {
                return buffer[0..<n].split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
            }
            if errno != ERANGE { return nil }
        }
    }
}
