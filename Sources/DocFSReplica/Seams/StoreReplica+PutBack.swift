import Foundation
import DocFSProvider
import DocFSStore

/// A lost item made again through the store's own actions (`createDirectory`, the staged-file
/// import, `createSymbolicLink`), so that it is checked and sent like an item a program made.
extension StoreReplica {
    package func putBack(_ lost: LostItem, in folder: [String], as name: String) async throws(ProviderError) -> PutBackResult {
        guard let store = provider else { throw ProviderError(.ioError, "store \(url.path) is closed") }
        var parent = ItemIdentifier.rootContainer
        for part in folder {
            guard let child = try? store.childItem(named: part, in: parent), child.kind == .folder else { return .noFolder }
            parent = child.identifier
        }
        if let taken = try? store.childItem(named: name, in: parent) { return .nameTaken(byFolder: taken.kind == .folder) }
        let made: Item
        switch lost.kind {
        case .folder:
            made = try await store.createDirectory(withName: name, inParentItemIdentifier: parent, attributes: lost.attributes)
        case .symlink:
            guard let target = lost.symlinkTarget else { throw ProviderError(.invalidArgument, "a symbolic link without its target") }
            made = try await store.createSymbolicLink(withName: name, target: target, inParentItemIdentifier: parent, attributes: lost.attributes)
        case .file:
            guard let source = lost.contents else { throw ProviderError(.noSuchItem, "its contents are not here") }
            // A link of the kept copy in staging/: the import takes (renames) it, recovered/ keeps its own name.
            let folder = stagingDirectory.appendingPathComponent("put-back-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let staged = folder.appendingPathComponent("file").path
            guard link(source, staged) == 0 || (try? FileManager.default.copyItem(atPath: source, toPath: staged)) != nil else {
                throw ProviderError(.noSuchItem, "could not stage its kept copy \(source)")
            }
            made = try await store.importStagedFile(at: staged, named: name, toParentItemIdentifier: parent, attributes: lost.attributes)
        default:
            throw ProviderError(.invalidArgument, "a \(lost.kind) is not put back")
        }
        guard let row = LocalStore.row(for: made.identifier) else { throw ProviderError(.noSuchItem, "the new item has no row") }
        return .made(row: row)
    }
}
