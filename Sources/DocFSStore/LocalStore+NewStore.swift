import Foundation
import DocFSProvider
import GRDB

// `docfs init`: making a new store directory, its database and the initial tree of the layout.
extension LocalStore {
    /// `docfs init`: makes a new store at `url`, which must be a new path or an empty directory.
    /// `folders: false` leaves out the layout's folders (a replica gets them from its server,
    /// under the server's identifiers).
    package static func create(at url: URL, layout: Layout?, folders: Bool = true) throws {
        let layout = layout ?? Layout()
        let path = url.path
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        let existed = fm.fileExists(atPath: path, isDirectory: &isDirectory)
        if existed {
            guard isDirectory.boolValue else {
                throw ProviderError(.filenameCollision, "cannot create store \(path): a file with that name exists")
            }
            let entries: [String]
            do { entries = try directoryEntries(path) } catch {
                throw ProviderError(error.code, "cannot create store \(path): \(error.reason)", errno: error.errnoOverride)
            }
            guard entries.isEmpty else {
                throw ProviderError(.directoryNotEmpty, "cannot create store \(path): the directory is not empty (\(entries.count) entries); give a new path or an empty directory")
            }
        } else {
            do {
                try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw ProviderError(.ioError, "cannot create store \(path): \(error.localizedDescription)")
            }
        }
        // Check the layout before writing anything.
        for folder in layout.folders {
            _ = try folder.folderCapabilities
            _ = try folder.contentsCapabilities
        }
        try ContentTypeTable.check(layout)
        do {
            try fm.createDirectory(atPath: path + "/" + contentsName, withIntermediateDirectories: false)
            try fm.createDirectory(atPath: path + "/" + stagingName, withIntermediateDirectories: false)
            guard fm.createFile(atPath: path + "/" + lockName, contents: Data()) else {
                throw ProviderError(.ioError, "cannot create \(path)/\(lockName)")
            }
            var config = Configuration()
            config.journalMode = .wal
            let queue = try DatabaseQueue(path: path + "/" + databaseName, configuration: config)
            try queue.inDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.inTransaction {
                    try Schema.create(db)
                    let layoutJSON = String(decoding: try JSONEncoder().encode(layout), as: UTF8.self)
                    try Schema.setMeta(db, "format", formatVersion)
                    try Schema.setMeta(db, "layout", layoutJSON)
                    try Schema.setMeta(db, "cleanShutdown", "1")
                    try Schema.setMeta(db, "created", ISO8601DateFormatter().string(from: Date()))
                    try Self.insertInitialTree(db, layout: layout, folders: folders)
                    return .commit
                }
                _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
            try queue.close()
            try sysFsync(path: path, directory: true)
        } catch {
            // Leave nothing half-made behind.
            if existed {
                for name in (try? directoryEntries(path)) ?? [] { removeTree(path + "/" + name) }
            } else {
                removeTree(path)
            }
            if let error = error as? ProviderError { throw error }
            throw ProviderError(.ioError, "cannot create store \(path): \(error)")
        }
    }

    private static func insertInitialTree(_ db: Database, layout: Layout, folders: Bool) throws {
        let now = Date()
        let rootCaps = Capabilities.all.subtracting([.allowsRenaming, .allowsReparenting, .allowsDeleting, .allowsTrashing])
        var root = Record(row: rootRow, parent: nil, item: Item(
            identifier: .rootContainer, parentIdentifier: .rootContainer, filename: "/", kind: .folder,
            contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
            capabilities: rootCaps))
        let trash = Record(row: trashRow, parent: nil, item: Item(
            identifier: .trashContainer, parentIdentifier: .rootContainer, filename: trashName, kind: .folder,
            contentType: .folder, childItemCount: 0, creationDate: now, contentModificationDate: now,
            capabilities: rootCaps))
        var records: [Int64: Record] = [:]
        var nextRow: Int64 = 3
        var pathToRow: [String: Int64] = ["": rootRow]
        // Shallow paths first, so a declared parent exists before its children.
        let declared = folders ? layout.folders.sorted { $0.components.count < $1.components.count } : []
        for folder in declared {
            var parentPath = ""
            var parentRow = rootRow
            let components = folder.components
            for (index, component) in components.enumerated() {
                let path = parentPath.isEmpty ? component : parentPath + "/" + component
                let isDeclaredFolder = index == components.count - 1
                if let existing = pathToRow[path] {
                    if isDeclaredFolder {
                        records[existing]!.item.capabilities = try folder.folderCapabilities
                        records[existing]!.contentsPolicy = try folder.contentsCapabilities
                    }
                    parentRow = existing
                } else {
                    let row = nextRow
                    nextRow += 1
                    var record = Record(row: row, parent: parentRow, item: Item(
                        identifier: ItemIdentifier(String(row)), parentIdentifier: identifier(forRow: parentRow),
                        filename: component, kind: .folder, contentType: .folder, childItemCount: 0,
                        creationDate: now, contentModificationDate: now, capabilities: .all))
                    if isDeclaredFolder {
                        record.item.capabilities = try folder.folderCapabilities
                        record.contentsPolicy = try folder.contentsCapabilities
                    } else if let parentPolicy = records[parentRow]?.contentsPolicy {
                        // An undeclared intermediate inside a declared folder follows its parent's policy.
                        record.item.capabilities = parentPolicy
                        record.contentsPolicy = parentPolicy
                    }
                    records[row] = record
                    pathToRow[path] = row
                    parentRow = row
                }
                parentPath = path
            }
        }
        root.item.childItemCount = records.values.filter { $0.parent == rootRow }.count
        root.item.childFolderCount = root.item.childItemCount ?? 0
        try Schema.upsert(db, root)
        try Schema.upsert(db, trash)
        for record in records.values.sorted(by: { $0.row < $1.row }) {
            try Schema.upsert(db, record)
        }
    }
}
