import Foundation
import DocFSProvider
import DocFSStore

/// The replica's local store as the engine sees it (`ReplicaStore`): most requirements are the
/// store's own methods; these few put together what the engine always asks for at once.
extension LocalStore: ReplicaStore {
    package func attach(_ hooks: ReplicaStoreHooks?) {
        setSyncHooks(wake: hooks?.wake, status: hooks?.status)
        setRetryHandler(hooks?.retry)
        if let hooks { setConflictCopyNames(hooks.conflictCopyNames) }
    }

    package func path(ofRow row: Int64) -> String { path(of: Self.identifier(forRow: row)) }

    package func contentURL(ofRow row: Int64) -> URL? { contentURL(of: Self.identifier(forRow: row)) }

    package func item(ofRow row: Int64) -> Item? { try? item(for: Self.identifier(forRow: row)) }

    package func typeChain(ofRow row: Int64) -> [String]? {
        guard let item = item(ofRow: row) else { return nil }
        let type = contentType(of: item)
        return [type.identifier] + supertypes(of: type).map(\.identifier)
    }
}

/// Contents on demand's passes (`OnDemandStore`, which `ReplicaStore` takes in): the store's
/// `OnDemandPass` under its writer lock.
extension LocalStore {
    package func onDemandPass<T>(_ body: (any OnDemandPassing) throws(ProviderError) -> T) throws(ProviderError) -> T {
        try withOnDemandPass { (pass) throws(ProviderError) -> T in try body(pass) }
    }
}

// The incoming apply's edits of the tree (`IncomingTreeEdit`) are the store's `ReplicaTreeEdit`.
extension LocalStore {
    package func editIncoming<T>(_ body: (any IncomingTreeEdit) throws(ProviderError) -> T) throws(ProviderError) -> T? {
        try editReplicaTree { (edit) throws(ProviderError) -> T in try body(edit) }
    }
}

extension ReplicaTreeEdit: IncomingTreeEdit {}
