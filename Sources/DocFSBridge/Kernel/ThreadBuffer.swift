import Glibc

/// A read buffer per FUSE thread, reused across requests.
///
/// A fresh allocation per read (up to 1 MiB) goes through mmap/munmap in glibc and faults its
/// pages in every time; a thread's own buffer stays mapped. Freed when the thread exits.
enum ThreadBuffer {
    private final class Storage {
        var pointer: UnsafeMutableRawPointer
        var capacity: Int
        init(capacity: Int) {
            self.capacity = capacity
            pointer = .allocate(byteCount: capacity, alignment: 4096)
        }
        deinit { pointer.deallocate() }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { raw in
            guard let raw else { return }
            Unmanaged<AnyObject>.fromOpaque(raw).release()
        }
        return key
    }()

    /// At least `size` bytes, valid until the calling thread asks again.
    static func get(_ size: Int) -> UnsafeMutableRawPointer {
        let size = max(size, 4096)
        if let raw = pthread_getspecific(key) {
            let storage = Unmanaged<Storage>.fromOpaque(raw).takeUnretainedValue()
            if storage.capacity >= size { return storage.pointer }
            storage.pointer.deallocate()
            storage.pointer = .allocate(byteCount: size, alignment: 4096)
            storage.capacity = size
            return storage.pointer
        }
        let storage = Storage(capacity: size)
        pthread_setspecific(key, Unmanaged.passRetained(storage as AnyObject).toOpaque())
        return storage.pointer
    }
}
