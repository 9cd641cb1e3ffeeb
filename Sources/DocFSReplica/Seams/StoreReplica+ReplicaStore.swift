import Foundation
import DocFSProvider
import DocFSStore

/// The replica's local store as the engine sees it (`ReplicaStore`): the store's replica part
/// (`StoreReplica`); most requirements are its own methods, these few put together what the
/// engine always asks for at once.
extension StoreReplica: ReplicaStore {
    package func attach(_ hooks: ReplicaStoreHooks?) {
        setSyncHooks(wake: hooks?.wake, status: hooks?.status)
        setRetryHandler(hooks?.retry)
        if let hooks { setWriterConflicts(WriterConflicts(store: self, names: hooks.conflictCopyNames, logger: logger)) }
    }
}

/// Contents on demand's passes (`OnDemandStore`, which `ReplicaStore` takes in): the store's
/// `OnDemandPass` under its writer lock.
extension StoreReplica {
    package func onDemandPass<T>(_ body: (any OnDemandPassing) throws(ProviderError) -> T) throws(ProviderError) -> T {
        try withOnDemandPass { (pass) throws(ProviderError) -> T in try body(pass) }
    }
}

// The incoming apply's edits of the tree (`IncomingTreeEdit`) are the store's `ReplicaTreeEdit`.
extension StoreReplica {
    package func editIncoming<T>(_ body: (any IncomingTreeEdit) throws(ProviderError) -> T) throws(ProviderError) -> T? {
        try editReplicaTree { (edit) throws(ProviderError) -> T in try body(edit) }
    }
}

extension ReplicaTreeEdit: IncomingTreeEdit {}
