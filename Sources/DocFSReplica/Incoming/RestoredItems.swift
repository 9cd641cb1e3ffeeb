import Foundation
import Logging
import DocFSProvider
import DocFSStore

/// What a replica had sent and a restored server no longer has (its identifier unknown there) is
/// made again at its path as new items of this replica's, parents first, and sent like anything
/// made here; a name taken there meanwhile gets the conflicted-copy treatment (a folder goes into
/// a folder of the same name). Only what cannot be put back stays in `STORE/recovered/`: an item
/// whose identifier the server gave to another item, one whose folder is gone, one the folder's
/// rules now refuse.
struct RestoredItems {
    let store: any ReplicaStore
    let logger: Logger
    let copyName: @Sendable (String) -> String

    /// Counts for the status line.
    struct Outcome { var putBack = 0; var renamed = 0; var notPutBack = 0 }

    /// The lost items' paths and attributes, read before they go from the tree. `kept`: each
    /// file's copy in recovered/ (its contents).
    static func lostItems(rows: Set<Int64>, store: any ReplicaStore, kept: [Int64: String]) -> [LostItem] {
        rows.compactMap { row -> LostItem? in
            guard let item = store.item(ofRow: row) else { return nil }
            let path = store.path(ofRow: row).split(separator: "/").map(String.init)
            guard !path.isEmpty, !path.contains("?") else { return nil }
            // An item in the trash stays in recovered/: it was on its way out.
            let top = store.folderRows(above: row).last ?? row
            guard store.item(ofRow: top)?.parentIdentifier != LocalStore.identifier(forRow: ReplicaRows.trash) else { return nil }
            let attributes = NewItemAttributes(
                ownerID: item.ownerID, groupID: item.groupID, posixPermissions: item.posixPermissions,
                modificationTime: item.modificationTime, accessTime: item.accessTime,
                changeTime: item.changeTime)
            return LostItem(
                row: row, path: path, kind: item.kind, attributes: attributes, contents: kept[row],
                symlinkTarget: item.symlinkTargetPath)
        }
        .sorted { ($0.path.count, $0.path.joined(separator: "/")) < ($1.path.count, $1.path.joined(separator: "/")) }
    }

    /// Puts each item back (parents first: `lostItems` sorts them so); a file put back leaves
    /// recovered/ (`kept`).
    func putBack(_ items: [LostItem], kept: [Int64: String]) async -> Outcome {
        var outcome = Outcome()
        /// A lost folder's path → where its items go now (itself, renamed, or a folder there already).
        var placed: [[String]: [String]] = [:]
        for item in items {
            let parent = Array(item.path.dropLast())
            let folder = placed[parent] ?? parent
            let name = item.path[item.path.count - 1]
            do {
                var result = try await store.putBack(item, in: folder, as: name)
                var finalName = name
                if case .nameTaken(let byFolder) = result {
                    if byFolder && item.kind == .folder {
                        placed[item.path] = folder + [name]
                        outcome.putBack += 1
                        continue
                    }
                    finalName = copyName(name)
                    result = try await store.putBack(item, in: folder, as: finalName)
                }
                switch result {
                case .made:
                    if item.kind == .folder { placed[item.path] = folder + [finalName] }
                    if let copy = kept[item.row] { unlink(copy) }
                    outcome.putBack += 1
                    if finalName != name {
                        outcome.renamed += 1
                        logger.warning(
                            "sync: /\((folder + [name]).joined(separator: "/")) is taken on the restored server; this replica's lost \(item.kind) is put back as \(finalName)"
                        )
                    }
                case .nameTaken, .noFolder:
                    outcome.notPutBack += 1
                    logger.warning(
                        "sync: could not put back /\(item.path.joined(separator: "/")), which the restored server lost: \(result == .noFolder ? "its folder is gone" : "its name is taken"); \(kept[item.row].map { "kept in \($0)" } ?? "nothing of it is kept")"
                    )
                }
            } catch {
                outcome.notPutBack += 1
                logger.warning(
                    "sync: could not put back /\(item.path.joined(separator: "/")), which the restored server lost: \(error); \(kept[item.row].map { "kept in \($0)" } ?? "nothing of it is kept")"
                )
            }
        }
        return outcome
    }

    /// recovered/FOLDER and recovered/ go when nothing is left in them.
    static func removeIfEmpty(_ folder: String, in store: any ReplicaStore) {
        let recovered = store.url.appendingPathComponent("recovered")
        let top = recovered.appendingPathComponent(folder).path
        // Deepest folders first: each goes only when empty (rmdir refuses otherwise).
        let below = (FileManager.default.subpaths(atPath: top) ?? []).sorted { $0.count > $1.count }
        for sub in below { rmdir(top + "/" + sub) }
        rmdir(top)
        rmdir(recovered.path)
    }
}
