import Foundation
import Synchronization
import DocFSProvider
import DocFSWire
@testable import DocFSStore
@testable import DocFSReplica

/// What contents on demand keeps in the fake: its handler, the pinned rows, and the rows the
/// kernel would have been told about.
struct OnDemandFakeState {
    var handler: (any OnDemandHandler)?
    var pins: Set<Int64> = []
    var placed: [Int64] = []
}

/// The fake's contents on demand mechanics (`OnDemandStore`): a file is downloaded when its
/// content file exists; every file allows evicting; a pass holds the fake's `writer` lock as the store holds
/// its writer lock.
extension InMemoryReplicaStore {
    var onDemandHandler: (any OnDemandHandler)? { onDemandState.withLock { $0.handler } }
    func setOnDemandHandler(_ handler: (any OnDemandHandler)?) { onDemandState.withLock { $0.handler = handler } }

    func onDemandRow(of identifier: ItemIdentifier) -> Int64? {
        if identifier == .rootContainer { return ReplicaRows.root }
        return Int64(identifier.rawValue).map(currentRow)
    }

    func onDemandFile(row: Int64) -> OnDemandFile? {
        guard let item = incomingItem(row) else { return nil }
        return OnDemandFile(
            row: row, parent: row == ReplicaRows.root ? nil : item.parentRow, kind: item.kind,
            isDownloaded: FileManager.default.fileExists(atPath: contentFile(row).path),
            size: item.size, contentVersion: UInt64(item.contentVersion), remoteKey: item.contentKey, allowsEvicting: true,
            waiting: state.withLock { $0.outbox.contains { $0.row == row } })
    }

    func openStoredContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let row = onDemandRow(of: identifier), let file = onDemandFile(row: row), file.isFile else {
            throw ProviderError(.noSuchItem, "no file with identifier '\(identifier)'")
        }
        var path = contentFile(row).path
        if !file.isDownloaded {
            guard let handler = onDemandHandler else { throw ProviderError(.serverUnreachable, "not syncing", errno: EIO) }
            path = try handler.downloadedPath(ofRow: row)
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw ProviderError.posix(errno, "open \(path)") }
        return fd
    }

    func newDownloadFile(row: Int64) throws(ProviderError) -> String {
        let path = stagingDirectory.appendingPathComponent("download-\(row)-\(UUID().uuidString)").path
        guard FileManager.default.createFile(atPath: path, contents: nil) else { throw ProviderError(.ioError, "make \(path)") }
        return path
    }

    func placeDownloadedContents(row: Int64, from path: String, contentVersion: UInt64, key: String) throws(ProviderError) -> Bool {
        try writer.withLock { _ throws(ProviderError) -> Bool in
            guard let file = onDemandFile(row: row), file.isFile, !file.isDownloaded,
                file.contentVersion == contentVersion, file.remoteKey == key
            else { return false }
            guard rename(path, contentFile(row).path) == 0 else { throw ProviderError.posix(errno, "place \(path)") }
            return true
        }
    }

    func noteContentsPlaced(row: Int64) { onDemandState.withLock { $0.placed.append(row) } }

    func onDemandContentPath(row: Int64) -> String { contentFile(row).path }

    func onDemandPass<T>(_ body: (any OnDemandPassing) throws(ProviderError) -> T) throws(ProviderError) -> T {
        try writer.withLock { _ throws(ProviderError) -> T in try body(InMemoryOnDemandPass(store: self)) }
    }

    // MARK: For tests

    /// A file of the server listed here, its contents here (`text`) or not (nil).
    func addServerFile(
        _ row: Int64, _ name: String, size: Int64, text: String?, key: String? = "key", in parent: Int64 = ReplicaRows.root,
        version: Int64 = 1
    ) throws {
        state.withLock { s in
            s.items[row] = ServerItem(
                id: row, parentID: parent, name: name, kind: .file, size: size,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1), contentKey: key, contentVersion: version)
        }
        if let text { try Data(text.utf8).write(to: contentFile(row)) }
    }

    func addServerFolder(_ row: Int64, _ name: String, in parent: Int64 = ReplicaRows.root) {
        state.withLock { s in
            s.items[row] = ServerItem(
                id: row, parentID: parent, name: name, kind: .folder,
                creationTime: FileTime(totalNanoseconds: 1),
                modificationTime: FileTime(totalNanoseconds: 1), posixPermissions: 0o755)
        }
    }

    /// Another replica's version of the file arrived: its contents are not here.
    func replaceServerVersion(_ row: Int64, version: Int64, key: String) {
        state.withLock { s in
            s.items[row]?.contentVersion = version
            s.items[row]?.contentKey = key
        }
        try? FileManager.default.removeItem(at: contentFile(row))
    }

    var placedRows: [Int64] { onDemandState.withLock { $0.placed } }
}

/// A pass over the fake, under its `writer` lock.
struct InMemoryOnDemandPass: OnDemandPassing {
    let store: InMemoryReplicaStore

    private func files() -> [OnDemandFile] {
        store.state.withLock { Array($0.items.keys) }.sorted().compactMap { store.onDemandFile(row: $0) }
    }

    func contentsHere(limit: Int64, reserving: Int64) throws(ProviderError) -> (local: Int64, candidates: [Int64]) {
        let here = files().filter { $0.isFile && $0.isDownloaded }
        let local = here.reduce(0) { $0 + $1.size }
        guard local + reserving > limit else { return (local, []) }
        return (local, here.filter { $0.size > 0 && $0.remoteKey != nil && !$0.waiting }.map(\.row))
    }

    func filesBelow(_ folder: Int64, downloaded: Bool) throws(ProviderError) -> [Int64] {
        let all = files()
        var folders: Set<Int64> = [folder]
        var grew = true
        while grew {
            let more = all.filter { $0.isFolder && $0.parent.map(folders.contains) == true && !folders.contains($0.row) }
            grew = !more.isEmpty
            folders.formUnion(more.map(\.row))
        }
        return all.filter { $0.isFile && $0.isDownloaded == downloaded && $0.parent.map(folders.contains) == true }.map(\.row)
    }

    func evict(
        _ rows: [Int64], stopAt enough: Int64?, blocker: (OnDemandFile) -> String?
    )
        throws(ProviderError) -> (evicted: [Int64], bytes: Int64, kept: [(row: Int64, reason: String)])
    {
        var evicted: [Int64] = []
        var bytes: Int64 = 0
        var kept: [(row: Int64, reason: String)] = []
        for row in rows {
            if let enough, bytes >= enough { break }
            guard let file = store.onDemandFile(row: row) else { continue }
            if let reason = blocker(file) {
                kept.append((row, reason))
                continue
            }
            try? FileManager.default.removeItem(at: store.contentFile(row))
            evicted.append(row)
            bytes += file.size
        }
        return (evicted, bytes, kept)
    }

    func setPinned(_ pinned: Bool, row: Int64) throws(ProviderError) {
        store.onDemandState.withLock { s in if pinned { s.pins.insert(row) } else { s.pins.remove(row) } }
    }

    func pinnedRows() throws(ProviderError) -> Set<Int64> { store.onDemandState.withLock { $0.pins } }
}
