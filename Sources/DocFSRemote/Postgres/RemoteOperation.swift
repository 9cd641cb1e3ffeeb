import Foundation
import DocFSProvider
import DocFSWire

/// One change a replica sends (an outbox entry as the server takes it), applied by the server's
/// `docfs_apply` (`RemoteSchema+Operations`). Every operation is idempotent by its id.
package struct RemoteOperation: Sendable, Equatable {
    /// An item by its server identifier, or by the create this replica sent for it (in the same
    /// call, or an earlier one whose answer it has not acted on yet).
    package enum Target: Sendable, Equatable {
        case item(Int64)
        case createdBy(UUID)
    }

    package enum Change: Sendable, Equatable {
        case create(parent: Target, name: String, kind: ItemKind, attributes: ReplicatedAttributes, content: RemoteContent?)
        /// A new content version if the file is still at `expectedVersion` (compare-and-swap).
        case content(item: Target, expectedVersion: Int64, content: RemoteContent, modificationTime: FileTime)
        /// With where the replica saw it (`expectedParentID`, `expectedName`), a move made
        /// elsewhere first wins (`RemoteError.movedElsewhere`).
        case move(item: Target, toParent: Target, name: String, expectedParentID: Int64?, expectedName: String?, types: [String]?)
        /// With the content version the replica deleted, a file changed since is kept
        /// (`RemoteError.versionConflict`).
        case delete(item: Target, expectedContentVersion: Int64?)
        case trash(item: Target)
        case untrash(item: Target, toParent: Target, name: String, types: [String]?)
        case attributes(item: Target, changes: AttributeChanges)
        /// A further name of the file `item` in `parent` (schema 12); a taken name gets a suffix.
        case link(item: Target, parent: Target, name: String)
        /// The further name `name` (its name row) goes.
        case unlink(name: Target)
        /// The further name `name` (its name row) is renamed and/or moved, as `move`.
        case moveName(name: Target, toParent: Target, newName: String, expectedParentID: Int64?, expectedName: String?)
    }

    package var id: UUID
    package var change: Change

    package init(id: UUID, _ change: Change) {
        self.id = id
        self.change = change
    }

    package var kind: RemoteChange.Kind {
        switch change {
        case .create: return .create
        case .content: return .content
        case .move: return .move
        case .delete: return .delete
        case .trash: return .trash
        case .untrash: return .untrash
        case .attributes: return .attributes
        case .link: return .link
        case .unlink: return .unlink
        case .moveName: return .moveName
        }
    }
}

/// What applies operations: the server (`RemoteDatabase`), or a fake of it in tests.
package protocol OperationApplier: Sendable {
    /// Applies `operations` in order, in one transaction, and answers each; stops at the first
    /// one refused (its error is the last answer), so the answers may be fewer than the
    /// operations. Throws, with nothing applied, when the server could not be asked.
    func apply(_ operations: [RemoteOperation]) async throws -> [Result<AppliedChange, RemoteError>]
}

// One operation at a time (a conflicted copy, the first upload of a tree, tests).
extension OperationApplier {
    package func applyOne(_ operation: RemoteOperation) async throws -> AppliedChange {
        guard let answer = try await apply([operation]).first else {
            throw RemoteError.server("the server gave no answer for operation \(operation.id)")
        }
        return try answer.get()
    }

    /// Creates an item and returns its permanent id (`AppliedChange.itemID`). A name another
    /// item took first gets a suffix (`AppliedChange.name`); a folder deleted meanwhile comes back.
    package func createItem(
        operationID: UUID, parentID: Int64, name: String, kind: ItemKind,
        attributes: ReplicatedAttributes, content: RemoteContent? = nil
    ) async throws -> AppliedChange {
        try await applyOne(
            RemoteOperation(
                id: operationID,
                .create(
                    parent: .item(parentID), name: name, kind: kind,
                    attributes: attributes, content: content)))
    }

    package func newContentVersion(
        operationID: UUID, itemID: Int64, expectedVersion: Int64, content: RemoteContent,
        modificationTime: FileTime
    ) async throws -> AppliedChange {
        try await applyOne(
            RemoteOperation(
                id: operationID,
                .content(
                    item: .item(itemID), expectedVersion: expectedVersion,
                    content: content, modificationTime: modificationTime)))
    }

    package func moveItem(
        operationID: UUID, itemID: Int64, toParentID: Int64, name: String, expectedParentID: Int64? = nil,
        expectedName: String? = nil, types: [String]? = nil
    ) async throws -> AppliedChange {
        try await applyOne(
            RemoteOperation(
                id: operationID,
                .move(
                    item: .item(itemID), toParent: .item(toParentID), name: name,
                    expectedParentID: expectedParentID, expectedName: expectedName,
                    types: types)))
    }

    package func deleteItem(operationID: UUID, itemID: Int64, expectedContentVersion: Int64? = nil) async throws -> AppliedChange {
        try await applyOne(RemoteOperation(id: operationID, .delete(item: .item(itemID), expectedContentVersion: expectedContentVersion)))
    }

    package func trashItem(operationID: UUID, itemID: Int64) async throws -> AppliedChange {
        try await applyOne(RemoteOperation(id: operationID, .trash(item: .item(itemID))))
    }

    package func untrashItem(
        operationID: UUID, itemID: Int64, toParentID: Int64, name: String,
        types: [String]? = nil
    ) async throws -> AppliedChange {
        try await applyOne(
            RemoteOperation(
                id: operationID,
                .untrash(
                    item: .item(itemID), toParent: .item(toParentID), name: name,
                    types: types)))
    }

    package func setAttributes(operationID: UUID, itemID: Int64, changes: AttributeChanges) async throws -> AppliedChange {
        try await applyOne(RemoteOperation(id: operationID, .attributes(item: .item(itemID), changes: changes)))
    }
}
