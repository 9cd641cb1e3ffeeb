import Foundation
import DocFSProvider

/// A new file between its `create` and its import: everything about it except its bytes.
///
/// The bytes are in the node's staged copy (`WriteSession`); this holds where the file will land,
/// the owner, group, mode and access time its creator gave (or chown, chmod and utimensat set
/// since), and the `user.*` attributes set before close (`cp --preserve=xattr` sets them before
/// it closes). The import at close hands `importAttributes` to the provider and stores the
/// attributes once the item exists. docs/ARCHITECTURE.md follows one copy through these steps.
///
/// Kept on its `InodeNode` under the `InodeTable`'s lock, from `create` until the import lands.
/// A file unlinked, or whose import was refused, keeps its `CopyIn` without a placement while
/// handles are open, so `fstat` still shows its owner and mode (as an unlinked file's would).
struct CopyIn: Sendable, Equatable {
    /// Where the file will land; nil once its name was taken away (unlinked, or import refused):
    /// a later close then imports nothing.
    var placement: Placement?
    /// Owner, group, mode and access time for the import (its modification time is the staged
    /// file's, taken at close).
    private(set) var attributes: NewItemAttributes
    /// `user.*` attributes to store with the item once imported.
    private(set) var extendedAttributes: [String: Data] = [:]

    struct Placement: Sendable, Equatable {
        var parent: UInt64
        var name: String
    }

    /// A file just created in `parent`: its access time starts now, as a new file's does.
    init(parent: UInt64, name: String, attributes: NewItemAttributes, now: FileTime = .now()) {
        placement = Placement(parent: parent, name: name)
        var attributes = attributes
        attributes.accessTime = now
        attributes.entryTime = now // the folder changes now, not at the import
        self.attributes = attributes
    }

    /// chown, chmod and utimensat's access time before the import. A modification time belongs
    /// to the staged file (the bridge sets it there), so it is not kept here.
    mutating func apply(_ changes: AttributeChanges) {
        if let v = changes.ownerID { attributes.ownerID = v }
        if let v = changes.groupID { attributes.groupID = v }
        if let v = changes.posixPermissions { attributes.posixPermissions = v }
        if let v = changes.accessTime { attributes.accessTime = v }
    }

    /// setxattr (nil removes) before the import, within the limits a provider applies after it.
    /// Only `user.*` can be set: docfs's own `user.docfs.*` names describe a stored item (EPERM
    /// until it is imported); other namespaces are not supported here (EOPNOTSUPP).
    mutating func setExtendedAttribute(_ name: String, to value: Data?, mode: ExtendedAttributes.WriteMode) throws(ProviderError) {
        if name.hasPrefix(ExtendedAttributes.docfsPrefix) {
            throw ProviderError(.notPermitted, "\(name) can be set once the file is imported (after close)")
        }
        try ExtendedAttributes.checkStorable(name, value)
        extendedAttributes = try ExtendedAttributes.updating(extendedAttributes, name, to: value, mode: mode)
    }

    /// What the import carries: these attributes with the staged file's modification and change
    /// times (its last write, or what the program set since, and when it did).
    func importAttributes(stagedModificationTime: FileTime, stagedChangeTime: FileTime? = nil) -> NewItemAttributes {
        var result = attributes
        result.modificationTime = stagedModificationTime
        result.changeTime = stagedChangeTime
        return result
    }
}

/// The mode-bit rules check a file being copied in by the owner and mode its write session holds.
extension CopyIn: PermissionSubject {
    var ownerID: UInt32 { attributes.ownerID }
    var groupID: UInt32 { attributes.groupID }
    var permissionBits: UInt16 { attributes.posixPermissions & 0o7777 }
    var isFolder: Bool { false }
}
