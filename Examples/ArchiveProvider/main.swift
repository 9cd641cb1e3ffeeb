import Foundation
import Glibc
import DocFS

// docfs-archive ARCHIVE MOUNTPOINT: serves a tar archive's contents, read-only, until unmounted
// (umount / fusermount3 -u) or interrupted. An example of a provider written against the DocFS
// library; `make test` builds and mounts it (ArchiveExampleTests).
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: docfs-archive ARCHIVE MOUNTPOINT\n".utf8))
    exit(2)
}
do {
    let provider = try ArchiveProvider(archive: arguments[1])
    let mount = try ProviderMount(
        provider, at: arguments[2],
        options: MountOptions(fuseOptions: ["ro"], sourceName: "docfs-archive:" + arguments[1]))
    try mount.serve(signals: true)
} catch {
    FileHandle.standardError.write(Data("docfs-archive: \(error)\n".utf8))
    exit(1)
}
