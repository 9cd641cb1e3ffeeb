import CFuse
import DocFSProvider

// fsync of a directory: `mkdir`, `rename` and `unlink` are committed when they return (they
// survive kill -9); an fsync of the folder makes them survive a power cut as well, the way an
// editor's write-temp, fsync, rename, fsync(dir) expects.
extension Bridge {
    func fsyncdir(_ reply: consuming Reply, _ ino: UInt64) {
        let d = reply.deferred()
        perform("fsyncdir", d, mayBlock: true) { [self] () async throws(RequestError) in
            try await attempt(.ino(ino)) { () async throws(ProviderError) in try await provider.synchronize() }
            d.ok()
        }
    }
}
