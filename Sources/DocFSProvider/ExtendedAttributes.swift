import struct Foundation.Data
#if canImport(Glibc)
    import Glibc
#endif

/// Extended attributes a user sets on an item (`setfattr -n user.color -v blue FILE`) that are not
/// provider metadata: stored with the item, verbatim. The limits are what a provider that stores
/// them promises; past them a set fails like on a Linux filesystem.
public enum ExtendedAttributes {
    /// The namespace users may store attributes in; `security.`, `trusted.` and `system.` are refused.
    public static let userPrefix = "user."
    /// Attributes under this prefix are docfs's own (provider metadata), never stored verbatim.
    public static let docfsPrefix = "user.docfs."
    /// Longest name, in bytes (XATTR_NAME_MAX).
    public static let maxNameBytes = 255
    /// Largest value, in bytes: past it a set fails with E2BIG.
    public static let maxValueBytes = 16 * 1024
    /// Names plus values of one item, in bytes: past it a set fails with ENOSPC.
    public static let maxBytesPerItem = 64 * 1024

    /// How a set treats an existing attribute (setxattr's XATTR_CREATE / XATTR_REPLACE).
    public enum WriteMode: Sendable, Hashable {
        /// Create or replace (flags 0).
        case upsert
        /// XATTR_CREATE: fail with EEXIST when it exists.
        case create
        /// XATTR_REPLACE: fail with ENODATA when it does not.
        case replace
    }
}

/// Where a trashed item came from (NSFileProvider remembers it for `untrashItem` with no parent).
extension ExtendedAttributes {
    /// Whether a provider may store `name` with `value`: `user.*` only (not docfs's own
    /// `user.docfs.*`, EOPNOTSUPP), names up to `maxNameBytes` (ERANGE), values up to
    /// `maxValueBytes` (E2BIG).
    public static func checkStorable(_ name: String, _ value: Data?) throws(ProviderError) {
        guard name.hasPrefix(userPrefix), !name.hasPrefix(docfsPrefix), name.utf8.count > userPrefix.utf8.count else {
            throw ProviderError(.unsupported, "only user.* attributes (other than user.docfs.*) are stored")
        }
        guard name.utf8.count <= maxNameBytes else {
            throw ProviderError(.invalidArgument, "attribute name is longer than \(maxNameBytes) bytes", errno: ERANGE)
        }
        if let value, value.count > maxValueBytes {
            throw ProviderError(.invalidArgument, "\(name): a value may have at most \(maxValueBytes) bytes (got \(value.count))", errno: E2BIG)
        }
    }

    /// An item's stored attributes after setting (or, with nil, removing) one, as setxattr's
    /// flags say: ENODATA for a missing one to replace or remove, EEXIST for an existing one to
    /// create, ENOSPC past `maxBytesPerItem` in all.
    public static func updating(
        _ current: [String: Data], _ name: String, to value: Data?,
        mode: WriteMode
    ) throws(ProviderError) -> [String: Data] {
        let exists = current[name] != nil
        if value == nil || mode == .replace, !exists { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
        if mode == .create, exists { throw ProviderError(.filenameCollision, "\(name) already exists") }
        var updated = current
        updated[name] = value
        let total = updated.reduce(0) { $0 + $1.key.utf8.count + $1.value.count }
        if value != nil, total > maxBytesPerItem {
            throw ProviderError(.noSpace, "an item's attributes may have at most \(maxBytesPerItem) bytes in all (this would make \(total))")
        }
        return updated
    }
}

public struct TrashOrigin: Sendable, Hashable {
    public var parentIdentifier: ItemIdentifier
    public var filename: String
    public init(parentIdentifier: ItemIdentifier, filename: String) {
        self.parentIdentifier = parentIdentifier
        self.filename = filename
    }
}
