import CFuse
import DocFSProvider

extension Bridge {
    /// What every new item (create, mkdir, symlink, mknod) must pass before anything is made, in
    /// the order refusals are reported: a valid name, a folder that allows adding (EACCES), the
    /// trash's rules, and the provider admitting the name (a type the folder refuses: EPERM).
    func admitNewItem(_ parent: UInt64, _ cname: UnsafePointer<CChar>, kind: ItemKind) throws(Failure) -> (parent: Item, name: String, subject: Subject) {
        let name = try attempt(.ino(parent)) { () throws(ProviderError) in try Bridge.name(cname) }
        let parentItem = try item(parent)
        let subject = Subject.child(parentItem.identifier, name)
        try attempt(subject) { () throws(ProviderError) in
            try CapabilityCheck.add(into: parentItem)
            if name == "." || name == ".." { throw ProviderError(.invalidName, "reserved name") }
            try checkTrashRules(addingTo: parentItem, name: name)
            try provider.admitItem(named: name, kind: kind, into: parentItem.identifier)
        }
        return (parentItem, name, subject)
    }
}
