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
/// Before schema 8 two versions never shared an object; since, contents are blocks in packs
/// (`manifest`, `pack`) and a block is uploaded once per tree. The server row of the version
/// records the key, so readers never derive it.
package enum ContentObjectKey {
    package static func make(prefix: String, operationID: UUID) -> String {
        folder(prefix: prefix) + operationID.uuidString.lowercased()
    }

    /// `PREFIX/objects/`: where every content object of the tree lives (what gc lists).
    package static func folder(prefix: String) -> String { under(prefix: prefix, "objects/") }

    /// `PREFIX/manifests/<operation id>-<contents>`: the key versions made of blocks name
    /// (schema 8). No object has it: the server's `docfs_manifests` lists its blocks. `contents`
    /// names what the manifest holds (`BlockHash.ofManifest`): a retried operation that sends the
    /// same bytes records its manifest once, and one that finds the file changed since its first
    /// attempt (which recorded the manifest, then lost the commit) records a manifest of its own
    /// instead of naming the first attempt's bytes.
    package static func manifest(prefix: String, operationID: UUID, contents: String) -> String {
        under(prefix: prefix, "manifests/") + operationID.uuidString.lowercased() + "-" + contents
    }

    /// `PREFIX/packs/<writer>/<uuid>`: a pack object, several blocks back to back (a new one per
    /// upload, never overwritten), under the folder of the replica role that writes it (schema
    /// 16: its object credentials may add objects there and nowhere else, and the server records
    /// a pack only from the role its folder names). gc, the owner's, writes the live blocks of a
    /// mostly-dead pack into a new one at `PREFIX/packs/<uuid>` (no writer).
    package static func pack(prefix: String, writer: String? = nil) -> String {
        packFolder(prefix: prefix) + (writer.flatMap { isWriter($0) ? $0 + "/" : nil } ?? "") + UUID().uuidString.lowercased()
    }

    /// A role name that can be a pack folder (as `docfs remote add-replica` takes names).
    package static func isWriter(_ name: String) -> Bool {
        (1...63).contains(name.utf8.count) && name != "." && name != ".."
            && name.utf8.allSatisfy {
                $0 == 0x5F || $0 == 0x2D || $0 == 0x2E || (0x30...0x39).contains($0)
                    || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            }
    }

    package static func packFolder(prefix: String) -> String { under(prefix: prefix, "packs/") }

    /// `name` under the tree's prefix (its slashes at either end dropped; none: the bucket's top).
    package static func under(prefix: String, _ name: String) -> String {
        let trimmed = prefix.split(separator: "/").joined(separator: "/")
        return trimmed.isEmpty ? name : "\(trimmed)/\(name)"
    }
}
