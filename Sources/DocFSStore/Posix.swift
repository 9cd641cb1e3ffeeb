#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider

// Thin wrappers over the system calls the store uses, kept at file level so that member
// names of `LocalStore` (`open`, `close`) never shadow them.

/// What `lstat` says about a path, in the shape the store needs.
struct FileStatus {
    enum Kind { case file, directory, symlink, other }
    var kind: Kind
    var size: Int64
    var mode: UInt16
    var modificationTime: FileTime
    var accessTime: FileTime
    var changeTime: FileTime
    var modificationDate: Date { modificationTime.date }
    var inode: UInt64
    var device: UInt64
}

func fileStatus(_ path: String) -> Result<FileStatus, ProviderError> {
    var st = stat()
    guard lstat(path, &st) == 0 else { return .failure(.posix(errno, "lstat \(path)")) }
    let kind: FileStatus.Kind
    switch st.st_mode & S_IFMT {
    case S_IFREG: kind = .file
    case S_IFDIR: kind = .directory
    case S_IFLNK: kind = .symlink
    default: kind = .other
    }
    return .success(
        FileStatus(
            kind: kind, size: Int64(st.st_size), mode: UInt16(st.st_mode & 0o7777),
            modificationTime: FileTime(seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int32(st.st_mtim.tv_nsec)),
            accessTime: FileTime(seconds: Int64(st.st_atim.tv_sec), nanoseconds: Int32(st.st_atim.tv_nsec)),
            changeTime: FileTime(seconds: Int64(st.st_ctim.tv_sec), nanoseconds: Int32(st.st_ctim.tv_nsec)),
            inode: UInt64(st.st_ino), device: UInt64(st.st_dev)))
}

func sysRename(_ from: String, _ to: String, _ what: @autoclosure () -> String) throws(ProviderError) {
    if rename(from, to) != 0 { throw .posix(errno, what()) }
}

func sysLink(_ from: String, _ to: String) -> Bool {
    link(from, to) == 0
}

@discardableResult
func sysUnlink(_ path: String) -> Int32 {
    unlink(path) == 0 ? 0 : errno
}

func sysOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    Glibc_open(path, flags, mode)
}

@inline(__always)
private func Glibc_open(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
        return Glibc.open(path, flags, mode)
    #else
        return Darwin.open(path, flags, mode)
    #endif
}

func sysClose(_ fd: Int32) {
    #if canImport(Glibc)
        _ = Glibc.close(fd)
    #else
        _ = Darwin.close(fd)
    #endif
}

/// fsync of a file or directory by path; ENOENT is not an error (the item went away).
func sysFsync(path: String, directory: Bool) throws(ProviderError) {
    let fd = sysOpen(path, O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0))
    if fd < 0 {
        let err = errno
        if err == ENOENT { return }
        throw .posix(err, "open \(path) for fsync")
    }
    defer { sysClose(fd) }
    if fsync(fd) != 0 { throw .posix(errno, "fsync \(path)") }
}

func sysReadlink(_ path: String) throws(ProviderError) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink(path, &buffer, buffer.count - 1)
    if count < 0 { throw .posix(errno, "readlink \(path)") }
    return buffer.withUnsafeBufferPointer { pointer in
        String(decoding: UnsafeRawBufferPointer(start: pointer.baseAddress, count: count), as: UTF8.self)
    }
}

func sysStatvfs(_ path: String) -> StorageStatistics {
    var st = statvfs()
    guard statvfs(path, &st) == 0 else {
        return StorageStatistics(blockSize: 4096, totalBlocks: 0, freeBlocks: 0, availableBlocks: 0, totalFiles: 0, freeFiles: 0)
    }
    let blockSize = UInt64(st.f_frsize != 0 ? st.f_frsize : st.f_bsize)
    return StorageStatistics(
        blockSize: blockSize, totalBlocks: UInt64(st.f_blocks), freeBlocks: UInt64(st.f_bfree),
        availableBlocks: UInt64(st.f_bavail), totalFiles: UInt64(st.f_files),
        freeFiles: UInt64(st.f_ffree), maxNameLength: UInt64(st.f_namemax))
}

/// The entries of a directory (names only, without `.` and `..`).
func directoryEntries(_ path: String) throws(ProviderError) -> [String] {
    guard let dir = opendir(path) else { throw .posix(errno, "open directory \(path)") }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String in
            let bytes = raw.bindMemory(to: UInt8.self)
            let length = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: UnsafeRawBufferPointer(rebasing: raw[0..<length]), as: UTF8.self)
        }
        if name == "." || name == ".." { continue }
        names.append(name)
    }
    return names
}

/// Removes a file, symlink or directory tree. Returns false if something could not be removed.
@discardableResult
func removeTree(_ path: String) -> Bool {
    guard case .success(let status) = fileStatus(path) else { return false }
    if status.kind == .directory {
        var ok = true
        if let names = try? directoryEntries(path) {
            for name in names where !removeTree(path + "/" + name) { ok = false }
        }
        return rmdir(path) == 0 && ok
    }
    return unlink(path) == 0
}

/// Copies a file into the store (for a staged file on another filesystem).
func sysCopyFile(_ source: String, to target: String) throws(ProviderError) {
    let input = sysOpen(source, O_RDONLY | O_CLOEXEC)
    guard input >= 0 else { throw .posix(errno, "open \(source) to copy it into the store") }
    defer { sysClose(input) }
    let output = sysOpen(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard output >= 0 else { throw .posix(errno, "create \(target)") }
    defer { sysClose(output) }
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            let err = errno
            sysUnlink(target)
            throw .posix(err, "read \(source)")
        }
        if count == 0 { break }
        var written = 0
        while written < count {
            let result = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
            if result < 0 {
                if errno == EINTR { continue }
                let err = errno
                sysUnlink(target)
                throw .posix(err, "copy \(source) into the store")
            }
            written += result
        }
    }
}
