import Dispatch

/// Runs provider actions without ever blocking Swift's cooperative pool.
///
/// An action starts on the FUSE request thread that received it (`Task.immediate`): a provider
/// that answers without suspending — the embedded store does — replies from that thread, with no
/// thread handoff (a handoff cost ~0.5 ms per mkdir/rename/import on a 2-vCPU VM). If the action
/// does suspend, it resumes on this executor's own threads, never on the cooperative pool, where
/// blocking provider I/O would starve other tasks (and, in a process that is also a client of its
/// own mount, deadlock). The FUSE loop runs several request threads, so one slow action does not
/// stop the others; its reply is sent from wherever the action finishes.
package final class ProviderExecutor: TaskExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    package init(label: String = "docfs.provider") {
        queue = DispatchQueue(label: label, qos: .userInitiated, attributes: .concurrent)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Runs `body` now on the calling thread until it first suspends, then on this executor.
    package func run(_ body: @escaping @Sendable () async -> Void) {
        Task.immediate(executorPreference: self) { await body() }
    }

    /// Runs `body` on this executor's threads only, never on the calling thread: for an action
    /// that may block long (an fsync) asked on a thread that must go on serving others.
    package func runElsewhere(_ body: @escaping @Sendable () async -> Void) {
        Task(executorPreference: self) { await body() }
    }
}
