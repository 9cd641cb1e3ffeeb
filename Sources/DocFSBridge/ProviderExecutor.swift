import Dispatch

/// Runs provider actions off both the FUSE request threads and Swift's cooperative pool.
///
/// Provider actions do blocking I/O (SQLite, rename). On the cooperative pool that starves other
/// tasks and, in a process that is also a client of its own mount, can deadlock; so actions get
/// threads of their own, and FUSE threads never wait on them (the reply is sent from the task).
public final class ProviderExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    public init(label: String = "docfs.provider") {
        queue = DispatchQueue(label: label, qos: .userInitiated, attributes: .concurrent)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Starts `body` on this executor.
    public func run(_ body: @escaping @Sendable () async -> Void) {
        Task(executorPreference: self) { await body() }
    }
}
