import CFuse
import DocFSProvider

extension Bridge {
    /// What every new item (create, mkdir, symlink, mknod) must pass before anything is made, in
    /// the order refusals are reported: a valid name, write and search permission on the folder
    /// (EACCES), a folder that allows adding (EACCES), the trash's rules, and the provider
    /// admitting the name (a type the folder refuses: EPERM). Returns the new item's owner, group
    /// and mode as Linux gives them.
    func admitNewItem(
        _ parent: UInt64, _ cname: UnsafePointer<CChar>, kind: ItemKind, mode: UInt16,
        caller: Caller
    ) throws(RequestError) -> (parent: Item, name: String, subject: Subject, attributes: NewItemAttributes) {
        let name = try attempt(.ino(parent)) { () throws(ProviderError) in try Bridge.name(cname) }
        let parentItem = try item(parent)
        let subject = Subject.child(parentItem.identifier, name)
        try attempt(subject) { () throws(ProviderError) in
            guard parentItem.kind == .folder else { throw ProviderError(.notDirectory, "'\(parentItem.filename)' is not a folder") }
            try PermissionCheck.requireChange(in: parentItem, for: caller)
            try CapabilityCheck.add(into: parentItem)
            if name == "." || name == ".." { throw ProviderError(.invalidName, "reserved name") }
            try checkTrashRules(addingTo: parentItem, name: name)
            try provider.admitItem(named: name, kind: kind, into: parentItem.identifier)
        }
        let attributes = OwnershipRules.newItem(mode: mode, kind: kind, in: parentItem, by: caller)
        return (parentItem, name, subject, attributes)
    }
}
