import Foundation
import Glibc
import Logging
import Synchronization
import DocFSProvider
import DocFSStore

/// A store that is not mounted: LocalStore directly, with the same rules the mount applies.
final class StoreDestination: ImportDestination {
    let store: LocalStore
    let folder: Item
    let folderPath: String

    init(store path: String, folder: String) throws {
        var log = Logger(label: "docfs.import")
        log.logLevel = .warning
        do { store = try LocalStore.open(at: URL(fileURLWithPath: path), logger: log) } catch let error as ProviderError {
            if error.code == .busy {
                throw UserFacingError(
                    "docfs: cannot import into store \(path): \(error.reason); import through the mount instead (--to MOUNT/FOLDER)")
            }
            throw UserFacingError("docfs: cannot open store \(path): \(error)")
        } catch {
            throw UserFacingError("docfs: cannot open store \(path): \(error)")
        }
        let opened: LocalStore = store
        var current = try? opened.item(for: .rootContainer)
        for component in folder.split(separator: "/") where component != "." {
            current = current.flatMap { try? opened.childItem(named: String(component), in: $0.identifier) }
        }
        guard let current, current.kind == .folder else {
            opened.close()
            throw UserFacingError("docfs: no folder \(folder) in store \(path)")
        }
        self.folder = current
        self.folderPath = folder
    }

    func close() { store.close() }

    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome {
        let name = source.name
        // The folder's rules, as the mount checks them before anything is written.
        do throws(ProviderError) { try CapabilityCheck.add(into: folder) } catch {
            return .refused("\(folderPath): \(error.reason)")
        }
        if (try? store.childItem(named: name, in: folder.identifier)) != nil { return .refused("\(name) already exists in \(folderPath)") }
        do throws(ProviderError) {
            try store.admitItem(named: name, kind: source.isDirectory ? .folder : .file, into: folder.identifier)
        } catch {
            return .refused(error.reason.isEmpty ? error.code.rawValue : error.reason)
        }
        // Stage a copy under a sealed name; it is readable by the store only inside its scope.
        progress.file(name)
        let sealed = store.stagingDirectory.appendingPathComponent("import-\(getpid())-\(UUID().uuidString)").path
        if let problem = stageCopy(source, to: sealed, progress: &progress) {
            try? FileManager.default.removeItem(atPath: sealed)
            return problem
        }
        // Handed to the store by path (`StagedFileImportProvider`): taken on success, left on a refusal.
        let store = self.store, parent = folder.identifier
        let result = Self.blocking { () async throws(ProviderError) -> Item in
            try await store.importStagedFile(at: sealed, named: name, toParentItemIdentifier: parent, attributes: nil)
        }
        if case .failure = result { try? FileManager.default.removeItem(atPath: sealed) }
        switch result {
        case .success(let item):
            progress.fileDone()
            return .imported(item.identifier.rawValue)
        case .failure(let error):
            return .refused(error.reason.isEmpty ? error.code.rawValue : error.reason)
        }
    }

    /// Copies the source to the sealed staging path; nil when done.
    private func stageCopy(_ source: ImportSource, to sealed: String, progress: inout ImportProgress) -> ImportOutcome? {
        if source.isDirectory {
            do { try FileManager.default.copyItem(atPath: source.path, toPath: sealed) } catch {
                return .refused("cannot stage it: \(error.localizedDescription)")
            }
            progress.bytes(Int(source.bytes))
            return importCancelled.load(ordering: .relaxed) ? .cancelled : nil
        }
        var st = stat()
        guard lstat(source.path, &st) == 0 else { return .refused(String(cString: strerror(errno))) }
        if st.st_mode & S_IFMT == S_IFLNK {
            guard let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: source.path), symlink(dest, sealed) == 0 else {
                return .refused("cannot stage the link")
            }
            return nil
        }
        let input = open(source.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return .refused(String(cString: strerror(errno))) }
        defer { Glibc.close(input) }
        let output = open(sealed, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0o7777)
        guard output >= 0 else { return .refused("cannot stage it: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        while true {
            if importCancelled.load(ordering: .relaxed) { return .cancelled }
            let n = read(input, buffer, size)
            if n < 0 { if errno == EINTR { continue }; return .refused("reading it: \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = write(output, buffer + done, n - done)
                if w < 0 { if errno == EINTR { continue }; return .refused("cannot stage it: \(String(cString: strerror(errno)))") }
                done += w
            }
            progress.bytes(n)
        }
        var times = [timespec](repeating: timespec(), count: 2)
        times[0] = st.st_atim
        times[1] = st.st_mtim
        futimens(output, times)
        return importCancelled.load(ordering: .relaxed) ? .cancelled : nil
    }

    /// Runs an async provider action from this synchronous command.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws(ProviderError) -> T) -> Result<T, ProviderError> {
        runBlocking { try await body() }.mapError { $0 as? ProviderError ?? ProviderError(.ioError, "\($0)") }
    }
}
