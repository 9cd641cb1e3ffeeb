import ArgumentParser
import Foundation
import Logging
import DocFSStore

// `make bench-scale`'s store builder: adds a generated tree to a store made by `docfs init`,
// through the store's own API (LocalStore.populate: large transactions, no FUSE), so that a
// million items take a minute, not hours. Never part of the tests' assertions about speed.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("docfs-scale: \(message)\n".utf8))
    exit(2)
}

/// The tree's shape, the same options for both commands.
struct ShapeOptions: ParsableArguments {
    @Option(help: "Items in all (folders and files).", transform: count)
    var items = 1_000_000
    @Option(name: .customLong("big-folder"), help: "Files in one big folder (default: a tenth of the items).", transform: count)
    var bigFolder: Int?
    @Option(name: .customLong("per-folder"), help: "Files per folder of the rest of the tree.", transform: count)
    var perFolder = 1000
    @Option(name: .customLong("file-size"), help: "Bytes per file.", transform: count)
    var fileSize = 0

    var shape: ScaleShape {
        ScaleShape(items: items, bigFolderFiles: bigFolder, filesPerFolder: perFolder, fileSize: fileSize)
    }
}

/// A count, `_` allowed between digits (1_000_000), never negative.
func count(_ text: String) throws -> Int {
    guard let value = Int(text.replacingOccurrences(of: "_", with: "")), value >= 0 else {
        throw ValidationError("'\(text)' is not a count")
    }
    return value
}

struct DocFSScale: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "docfs-scale",
        abstract:
            "Builds large trees for `make bench-scale` (in a store through its own API, or as plain files); runs many replicas for `make bench-replicas`.",
        subcommands: [Populate.self, Native.self, Replicas.self])
}

struct Populate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Adds a generated tree to a store made by `docfs init`.")
    @Argument(help: "The store's folder.") var store: String
    @OptionGroup var shape: ShapeOptions

    func run() throws {
        var logger = Logger(label: "docfs-scale")
        logger.logLevel = .warning
        let start = Date()
        let terminal = isatty(2) != 0
        let shape = self.shape.shape
        do {
            let added = try LocalStore.populate(at: URL(fileURLWithPath: store), shape: shape, logger: logger) { done in
                if terminal { FileHandle.standardError.write(Data("\r\(done) items…".utf8)) }
            }
            if terminal { FileHandle.standardError.write(Data("\r".utf8)) }
            print(
                String(
                    format: "populated %@ with %d items (a folder of %d files, the rest in a tree) in %.1f s",
                    store, added, shape.bigFolderFiles, Date().timeIntervalSince(start)))
        } catch {
            fail("\(error)")
        }
    }
}

struct Native: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Makes the same shape as plain files and folders in a folder.")
    @Argument(help: "The folder.") var folder: String
    @OptionGroup var shape: ShapeOptions

    func run() {
        let start = Date()
        let made = makeNative(at: folder, shape.shape)
        print(String(format: "made %d items in %@ in %.1f s", made, folder, Date().timeIntervalSince(start)))
    }
}

/// The shape of LocalStore.populate as plain files (the native side of `make bench-scale`).
func makeNative(at root: String, _ shape: ScaleShape) -> Int {
    let payload = [UInt8](repeating: UInt8(ascii: "x"), count: shape.fileSize)
    var made = 0
    func folder(_ path: String) { if mkdir(path, 0o755) != 0 && errno != EEXIST { fail("mkdir \(path): \(errno)") }; made += 1 }
    func file(_ path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if fd < 0 { fail("create \(path): \(errno)") }
        if !payload.isEmpty { _ = payload.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
        close(fd)
        made += 1
    }
    folder(root + "/big")
    for index in 0..<shape.bigFolderFiles { file(root + "/big/" + String(format: "f%07d.txt", index)) }
    folder(root + "/tree")
    var remaining = shape.treeFiles
    var top = 0
    while remaining > 0 {
        let middle = root + "/tree/" + String(format: "d%04d", top)
        folder(middle)
        top += 1
        for sub in 0..<10 where remaining > 0 {
            let leaf = middle + "/" + String(format: "s%02d", sub)
            folder(leaf)
            let count = min(shape.filesPerFolder, remaining)
            for index in 0..<count { file(leaf + "/" + String(format: "f%04d.txt", index)) }
            remaining -= count
        }
    }
    return made
}

DocFSScale.main()
