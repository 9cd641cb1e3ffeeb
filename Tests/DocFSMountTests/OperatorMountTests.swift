import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// What an operator sees of a running docfs (issue 41): `-o metrics` read by the Prometheus
/// project's own parser, `docfs --version`, and `docfs status` listing every mount.
final class OperatorMountTests: MountTestCase {
    override class var layout: String? {
        """
        trash: false
        folders:
          - path: Archive
            capabilities: [read, enumerate]
            contents: [read]
          - path: Projects
        """
    }
    override class var mountsInSetUp: Bool { false }

    func parserPython() throws -> String { try MetricsScrape.parserPython(dir: fx.dir) }
    func metricsPort() throws -> Int { try MetricsScrape.port(of: fx) }
    func scrape(_ python: String, port: Int) throws -> MetricsScrape { try MetricsScrape.fetch(python, port: port, dir: fx.dir) }

    func testMetricsParseAndCountersMoveAfterACopyAndARefusal() throws {
        let python = try parserPython()
        try fx.mount(extra: ["-o", "metrics=127.0.0.1:0"])
        let port = try metricsPort()
        let before = try scrape(python, port: port)
        XCTAssertEqual(before.types["docfs_build_info"], "gauge")
        let build = try XCTUnwrap(before.samples["docfs_build_info"]?.first)
        XCTAssertEqual(build.value, 1)
        XCTAssertNotNil(build.labels["commit"])
        XCTAssert(build.labels["libfuse"]?.hasPrefix("3.") == true, "\(build.labels)")
        XCTAssertGreaterThanOrEqual(before.total("docfs_items"), 3, "root, Archive, Projects: \(before.samples)")

        let payload = testBytes(300_000, seed: 41)
        try fx.writeSource("report.pdf", payload)
        XCTAssertEqual(fx.sh("cp src/report.pdf mnt/Projects/ && cat mnt/Projects/report.pdf > /dev/null").status, 0)
        let refused = fx.sh("cp src/report.pdf mnt/Archive/")
        XCTAssertNotEqual(refused.status, 0, "Archive refuses additions: \(refused)")

        let after = try scrape(python, port: port)
        XCTAssertEqual(after.types["docfs_fuse_request_duration_seconds"], "histogram")
        XCTAssertEqual(after.types["docfs_fuse_requests"], "counter")
        XCTAssertGreaterThanOrEqual(
            after.total("docfs_fuse_written_bytes_total") - before.total("docfs_fuse_written_bytes_total"),
            Double(payload.count), "bytes written moved by the copy")
        XCTAssertGreaterThan(after.total("docfs_fuse_requests_total") { $0["op"] == "write" }, 0)
        XCTAssertGreaterThan(
            after.total("docfs_fuse_requests_total") { $0["op"] == "lookup" },
            before.total("docfs_fuse_requests_total") { $0["op"] == "lookup" })
        XCTAssertEqual(
            after.total("docfs_fuse_request_duration_seconds_count") { $0["op"] == "write" },
            after.total("docfs_fuse_requests_total") { $0["op"] == "write" }, "the histogram counts every request")
        XCTAssertGreaterThan(after.total("docfs_fuse_request_duration_seconds_sum") { $0["op"] == "write" }, 0)
        XCTAssertEqual(after.total("docfs_items"), before.total("docfs_items") + 1, "the copy is one item more")
        XCTAssertGreaterThanOrEqual(after.total("docfs_store_content_bytes"), Double(payload.count))
        let refusals = after.samples["docfs_refusals_total"] ?? []
        XCTAssert(
            refusals.contains { $0.labels["errno"] == "EACCES" && $0.labels["rule"] == "accessDenied" && $0.value >= 1 },
            "the refused cp is counted: \(refusals)")
        XCTAssertEqual(before.total("docfs_refusals_total") { $0["errno"] == "EACCES" }, 0)
        XCTAssert(fx.stopDaemon(), "clean stop")
    }

