import Foundation
import Glibc
import DocFSProvider

/// One FILE argument, looked at before anything is copied.
struct ImportSource {
    let path: String
    let name: String
    var isDirectory = false
    var fileCount = 1
    var bytes: Int64 = 0
    var problem: String?

    init(path: String) {
        self.path = path
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        name = (trimmed as NSString).lastPathComponent
        var st = stat()
        guard lstat(path, &st) == 0 else { problem = String(cString: strerror(errno)); return }
        switch st.st_mode & S_IFMT {
        case S_IFREG: bytes = Int64(st.st_size)
        case S_IFDIR:
            isDirectory = true
            fileCount = 0
            let walker = FileManager.default.enumerator(atPath: path)
            while let rel = walker?.nextObject() as? String {
                var s = stat()
                if lstat(path + "/" + rel, &s) == 0, s.st_mode & S_IFMT == S_IFREG { fileCount += 1; bytes += Int64(s.st_size) }
            }
        case S_IFLNK: bytes = 0
        default: problem = "only files, folders and symbolic links can be imported"
        }
    }
}
