import struct Foundation.Data

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
public struct TrashOrigin: Sendable, Hashable {
    public var parentIdentifier: ItemIdentifier
    public var filename: String
    public init(parentIdentifier: ItemIdentifier, filename: String) {
        self.parentIdentifier = parentIdentifier
        self.filename = filename
    }
}
