#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import DocFSProvider
import GRDB
import Logging

/// The shape of a generated tree for scale tests and `make bench-scale`: one flat folder of
/// `bigFolderFiles` files (`/big/f0000000…`) and a tree of the remaining files, `filesPerFolder` in
/// each leaf folder (`/tree/dNNNN/sNN/fNNNN`), ten leaves per middle folder.
package struct ScaleShape: Sendable {
    package var items: Int
    package var bigFolderFiles: Int
    package var filesPerFolder: Int
    /// Bytes in each file's contents (0: empty content files).
    package var fileSize: Int

    package init(items: Int, bigFolderFiles: Int? = nil, filesPerFolder: Int = 1000, fileSize: Int = 0) {
        self.items = max(items, 10)
        self.bigFolderFiles = min(bigFolderFiles ?? min(100_000, self.items / 10), self.items / 2)
        self.filesPerFolder = max(filesPerFolder, 1)
        self.fileSize = max(fileSize, 0)
    }

    /// Files of the tree part and its leaf and middle folders, with the two top folders counted
    /// as items too, so that the total is about `items`.
    package var treeFiles: Int {
        let rest = items - bigFolderFiles - 2
        let leaves = max(1, rest / (filesPerFolder + 1))
        return max(0, rest - leaves - (leaves + 9) / 10)
    }
}

extension LocalStore {
    /// Adds a generated tree (`shape`) to a store that no mount has open, in transactions of
    /// 50,000 rows written straight to SQLite (the journal is for acknowledged actions; nobody
    /// waits for these), with an empty or small content file per file item. Built with the store's
    /// own record rules (`newRecord`: owner, mode, capabilities, type), not through FUSE, so a
    /// million items take a minute or so. Returns the number of items added.
    package static func populate(at url: URL, shape: ScaleShape, logger: Logger,
                                progress: ((Int) -> Void)? = nil) throws -> Int {
        let store = try open(at: url, logger: logger, cacheItems: 1024)
        defer { store.close() }
        return try store.populate(shape, progress: progress)
    }

    private func populate(_ shape: ScaleShape, progress: ((Int) -> Void)?) throws -> Int {
        try write { (database) throws(ProviderError) -> Int in
            try flushJournal(database)
            let root: Record = try read { (tree) throws(ProviderError) -> Record in
                guard let root = tree.records[Self.rootRow] else { throw ProviderError(.corruptFile, "no root") }
                for name in ["big", "tree"] where tree.children[Self.rootRow]?[NameKey(name)] != nil {
                    throw ProviderError(.filenameCollision, "'\(name)' already exists in the store's root: populate an empty store")
                }
                return root
            }
            var nextRow = tree.nextRow
            let now = FileTime.now()
            let attributes = NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o644)
            let folderAttributes = NewItemAttributes(ownerID: getuid(), groupID: getgid(), posixPermissions: 0o755)
            var batch: [Record] = []
            batch.reserveCapacity(50_000)
            var added = 0
            let payload = [UInt8](repeating: UInt8(ascii: "x"), count: shape.fileSize)

            func flush() throws(ProviderError) {
                guard !batch.isEmpty else { return }
                let records = batch
                do {
                    try database.inDatabase { db in
                        try db.inTransaction {
                            for record in records { try Schema.upsert(db, record) }
                            return .commit
                        }
                    }
                } catch let error as DatabaseError {
                    throw StoreWriter.providerError(error, "populate")
                } catch {
                    throw ProviderError(.ioError, "populate: \(error)")
                }
                added += batch.count
                batch.removeAll(keepingCapacity: true)
                progress?(added)
            }
            func make(_ name: String, in parent: Record, kind: ItemKind) throws(ProviderError) -> Record {
                let record = newRecord(row: nextRow, parent: parent, name: name, kind: kind,
                                       size: kind == .file ? Int64(shape.fileSize) : 0, now: now,
                                       attributes: kind == .folder ? folderAttributes : attributes)
                nextRow += 1
                if kind == .file {
                    let fd = sysOpen(contents.path(record.row), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                    guard fd >= 0 else { throw ProviderError.posix(errno, "create contents of \(name)") }
                    if !payload.isEmpty { _ = payload.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
                    sysClose(fd)
                }
                batch.append(record)
                if batch.count >= 50_000 { try flush() }
                return record
            }

            let big = try make("big", in: root, kind: .folder)
            for index in 0..<shape.bigFolderFiles {
                _ = try make(String(format: "f%07d.txt", index), in: big, kind: .file)
            }
            let tree = try make("tree", in: root, kind: .folder)
            var remaining = shape.treeFiles
            var top = 0
            while remaining > 0 {
                let middle = try make(String(format: "d%04d", top), in: tree, kind: .folder)
                top += 1
                for sub in 0..<10 where remaining > 0 {
                    let leaf = try make(String(format: "s%02d", sub), in: middle, kind: .folder)
                    let count = min(shape.filesPerFolder, remaining)
                    for index in 0..<count { _ = try make(String(format: "f%04d.txt", index), in: leaf, kind: .file) }
                    remaining -= count
                }
            }
            try flush()
            do {
                try database.inDatabase { db in
                    try db.execute(sql: "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'item'", arguments: [nextRow - 1])
                    _ = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            } catch {
                throw ProviderError(.ioError, "populate: \(error)")
            }
            self.tree.update { tree in
                tree.nextRow = nextRow
                tree.forget(Self.rootRow)
                _ = tree.record(Self.rootRow)
            }
            return added
        }
    }
}
