import Foundation
import Logging
import DocFSStore

// `make bench-scale`'s store builder: adds a generated tree to a store made by `docfs init`,
// through the store's own API (LocalStore.populate: large transactions, no FUSE), so that a
// million items take a minute, not hours. Never part of the tests' assertions about speed.
//
//   docfs-scale populate STORE --items N [--big-folder N] [--per-folder N] [--file-size BYTES]

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("docfs-scale: \(message)\n".utf8))
    exit(2)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.first == "populate", arguments.count >= 2 else {
    fail("usage: docfs-scale populate STORE --items N [--big-folder N] [--per-folder N] [--file-size BYTES]")
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
