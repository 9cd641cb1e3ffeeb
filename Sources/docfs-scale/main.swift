import Foundation
import Logging
import DocFSStore

// `make bench-scale`'s store builder: adds a generated tree to a store made by `docfs init`,
// through the store's own API (LocalStore.populate: large transactions, no FUSE), so that a
// million items take a minute, not hours. Never part of the tests' assertions about speed.
//
//   docfs-scale populate STORE --items N [--big-folder N] [--per-folder N] [--file-size BYTES]
//   docfs-scale native DIR --items N [...]    the same shape as plain files and folders in DIR

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("docfs-scale: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.first == "populate" || arguments.first == "native", arguments.count >= 2 else {
    fail("usage: docfs-scale populate|native STORE --items N [--big-folder N] [--per-folder N] [--file-size BYTES]")
}
let storePath = arguments[1]
var options: [String: Int] = [:]
var index = 2
while index < arguments.count {
    let name = arguments[index]
    guard ["--items", "--big-folder", "--per-folder", "--file-size"].contains(name), index + 1 < arguments.count,
          let value = Int(arguments[index + 1].replacingOccurrences(of: "_", with: "")), value >= 0 else {
        fail("unknown or incomplete option \(name)")
    }
    options[name] = value
    index += 2
}
let shape = ScaleShape(items: options["--items"] ?? 1_000_000, bigFolderFiles: options["--big-folder"],
                       filesPerFolder: options["--per-folder"] ?? 1000, fileSize: options["--file-size"] ?? 0)
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

if arguments[0] == "native" {
    let start = Date()
    let made = makeNative(at: storePath, shape)
    print(String(format: "made %d items in %@ in %.1f s", made, storePath, Date().timeIntervalSince(start)))
    exit(0)
}

var logger = Logger(label: "docfs-scale")
logger.logLevel = .warning
let start = Date()
let terminal = isatty(2) != 0
do {
    let added = try LocalStore.populate(at: URL(fileURLWithPath: storePath), shape: shape, logger: logger) { done in
        if terminal { FileHandle.standardError.write(Data("\r\(done) items…".utf8)) }
    }
    if terminal { FileHandle.standardError.write(Data("\r".utf8)) }
    print(String(format: "populated %@ with %d items (a folder of %d files, the rest in a tree) in %.1f s",
                 storePath, added, shape.bigFolderFiles, Date().timeIntervalSince(start)))
} catch {
    fail("\(error)")
}
