import Foundation
import Glibc
import DocFSProvider
import Synchronization

/// Folders in the provider's staging area where a staged file takes its final name while the
/// provider imports it (the provider names the item after the file).
///
/// The folders are reused: creating and removing a folder per import cost two inode allocations
/// on ext4 (~0.3 ms each on a VM), more than the import itself.
final class ImportStaging: @unchecked Sendable {
    private let root: URL
    private let lock = Mutex<Void>(())
    private var free: [String] = []
    private var made = 0

    init(root: URL) { self.root = root }

    /// An empty slot folder (its path), made on first need.
    func acquire() throws(ProviderError) -> String {
        if let slot = lock.withLock({ _ in free.popLast() }) { return slot }
        let n = lock.withLock { _ in
            made += 1; return made
        }
        let slot = root.appendingPathComponent("slot-\(getpid())-\(n)", isDirectory: true).path
        guard mkdir(slot, 0o700) == 0 || errno == EEXIST else {
            throw .posix(errno, "create import staging folder")
        }
        return slot
    }

    /// The staged file at `sealedPath`, handed to the provider security-scoped under `name` in a
    /// borrowed slot; the slot comes back when the scope finishes.
    func scoped(sealed sealedPath: String, name: String) throws(ProviderError) -> SecurityScopedURL {
        let slot = try acquire()
        return SecurityScopedURL(sealed: sealedPath, name: name, borrowing: slot) { [self] in
            lock.withLock { _ in free.append(slot) }
        }
    }

    /// Removes the slot folders (at unmount; they are empty between imports).
    func removeAll() {
        let slots: [String] = lock.withLock { _ in
            defer { free.removeAll() }; return free
        }
        for slot in slots { rmdir(slot) }
    }
}

extension Bridge {
    /// Hands the staged file at `sealedPath` to the provider as a new item `name` in `parent`: by
    /// its path to a provider that takes it so (`StagedFileImportProvider`, the embedded store),
    /// otherwise security-scoped in a borrowed slot folder. Either way the staged file is gone
    /// afterwards: taken by the provider, or removed.
    func importStaged(
        sealed sealedPath: String, name: String, into parent: ItemIdentifier,
        attributes: NewItemAttributes?
    ) async throws(ProviderError) -> Item {
        if let stagedImports {
            do {
                return try await stagedImports.importStagedFile(
                    at: sealedPath, named: name, toParentItemIdentifier: parent,
                    attributes: attributes)
            } catch {
                _ = Glibc.unlink(sealedPath) // refused: the file is where it was
                throw error
            }
        }
        let scoped: SecurityScopedURL
        do { scoped = try importSlots.scoped(sealed: sealedPath, name: name) } catch {
            _ = Glibc.unlink(sealedPath)
            throw error
        }
        defer { scoped.finish() }
        return try await provider.importDocument(from: scoped, toParentItemIdentifier: parent, attributes: attributes)
    }
}
