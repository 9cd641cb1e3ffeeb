import Foundation

/// `docfs-scale replicas writers`: W clients write at once for a while, each a burst of files
/// at a time, waiting until its engine has sent the burst before the next (as a program copying
/// files and a replica sending them do); the operations the server committed are counted in its
/// change log, positions between the run's start and its end.
enum WritersRun {
    struct Result {
        var seconds = 0.0
        var files = 0
        /// Writers whose last burst was not on the server by the deadline.
        var unsent = 0
    }

    static func run(
        _ writers: [HarnessClient], seconds duration: Double, burst: Int, timeout: Double
    ) async throws -> Result {
        let start = ContinuousClock.now
        let made = try await withThrowingTaskGroup(of: (files: Int, sent: Bool).self) { group in
            for writer in writers {
                group.addTask {
                    var files = 0
                    var round = 0
                    while elapsed(since: start) < duration {
                        for i in 0..<burst {
                            _ = try await writer.write("w\(writer.index)-\(round)-\(i).txt", Array("writer \(writer.index) \(round) \(i)\n".utf8))
                        }
                        files += burst
                        round += 1
                        // Until the engine has it all on the server (or the run's deadline).
                        while writer.pending > 0 {
                            if elapsed(since: start) > duration + timeout { return (files, false) }
                            try await Task.sleep(for: .milliseconds(10))
                        }
                    }
                    return (files, true)
                }
            }
            var total = (files: 0, unsent: 0)
            for try await one in group {
                total.files += one.files
                if !one.sent { total.unsent += 1 }
            }
            return total
        }
        var result = Result()
        result.seconds = elapsed(since: start)
        result.files = made.files
        result.unsent = made.unsent
        return result
    }
}
