import Foundation

/// Where a content version lives in the bucket: `PREFIX/objects/<operation id>`.
///
/// Objects are immutable: each new content version is a new object, never an overwrite. The key
/// comes from the client-supplied id of the operation that carries the content (the outbox
/// entry's UUID), not from the server's item id or version and not from a content hash, because:
/// - it is known before the server has heard of the item (an import's permanent id comes later),
///   so the upload can start at once and run before the metadata call;
/// - a retry of the same operation (after a crash, a lost reply) uses the same key, so a retried
///   upload lands on the same object instead of leaving a second one behind, and a multipart
///   upload can be found again and resumed or aborted by its key;
/// - no extra pass over the file to hash it first.
/// Two versions never share an object (no deduplication). The server row of the version records
/// the key, so readers never derive it.
package enum ContentObjectKey {
    package static func make(prefix: String, operationID: UUID) -> String {
        folder(prefix: prefix) + operationID.uuidString.lowercased()
    }

    /// `PREFIX/objects/`: where every content object of the tree lives (what gc lists).
    package static func folder(prefix: String) -> String { under(prefix: prefix, "objects/") }

    /// `name` under the tree's prefix (its slashes at either end dropped; none: the bucket's top).
    package static func under(prefix: String, _ name: String) -> String {
        let trimmed = prefix.split(separator: "/").joined(separator: "/")
        return trimmed.isEmpty ? name : "\(trimmed)/\(name)"
    }
}
