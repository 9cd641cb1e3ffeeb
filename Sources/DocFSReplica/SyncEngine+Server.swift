import Foundation
import DocFSRemote
import DocFSStore

// What the engine checks and tells the server before it sends (once per connection): the
// schema and the tree, a restore, the layout's MIME words, multipart uploads left by a crash.
extension SyncEngine {
    /// The server's schema is one this docfs speaks, and the bucket's prefix is this tree's. A
    /// server one version older (before hard links) is served without them: the store refuses
    /// `link(2)` until `docfs remote setup` upgrades it.
    func checkServer() async throws {
        let version = try await database.schemaVersion()
        if version > RemoteSchema.latest { throw RemoteError.schemaTooNew(found: version, supported: RemoteSchema.latest) }
        if version < RemoteSchema.oldestServed { throw RemoteError.schemaTooOld(found: version, needed: RemoteSchema.latest) }
        store.noteServerSchema(version)
        // Seen (`docfs remote replicas`); a role that may no longer call the server finds out here.
        try await database.hello()
        if let tree = try await database.treeID() {
            try await TreeMarker.check(tree: tree, configuration: configuration, objects: s3)
        }
        // Before any create goes: a restored server hands out identifiers this replica still holds.
        try await incoming.rebuildIfRestored()
    }

    /// An older server (without names, schema 11, or without trashed names, 12) is asked again
    /// while idle: once its owner has run `docfs remote setup`, links and a trashed name are
    /// taken without a remount.
    func recheckOlderServer() async throws {
        guard store.serverSchemaVersion < RemoteSchema.latest else { return }
        store.noteServerSchema(try await database.schemaVersion())
    }

    /// After a restart: multipart uploads this replica started for entries still waiting are
    /// aborted (their entries upload again), so none is left behind in the bucket.
    func abortStaleUploads() async throws {
        // Listed without a prefix in the query (some S3-compatible servers check the signature of
        // `/` in query values wrongly) and filtered here.
        let prefix =
            ContentObjectKey.make(prefix: configuration.prefix, operationID: UUID()).split(separator: "/").dropLast().joined(separator: "/") + "/"
        for upload in try await s3.listMultipartUploads(bucket: configuration.bucket, prefix: nil) where upload.key.hasPrefix(prefix) {
            guard let name = upload.key.split(separator: "/").last, let id = UUID(uuidString: String(name)),
                !store.outboxEntryIDs(among: [id]).isEmpty
            else { continue }
            try await s3.abortMultipartUpload(bucket: configuration.bucket, key: upload.key, uploadID: upload.uploadID)
            logger.notice("sync: aborted the unfinished multipart upload of \(upload.key) left by the last run; it is sent again")
        }
    }
}
