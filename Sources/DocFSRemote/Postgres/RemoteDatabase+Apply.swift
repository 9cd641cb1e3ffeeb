import Foundation
import Logging
import PostgresNIO
import DocFSWire

// The one write path of a replica: a chunk of operations as one call of the server's
// `docfs_apply` (one round trip, one transaction, one commit), which checks and applies them.
extension RemoteDatabase: OperationApplier {
    package func apply(_ operations: [RemoteOperation]) async throws -> [Result<AppliedChange, RemoteError>] {
        guard !operations.isEmpty else { return [] }
        let json = String(decoding: try JSONEncoder().encode(operations.map(WireOperation.init)), as: UTF8.self)
        let logger = self.logger
        let answer = try await mapped { [self] in
            let rows = try await client.query("SELECT docfs_apply(\(json)::jsonb)::text", logger: logger)
            for try await (text) in rows.decode(String.self) { return text }
            throw RemoteError.server("docfs_apply gave no answer")
        }
        let results: [WireResult]
        do {
            results = try JSONDecoder().decode([WireResult].self, from: Data(answer.utf8))
        } catch {
            throw RemoteError.server("docfs_apply's answer is not understood: \(error)")
        }
        guard results.count <= operations.count else { throw RemoteError.server("docfs_apply answered more than it was asked") }
        return zip(operations, results).map { operation, result in
            guard result.ok else {
                return .failure(
                    Self.operationError(
                        state: result.state ?? "", message: result.message ?? "refused",
                        detail: result.detail, operation: operation))
            }
            guard let item = result.item, let cv = result.cv, let mv = result.mv, let position = result.position else {
                return .failure(.server("docfs_apply's answer lacks a field"))
            }
            return .success(
                AppliedChange(
                    itemID: item, contentVersion: cv, metadataVersion: mv, position: position,
                    replayed: result.replayed ?? false, name: result.name))
        }
    }

    /// An operation's refusal as the replica sorts it (`RemoteSchema+Operations` lists the codes).
    static func operationError(state: String, message: String, detail: String?, operation: RemoteOperation) -> RemoteError {
        let item: Int64 = {
            switch operation.change {
            case .content(.item(let id), _, _, _), .move(.item(let id), _, _, _, _, _), .delete(.item(let id), _),
                .trash(.item(let id)), .untrash(.item(let id), _, _, _), .attributes(.item(let id), _),
                .link(.item(let id), _, _), .unlink(.item(let id)), .moveName(.item(let id), _, _, _, _):
                return id
            default:
                return Int64(detail ?? "") ?? 0
            }
        }()
        switch state {
        case "DF010":
            var expected: Int64 = 0
            if case .content(_, let version, _, _) = operation.change { expected = version }
            if case .delete(_, let version?) = operation.change { expected = version }
            return .versionConflict(itemID: item, expected: expected, current: Int64(detail ?? "") ?? 0)
        case "DF011": return .notFound(itemID: Int64(detail ?? "") ?? item)
        case "DF012": return .notEmpty(itemID: item)
        case "DF013": return .movedElsewhere(itemID: item)
        case "DF014", "DF016": return .invalid(message)
        case "DF015": return .operationReused(operation.id, previousKind: detail ?? "")
        case "DF003", "DF004", "DF002": return .rejected("\(message) (SQLSTATE \(state))")
        case "DF001": return .server(message)
        default: return classify(state: state, message: message)
        }
    }

    /// One operation as `docfs_apply` reads it.
    struct WireOperation: Encodable {
        var op: UUID
        var kind: String
        var item: Int64?
        var item_op: UUID?
        var parent: Int64?
        var parent_op: UUID?
        var name: String?
        var item_kind: String?
        var uid: UInt32?
        var gid: UInt32?
        var mode: UInt32?
        var created_ns: Int64?
        var modified_ns: Int64?
        var accessed_ns: Int64?
        var tags: [String]?
        var types: [String]?
        var set_rank: Bool?
        var favorite_rank: Int64?
        var symlink_target: String?
        var content_key: String?
        var size: Int64?
        var replica: String?
        var expected_version: Int64?
        var expected_parent: Int64?
        var expected_name: String?

        init(_ operation: RemoteOperation) {
            op = operation.id
            kind = operation.kind.rawValue
            switch operation.change {
            case let .create(parent, name, kind, attributes, content):
                setParent(parent)
                self.name = name
                item_kind = kind.storedName
                uid = attributes.ownerID
                gid = attributes.groupID
                mode = UInt32(attributes.posixPermissions) & 0o7777
                created_ns = attributes.creationTime.totalNanoseconds
                modified_ns = attributes.modificationTime.totalNanoseconds
                tags = ServerTags.array(attributes.tagData)
                types = attributes.types
                symlink_target = attributes.symlinkTargetPath
                setContent(content)
            case let .content(item, expectedVersion, content, modificationTime):
                setItem(item)
                expected_version = expectedVersion
                setContent(content)
                modified_ns = modificationTime.totalNanoseconds
            case let .move(item, toParent, name, expectedParentID, expectedName, types):
                setItem(item)
                setParent(toParent)
                self.name = name
                expected_parent = expectedParentID
                expected_name = expectedName
                self.types = types
            case let .delete(item, expectedContentVersion):
                setItem(item)
                expected_version = expectedContentVersion
            case let .trash(item):
                setItem(item)
            case let .untrash(item, toParent, name, types):
                setItem(item)
                setParent(toParent)
                self.name = name
                self.types = types
            case let .attributes(item, changes):
                setItem(item)
                uid = changes.ownerID
                gid = changes.groupID
                mode = changes.posixPermissions.map { UInt32($0) & 0o7777 }
                created_ns = changes.creationTime?.totalNanoseconds
                modified_ns = changes.modificationTime?.totalNanoseconds
                accessed_ns = changes.accessTime?.totalNanoseconds
                tags = changes.tagData.map { ServerTags.array($0) }
                if let rank = changes.favoriteRank {
                    set_rank = true
                    favorite_rank = rank
                }
            case let .link(item, parent, name):
                setItem(item)
                setParent(parent)
                self.name = name
            case let .unlink(name):
                setItem(name)
            case let .moveName(name, toParent, newName, expectedParentID, expectedName):
                setItem(name)
                setParent(toParent)
                self.name = newName
                expected_parent = expectedParentID
                expected_name = expectedName
            }
        }

        private mutating func setItem(_ target: RemoteOperation.Target) {
            switch target {
            case .item(let id): item = id
            case .createdBy(let id): item_op = id
            }
        }

        private mutating func setParent(_ target: RemoteOperation.Target) {
            switch target {
            case .item(let id): parent = id
            case .createdBy(let id): parent_op = id
            }
        }

        private mutating func setContent(_ content: RemoteContent?) {
            guard let content else { return }
            content_key = content.key
            size = content.size
            replica = content.replica
        }
    }

    struct WireResult: Decodable {
        var ok: Bool
        var item: Int64?
        var cv: Int64?
        var mv: Int64?
        var position: Int64?
        var replayed: Bool?
        var name: String?
        var state: String?
        var message: String?
        var detail: String?
    }
}