    func testANonLoopbackAddressIsRefusedUnlessAskedFor() throws {
        let python = try parserPython()
        for (args, what) in [(["-o", "metrics=0.0.0.0:0"], "-o"), (["--metrics", "0.0.0.0:0"], "--metrics")] {
            let r = fx.docfs(["mount", fx.store, fx.mnt] + args)
            XCTAssertNotEqual(r.status, 0, "\(what): \(r)")
            XCTAssert(r.stderr.contains("not a loopback address") && r.stderr.contains("metrics_public"), "\(what): \(r)")
            XCTAssertFalse(fx.isMounted, "\(what): refused before mounting")
        }
        try fx.mount(extra: ["-o", "metrics=0.0.0.0:0,metrics_public"])
        let port = try metricsPort()
        XCTAssert(fx.logLines { $0.contains("metrics at http://0.0.0.0:") }.count == 1, fx.log)
        XCTAssertEqual(try scrape(python, port: port).total("docfs_build_info"), 1)
        XCTAssert(fx.stopDaemon(), "clean stop")
    }

    func testVersionNamesTheBuildLibfuseAndSchema() throws {
        let r = fx.docfs(["--version"])
        XCTAssertEqual(r.status, 0, "\(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 4, r.stdout)
        XCTAssert(lines.first?.hasPrefix("docfs ") == true, r.stdout)
        XCTAssertNotNil(lines.first { $0.range(of: #"^commit ([0-9a-f]{12}(-dirty)?|unknown)$"#, options: .regularExpression) != nil }, r.stdout)
        XCTAssertNotNil(lines.first { $0.range(of: #"^libfuse 3\.[0-9]+"#, options: .regularExpression) != nil }, r.stdout)
        XCTAssertNotNil(lines.first { $0.range(of: #"^server schema [0-9]+$"#, options: .regularExpression) != nil }, r.stdout)
    }

    /// `docfs check` draws its steps on standard error when that is a terminal (a pty here) and
    /// prints only its result when it is a pipe.
    func testProgressOnATerminalAndNothingExtraWhenPiped() throws {
        let r = runOnTerminal(fx.bin, ["check", fx.store], dir: fx.dir)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssert(
            r.terminal.contains("docfs check: checking") && r.terminal.contains("\r\u{1B}[K"),
            "progress drawn on the terminal: \(r.terminal.debugDescription)")
        XCTAssert(r.stdout.contains("is consistent"), "\(r)")

        let piped = fx.docfs(["check", fx.store])
        XCTAssertEqual(piped.status, 0, "\(piped)")
        XCTAssertEqual(piped.stderr, "", "nothing extra when piped")
        XCTAssert(piped.stdout.hasPrefix("store ") && piped.stdout.contains("is consistent"), piped.stdout)
    }

    /// `docfs check --metrics-file` leaves the run's figures where node_exporter's textfile
    /// collector reads them: parsed by prometheus_client, counts as the store holds them, and
    /// `docfs_check_success` 0 when the run finds a problem (the file is written then too).
    func testCheckWritesItsFiguresForTheTextfileCollector() throws {
        let python = try parserPython()
        try fx.mount()
        XCTAssertEqual(fx.sh("mkdir mnt/Projects/a && echo one > mnt/Projects/a/1.txt && echo two > mnt/Projects/2.txt").status, 0)
        XCTAssert(fx.stopDaemon(), "clean stop")
        let file = fx.dir + "/check.prom"
        let r = fx.docfs(["check", fx.store, "--metrics-file", file])
        XCTAssertEqual(r.status, 0, "\(r)")
        var figures = try MetricsScrape.read(python, file: file, dir: fx.dir)
        XCTAssertEqual(figures.total("docfs_check_success"), 1, "\(figures.samples)")
        XCTAssertEqual(figures.total("docfs_check_files"), 2)
        XCTAssertEqual(figures.total("docfs_check_problems"), 0)
        XCTAssertEqual(figures.types["docfs_check_files"], "gauge")
        XCTAssertEqual(figures.samples["docfs_check_files"]?.first?.labels["store"], fx.store)
        XCTAssertEqual(figures.total("docfs_check_last_run_timestamp_seconds"), Date().timeIntervalSince1970, accuracy: 120)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: fx.dir).filter { $0.hasPrefix(".check.prom") }, [], "no temporary file left")

        try "x".write(toFile: fx.store + "/staging/left-over", atomically: false, encoding: .utf8)
        let bad = fx.docfs(["check", fx.store, "--metrics-file", file])
        XCTAssertEqual(bad.status, 1, "\(bad)")
        figures = try MetricsScrape.read(python, file: file, dir: fx.dir)
        XCTAssertEqual(figures.total("docfs_check_success"), 0)
        XCTAssertGreaterThanOrEqual(figures.total("docfs_check_problems"), 1)

        let nowhere = fx.docfs(["check", fx.store, "--metrics-file", fx.dir + "/no/such/folder/check.prom"])
        XCTAssertNotEqual(nowhere.status, 0, "a file that cannot be written fails the run: \(nowhere)")
        XCTAssert(nowhere.stderr.contains("--metrics-file"), nowhere.stderr)
    }

    func testStatusWithoutAMountpointListsEveryMount() throws {
        let second = try MountFixture()
        defer { second.teardown() }
        try fx.mount()
        try second.mount()
        let text = fx.docfs(["status"])
        XCTAssertEqual(text.status, 0, "\(text)")
        XCTAssert(text.stdout.hasPrefix("MOUNTPOINT"), text.stdout)
        for (mnt, store) in [(fx.mnt, fx.store), (second.mnt, second.store)] {
            let line = text.stdout.split(separator: "\n").first { $0.hasPrefix(mnt + " ") }
            XCTAssertNotNil(line, "\(mnt) listed: \(text.stdout)")
            XCTAssert(line?.contains(store) == true, "\(line ?? "")")
        }
        let json = fx.docfs(["status", "--json"])
        XCTAssertEqual(json.status, 0, "\(json)")
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let mounts = try XCTUnwrap(object["mounts"] as? [[String: Any]])
        for (mnt, store) in [(fx.mnt, fx.store), (second.mnt, second.store)] {
            let entry = try XCTUnwrap(mounts.first { $0["mountpoint"] as? String == mnt }, "\(mnt) in \(json.stdout)")
            XCTAssertEqual(entry["store"] as? String, store)
            XCTAssertEqual(entry["provider"] as? String, "store")
            XCTAssertEqual(entry["replica"] as? Bool, false)
            XCTAssert(entry["pending"] is NSNull, "\(entry)")
            XCTAssertEqual(entry["answering"] as? Bool, true)
        }
        let build = try XCTUnwrap(object["build"] as? [String: Any])
        XCTAssertEqual(build["schema"] as? Int, Int(fx.docfs(["--version"]).stdout.split(separator: "\n").last!.split(separator: " ").last!))

        // A daemon that does not answer (stopped here) is listed as such; the others still are.
        // Not over io_uring (`make test-io-uring`'s pass): there the kernel hands a request to a free
        // ring entry at once, even of a stopped daemon, and a request already handed over waits
        // for its answer without being killable, so the probing `docfs status` cannot end
        // before the daemon continues (through /dev/fuse it stays queued, and killable).
        if !MountFixture.ringMayServe {
            let stopped = try XCTUnwrap(second.daemonPID)
            XCTAssertEqual(kill(stopped, SIGSTOP), 0)
            let hung = fx.docfs(["status"])
            XCTAssertEqual(kill(stopped, SIGCONT), 0)
            XCTAssertEqual(hung.status, 0, "\(hung)")
            let hungLine = hung.stdout.split(separator: "\n").first { $0.hasPrefix(second.mnt + " ") }
            XCTAssert(hungLine?.contains("not answering") == true, hung.stdout)
            XCTAssert(hung.stdout.split(separator: "\n").contains { $0.hasPrefix(fx.mnt + " ") && !$0.contains("not answering") }, hung.stdout)
        }
        XCTAssert(fx.stopDaemon(), "clean stop")
        XCTAssert(second.stopDaemon(), "clean stop")
    }
}

/// `-o metrics` as a scraper sees it: the port from the daemon's log, and `GET /metrics` parsed
/// by prometheus_client's text parser (which refuses malformed text).
struct MetricsScrape {
    struct Sample { var labels: [String: String]; var value: Double }
    var samples: [String: [Sample]]
    var types: [String: String]

    func total(_ name: String, where match: ([String: String]) -> Bool = { _ in true }) -> Double {
        (samples[name] ?? []).filter { match($0.labels) }.reduce(0) { $0 + $1.value }
    }

    /// The port the daemon says it serves metrics on (it was asked for port 0).
    static func port(of fx: MountFixture) throws -> Int {
        let lines = fx.logLines { $0.contains("metrics at http://") }
        guard let text = lines.first, let range = text.range(of: #":[0-9]+/metrics"#, options: .regularExpression) else {
            throw FixtureError("the daemon did not say where it serves metrics; log:\n\(fx.log)")
        }
        return Int(text[range].dropFirst().dropLast("/metrics".count))!
    }

    /// The daemon's FUSE request count for `op`, read with curl (no parser needed for one counter).
    static func requests(_ op: String, of fx: MountFixture) throws -> Int {
        let port = try port(of: fx)
        let r = fx.sh("curl -sf http://127.0.0.1:\(port)/metrics")
        guard r.status == 0 else { throw FixtureError("scrape failed: \(r)") }
        let lines = r.stdout.split(separator: "\n").filter {
            $0.hasPrefix("docfs_fuse_requests") && $0.contains("op=\"\(op)\"") && !$0.hasPrefix("#")
        }
        return lines.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0) { $0 + Int($1) }
    }

    static func fetch(_ python: String, port: Int, dir: String) throws -> MetricsScrape {
        try parse(python, source: "http://127.0.0.1:\(port)/metrics", dir: dir)
    }

    /// A `--metrics-file` as node_exporter's textfile collector reads it.
    static func read(_ python: String, file: String, dir: String) throws -> MetricsScrape {
        try parse(python, source: file, dir: dir)
    }

    /// `source` (a URL or a file) parsed by prometheus_client, which refuses malformed text.
    private static func parse(_ python: String, source: String, dir: String) throws -> MetricsScrape {
        let script = """
            import json, sys, urllib.request
            from prometheus_client.parser import text_string_to_metric_families
            if sys.argv[1].startswith("http://"):
                with urllib.request.urlopen(sys.argv[1], timeout=20) as r:
                    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain"), r.headers
                    text = r.read().decode()
            else:
                with open(sys.argv[1]) as f:
                    text = f.read()
            samples, types = {}, {}
            for family in text_string_to_metric_families(text):
                types[family.name] = family.type
                for s in family.samples:
                    samples.setdefault(s.name, []).append([s.labels, s.value])
            print(json.dumps({"samples": samples, "types": types}))
            """
        let r = runProcess(python, ["-c", script, source], cwd: dir, timeout: 60, outDir: dir)
        guard r.status == 0, let object = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any],
            let samples = object["samples"] as? [String: [[Any]]], let types = object["types"] as? [String: String]
        else {
            throw FixtureError("parsing \(source) failed: \(r)")
        }
        return MetricsScrape(
            samples: samples.mapValues { list in
                list.map { Sample(labels: $0[0] as? [String: String] ?? [:], value: ($0[1] as? NSNumber)?.doubleValue ?? .nan) }
            }, types: types)
    }

    /// A python with prometheus_client (Tests/remote/servers.sh installs it beside moto).
    static func parserPython(dir: String) throws -> String {
        guard let python = ProcessInfo.processInfo.environment["DOCFS_TEST_S3_PYTHON"],
            runProcess(python, ["-c", "import prometheus_client.parser"], cwd: dir, timeout: 30, outDir: dir).status == 0
        else {
            throw XCTSkip("needs prometheus_client: run under Tests/remote/servers.sh run -- … (as make test does)")
        }
        return python
    }
}

/// What a command printed with its standard error on a terminal (a pty) and its standard output
/// on a pipe.
struct TerminalRun: CustomStringConvertible {
    var status: Int32
    var terminal: String
    var stdout: String
    var description: String { "status \(status)\n--- terminal\n\(terminal.debugDescription)\n--- stdout\n\(stdout)" }
}

/// Runs `exe args` (with `env` added) with standard error on a pty, reading the pty until the
/// command has exited (python's pty module; the timeout is runProcess's).
func runOnTerminal(_ exe: String, _ args: [String], dir: String, env: [String: String] = [:]) -> TerminalRun {
    let script = """
        import json, os, pty, subprocess, sys
        master, slave = pty.openpty()
        child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        out = child.stdout.read()
        print(json.dumps({"status": child.wait(), "tty": seen.decode(errors="replace"), "stdout": out.decode(errors="replace")}))
        """
    let r = runProcess("/usr/bin/env", ["python3", "-c", script, exe] + args, cwd: dir, env: env, timeout: 120, outDir: dir)
    guard r.status == 0, let object = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [String: Any] else {
        return TerminalRun(status: -1, terminal: "", stdout: "the pty runner failed: \(r)")
    }
    return TerminalRun(
        status: Int32((object["status"] as? Int) ?? -1), terminal: object["tty"] as? String ?? "",
        stdout: object["stdout"] as? String ?? "")
}
