import Glibc

/// A plain pthread mutex: cheap, and usable from non-async code on any thread.
final class Lock: @unchecked Sendable {
    private let m: UnsafeMutablePointer<pthread_mutex_t>
    init() {
        m = .allocate(capacity: 1)
        pthread_mutex_init(m, nil)
    }
    deinit { pthread_mutex_destroy(m); m.deallocate() }
    @inline(__always) func lock() { pthread_mutex_lock(m) }
    @inline(__always) func unlock() { pthread_mutex_unlock(m) }
    @inline(__always) func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(m); defer { pthread_mutex_unlock(m) }
        return try body()
    }
}
