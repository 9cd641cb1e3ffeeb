import Foundation
import Glibc
import DocFS

/// A read-only provider of a different kind: the contents of a tar archive (ustar / GNU), read
/// once into the `FileWrapper` model and served from it. It implements only the three reading
/// members and opts into nothing; every change is refused by the core protocol's defaults
/// (EROFS), and its items' capabilities say so, so `ls -l` shows no `w`.
final class ArchiveProvider: Provider, @unchecked Sendable {
    private struct Entry {
        var item: Item
        var wrapper: FileWrapper
        var children: [String] = []
    }
    /// By identifier, which is the member's path in the archive ("" is the root).
    private let entries: [ItemIdentifier: Entry]

    init(archive path: String) throws {
        let members = try TarReader.members(of: Data(contentsOf: URL(fileURLWithPath: path)))
        let rootTime = Date()
        var entries: [ItemIdentifier: Entry] = [:]
        func identifier(_ path: String) -> ItemIdentifier { path.isEmpty ? .rootContainer : ItemIdentifier(path) }
        func parentPath(_ path: String) -> String {
            guard let slash = path.lastIndex(of: "/") else { return "" }
            return String(path[..<slash])
        }
        func add(
            _ path: String, _ wrapper: FileWrapper, kind: ItemKind, size: Int64, mode: UInt16, mtime: Date,
            owner: UInt32, group: UInt32, target: String? = nil
        ) {
            let id = identifier(path)
            let name = path.isEmpty ? "/" : String(path[(path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex)...])
            let reading: Capabilities = kind == .folder ? [.allowsReading, .allowsContentEnumerating] : [.allowsReading]
            let item = Item(
                identifier: id, parentIdentifier: identifier(parentPath(path)), filename: name, kind: kind,
                contentType: kind == .folder ? .folder : kind == .symlink ? .symbolicLink : .data,
                documentSize: size, childItemCount: kind == .folder ? 0 : nil, creationDate: mtime,
                contentModificationDate: mtime, capabilities: reading, symlinkTargetPath: target,
                posixPermissions: mode, ownerID: owner, groupID: group)
            if entries[id] == nil, !path.isEmpty {
                entries[identifier(parentPath(path)), default: Entry(item: item, wrapper: wrapper)].children.append(path)
            }
            entries[id] = Entry(item: item, wrapper: wrapper, children: entries[id]?.children ?? [])
        }
        add("", FileWrapper(directoryWithFileWrappers: [:]), kind: .folder, size: 0, mode: 0o555, mtime: rootTime, owner: getuid(), group: getgid())
        for member in members {
            // Folders the archive names only through their contents.
            var missing: [String] = []
            var cursor = parentPath(member.path)
            while !cursor.isEmpty, entries[identifier(cursor)] == nil { missing.append(cursor); cursor = parentPath(cursor) }
            for folder in missing.reversed() {
                add(
                    folder, FileWrapper(directoryWithFileWrappers: [:]), kind: .folder, size: 0, mode: 0o555, mtime: rootTime,
                    owner: getuid(), group: getgid())
            }
            switch member.kind {
            case .directory:
                add(
                    member.path, FileWrapper(directoryWithFileWrappers: [:]), kind: .folder, size: 0, mode: member.mode & ~0o222,
                    mtime: member.mtime, owner: member.uid, group: member.gid)
            case .file(let data):
                add(
                    member.path, FileWrapper(regularFileWithContents: data), kind: .file, size: Int64(data.count),
                    mode: member.mode & ~0o222, mtime: member.mtime, owner: member.uid, group: member.gid)
            case .symlink(let target):
                add(
                    member.path, FileWrapper(symbolicLinkWithDestination: target), kind: .symlink, size: Int64(target.utf8.count),
                    mode: 0o777, mtime: member.mtime, owner: member.uid, group: member.gid, target: target)
            }
        }
        // Exact counts: rmdir and find rely on them.
        for (id, entry) in entries where entry.item.kind == .folder {
            entries[id]!.children.sort()
            entries[id]!.item.childItemCount = entry.children.count
            entries[id]!.item.childFolderCount = entry.children.filter { entries[identifier($0)]?.item.kind == .folder }.count
        }
        self.entries = entries
    }

