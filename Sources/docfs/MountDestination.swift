import Foundation
import Glibc
import Logging
import DocFSProvider
import DocFSStore

/// DIR inside a docfs mount: plain POSIX calls, so the mount's rules apply as for `cp`.
struct MountDestination: ImportDestination {
    let folder: String

    init(folder: String) throws {
        var st = stat()
        guard stat(folder, &st) == 0 else { throw UserFacingError("docfs: \(folder): \(String(cString: strerror(errno)))") }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw UserFacingError("docfs: \(folder) is not a folder") }
        guard Info.attribute(folder, "user.docfs.identifier") != nil else {
            throw UserFacingError(
                "docfs: \(folder) is not inside a docfs mount (to import into a store that is not mounted, use --store STORE --to /FOLDER)")
        }
        self.folder = folder
    }

    func close() {}

    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome {
        let target = folder + "/" + source.name
        let outcome = copy(source.path, to: target, progress: &progress)
        switch outcome {
        case .imported:
            guard let id = Info.attribute(target, "user.docfs.identifier") else {
                return .refused("imported, but its identifier cannot be read: \(String(cString: strerror(errno)))")
            }
            return .imported(id)
        case .refused, .cancelled:
            return outcome
        }
    }

    /// Copies one file, link or tree; a failed or cancelled folder is removed again.
    private func copy(_ source: String, to target: String, progress: inout ImportProgress) -> ImportOutcome {
        var st = stat()
        guard lstat(source, &st) == 0 else { return .refused(String(cString: strerror(errno))) }
        switch st.st_mode & S_IFMT {
        case S_IFLNK:
            guard let dest = try? FileManager.default.destinationOfSymbolicLink(atPath: source) else { return .refused("cannot read the link") }
            return symlink(dest, target) == 0 ? .imported("") : .refused(String(cString: strerror(errno)))
        case S_IFDIR:
            guard mkdir(target, st.st_mode & 0o7777) == 0 else { return .refused(String(cString: strerror(errno))) }
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: source)) ?? []).sorted()
            for name in names {
                let inner = copy(source + "/" + name, to: target + "/" + name, progress: &progress)
                switch inner {
                case .imported: continue
                case .refused(let reason):
                    removeTree(target)
                    return .refused("\(name): \(reason)")
                case .cancelled:
                    removeTree(target)
                    return .cancelled
                }
            }
            return .imported("")
        case S_IFREG:
            return copyFile(source, to: target, mode: st.st_mode & 0o7777, progress: &progress)
        default:
            return .refused("only files, folders and symbolic links can be imported")
        }
    }

    private func copyFile(_ source: String, to target: String, mode: mode_t, progress: inout ImportProgress) -> ImportOutcome {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { return .refused(String(cString: strerror(errno))) }
        defer { Glibc.close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard output >= 0 else { return .refused(String(cString: strerror(errno))) }
        progress.file((target as NSString).lastPathComponent)
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 4096)
        defer { buffer.deallocate() }
        /// Drops the new file before its close: unlinked while open, it is never imported.
        func abandon() { unlink(target); Glibc.close(output) }
        while true {
            if importCancelled.load(ordering: .relaxed) { abandon(); return .cancelled }
            let n = read(input, buffer, size)
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno; abandon(); return .refused("reading it: \(String(cString: strerror(e)))")
            }
            if n == 0 { break }
            var done = 0
            while done < n {
                let w = write(output, buffer + done, n - done)
                if w < 0 {
                    if errno == EINTR { continue }
                    let e = errno; abandon(); return .refused(String(cString: strerror(e)))
                }
                done += w
            }
            progress.bytes(n)
        }
        if importCancelled.load(ordering: .relaxed) { abandon(); return .cancelled }
        // close() is the import: its result is the provider's verdict.
        if Glibc.close(output) != 0 { return .refused(String(cString: strerror(errno))) }
        progress.fileDone()
        return .imported("")
    }

    private func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
}