    func item(for identifier: ItemIdentifier) throws(ProviderError) -> Item {
        guard let entry = entries[identifier] else { throw ProviderError(.noSuchItem) }
        return entry.item
    }

    func enumerateItems(in container: ItemIdentifier) throws(ProviderError) -> [Item] {
        guard let entry = entries[container], entry.item.kind == .folder else { throw ProviderError(.notDirectory) }
        return entry.children.compactMap { entries[ItemIdentifier($0)]?.item }
    }

    /// The member's bytes in an anonymous file (made, unlinked, handed over).
    func openContents(of identifier: ItemIdentifier) throws(ProviderError) -> Int32 {
        guard let data = entries[identifier]?.wrapper.regularFileContents else { throw ProviderError(.isDirectory) }
        let path = NSTemporaryDirectory() + "docfs-archive-\(getpid())-\(UUID().uuidString)"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .posix(errno, "create \(path)") }
        unlink(path)
        let written = data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        guard written == data.count else { close(fd); throw .posix(errno, "write \(path)") }
        return fd
    }
}

/// The members of a ustar / GNU tar archive: files, folders and symbolic links (long names by
/// GNU 'L' records; other record types are skipped).
enum TarReader {
    struct Member {
        enum Kind { case file(Data), directory, symlink(String) }
        var path: String
        var kind: Kind
        var mode: UInt16
        var uid: UInt32
        var gid: UInt32
        var mtime: Date
    }

    struct Corrupt: Error, CustomStringConvertible { var description: String }

    static func members(of archive: Data) throws -> [Member] {
        let bytes = [UInt8](archive)
        var members: [Member] = []
        var offset = 0
        var longName: String?
        func field(_ start: Int, _ length: Int) -> String {
            let slice = bytes[offset + start..<offset + start + length]
            return String(decoding: slice.prefix { $0 != 0 }, as: UTF8.self)
        }
        func octal(_ start: Int, _ length: Int) -> Int {
            Int(field(start, length).trimmingCharacters(in: .whitespaces), radix: 8) ?? 0
        }
        while offset + 512 <= bytes.count {
            if bytes[offset..<offset + 512].allSatisfy({ $0 == 0 }) { break }
            let size = octal(124, 12)
            let type = bytes[offset + 156]
            let dataStart = offset + 512
            guard dataStart + size <= bytes.count else { throw Corrupt(description: "member at \(offset) runs past the end") }
            let data = Data(bytes[dataStart..<dataStart + size])
            var path = field(0, 100)
            let prefix = field(345, 155)
            if field(257, 5) == "ustar", !prefix.isEmpty { path = prefix + "/" + path }
            if let long = longName { path = long; longName = nil }
            while path.hasPrefix("./") { path.removeFirst(2) }
            while path.hasSuffix("/") { path.removeLast() }
            let mode = UInt16(truncatingIfNeeded: octal(100, 8)) & 0o7777
            let mtime = Date(timeIntervalSince1970: TimeInterval(octal(136, 12)))
            let uid = UInt32(truncatingIfNeeded: octal(108, 8)), gid = UInt32(truncatingIfNeeded: octal(116, 8))
            switch type {
            case UInt8(ascii: "L"):
                longName = String(decoding: data.prefix { $0 != 0 }, as: UTF8.self)
            case UInt8(ascii: "0"), 0, UInt8(ascii: "7"):
                if !path.isEmpty { members.append(Member(path: path, kind: .file(data), mode: mode, uid: uid, gid: gid, mtime: mtime)) }
            case UInt8(ascii: "5"):
                if !path.isEmpty { members.append(Member(path: path, kind: .directory, mode: mode, uid: uid, gid: gid, mtime: mtime)) }
            case UInt8(ascii: "2"):
                members.append(Member(path: path, kind: .symlink(field(157, 100)), mode: mode, uid: uid, gid: gid, mtime: mtime))
            default:
                break // hard links, devices, pax headers: not served
            }
            offset = dataStart + (size + 511) / 512 * 512
        }
        return members
    }
}
