import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// /sbin/mount.fuse.docfs for the tests that go through mount(8): mount(8) looks for helpers in
/// /sbin only (a compiled-in path; it also drops PATH before running them), so the test links the
/// built docfs there and removes exactly that link again. A lock file keeps two test runs on one
/// machine from sharing it; a helper that someone installed (make install) is never touched —
/// the test is skipped instead.
final class SystemMountHelper {
    static let path = "/sbin/mount.fuse.docfs"
    static let lockPath = "/tmp/docfs-test-mount-helper.lock"
    private let lockFD: Int32
    private let target: String

    init(docfs: String) throws {
        lockFD = open(Self.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lockFD >= 0 else { throw FixtureError("cannot open \(Self.lockPath): \(String(cString: strerror(errno)))") }
        guard flock(lockFD, LOCK_EX) == 0 else { close(lockFD); throw FixtureError("cannot lock \(Self.lockPath)") }
        target = docfs
        if let existing = try? FileManager.default.destinationOfSymbolicLink(atPath: Self.path) {
            // A link to the binary under test (left by a killed run) is ours to replace.
            if existing == docfs {
                unlink(Self.path)
            } else {
                flock(lockFD, LOCK_UN); close(lockFD)
                throw XCTSkip("\(Self.path) is installed (-> \(existing)); not replacing it for the test")
            }
        } else if access(Self.path, F_OK) == 0 {
            flock(lockFD, LOCK_UN); close(lockFD)
            throw XCTSkip("\(Self.path) is installed; not replacing it for the test")
        }
        guard symlink(docfs, Self.path) == 0 else {
            let e = errno
            flock(lockFD, LOCK_UN); close(lockFD)
            throw FixtureError("cannot link \(Self.path): \(String(cString: strerror(e)))")
        }
    }

    /// A mount(8) test's teardown, whatever the test did: `umount` what is still mounted, then
    /// the fixture stops any daemon that names its directory (the helper's daemon has the
    /// mountpoint on its command line) and removes the directory; then the link goes.
    static func tearDown(_ fx: MountFixture?, _ helper: SystemMountHelper?) {
        if let fx, Mounts.isMounted(fx.mnt) { _ = runProcess("/bin/umount", [fx.mnt], cwd: "/", timeout: 20, outDir: "/tmp") }
        fx?.teardown()
        helper?.remove()
    }

    /// Removes the link when it is still the one this test made; releases the lock.
    func remove() {
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: Self.path)) == target { unlink(Self.path) }
        flock(lockFD, LOCK_UN)
        close(lockFD)
    }
}

/// Issue 17: docfs as a citizen of the system — mount(8), fstab, umount, `-o ro`, the
/// mount.fuse3 fallback, `docfs new`, and `--json` output.
final class CitizenTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }
    override class var layout: String? {
        """
        trash: true
        types:
          - identifier: com.example.deck
            conformsTo: [com.apple.package]
            extensions: [deck]
          - identifier: com.example.invoice
            conformsTo: [public.xml]
            extensions: [invoice]
        folders:
          - path: Notes
            allowedContentTypes: [public.plain-text, net.daringfireball.markdown, public.json, com.example.deck, com.example.invoice]
          - path: Archive
            capabilities: [read, enumerate]
            contents: [read]
          - path: Inbox
            capabilities: [read, enumerate, add]
            allowedContentTypes: [com.adobe.pdf]
        """
    }

    private var helper: SystemMountHelper?

    override func tearDown() {
        SystemMountHelper.tearDown(fx, helper)
        helper = nil
        super.tearDown()
    }

    private func installHelper() throws {
        helper = try SystemMountHelper(docfs: fx.bin)
    }

    /// The daemon's pid, as the store's lock file records it.
    private func daemonPID() -> pid_t? {
        guard let text = try? String(contentsOfFile: fx.store + "/lock", encoding: .utf8) else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private func mountLine() -> String? {
        let text = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init).first {
            $0.split(separator: " ").count > 2 && Mounts.unescape(String($0.split(separator: " ")[1])) == fx.mnt
        }
    }

    /// `umount MNT` unmounts, and the daemon then exits by itself.
    private func umountAndWaitForDaemon(file: StaticString = #filePath, line: UInt = #line) {
        let pid = daemonPID()
        let r = fx.sh("umount mnt")
        XCTAssertEqual(r.status, 0, "umount: \(r)", file: file, line: line)
        XCTAssertFalse(fx.isMounted, "still mounted after umount", file: file, line: line)
        if let pid, pid > 0 {
            XCTAssertTrue(Proc.waitGone(pid, seconds: 15), "the daemon \(pid) did not exit after umount", file: file, line: line)
        } else {
            XCTFail("no daemon pid in the store's lock file", file: file, line: line)
        }
    }

    // MARK: mount(8)

    func testMountTypeFuseDocfsIgnoresMountOnlyOptionsAndUmountStopsTheDaemon() throws {
        try installHelper()
        let r = fx.sh(
            "mount -t fuse.docfs \"$PWD/store\" \"$PWD/mnt\" -o rw,defaults,nofail,_netdev,noauto,users,noexec,comment=docs,x-systemd.automount,x-systemd.requires=network-online.target"
        )
        XCTAssertEqual(r.status, 0, "mount -t fuse.docfs: \(r)")
        XCTAssertTrue(fx.isMounted)
        let line = mountLine() ?? ""
        XCTAssertTrue(line.contains(" fuse.docfs "), line)
        XCTAssertTrue(line.contains("noexec"), "noexec reached the kernel: \(line)")
        XCTAssertTrue(line.hasPrefix("docfs:\(fx.store) "), line)
        XCTAssertEqual(fx.writeFile(fx.m("Notes/hello.txt"), Array("hello\n".utf8)), 0)
        XCTAssertBytes(fx.readFile(fx.m("Notes/hello.txt")), Array("hello\n".utf8))
        umountAndWaitForDaemon()
        // What was written is in the store: mounted again with docfs itself.
        try fx.mount()
        XCTAssertBytes(fx.readFile(fx.m("Notes/hello.txt")), Array("hello\n".utf8))
    }

    func testMountReadOnly() throws {
        try installHelper()
        try "kept\n".write(toFile: fx.src + "/kept.txt", atomically: true, encoding: .utf8)
        let imp = fx.docfs(["import", fx.src + "/kept.txt", "--store", fx.store, "--to", "/Notes"])
        XCTAssertEqual(imp.status, 0, "\(imp)")
        let r = fx.sh("mount -t fuse.docfs \"$PWD/store\" \"$PWD/mnt\" -o ro,nofail")
        XCTAssertEqual(r.status, 0, "mount -o ro: \(r)")
        XCTAssertTrue(mountLine()?.split(separator: " ")[3].hasPrefix("ro") ?? false, "mounted read-only: \(mountLine() ?? "-")")
        XCTAssertBytes(fx.readFile(fx.m("Notes/kept.txt")), Array("kept\n".utf8))
        XCTAssertErrno(fx.openErrno(fx.m("Notes/new.txt"), O_WRONLY | O_CREAT), EROFS)
        XCTAssertErrno(fx.mkdirErrno(fx.m("Notes/dir")), EROFS)
        XCTAssertErrno(fx.unlinkErrno(fx.m("Notes/kept.txt")), EROFS)
        umountAndWaitForDaemon()
    }

    func testFstabLinesMountWithMountAllAndByMountpoint() throws {
        try installHelper()
        let other = fx.dir + "/mnt2"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        let fstab = fx.dir + "/fstab"
        try """
        # a test fstab: the docfs line as docs/USING.md shows it, and a noauto line mount -a must skip
        \(fx.store) \(fx.mnt) fuse.docfs defaults,nofail,_netdev,x-systemd.automount,trash 0 0
        \(fx.store) \(other) fuse.docfs noauto,nofail 0 0

        """.write(toFile: fstab, atomically: true, encoding: .utf8)
        var r = fx.sh("mount --fstab fstab -a")
        XCTAssertEqual(r.status, 0, "mount --fstab FILE -a: \(r)")
        XCTAssertTrue(fx.isMounted)
        XCTAssertFalse(Mounts.isMounted(other), "a noauto line was mounted by -a")
        // -o trash from the fstab line reached docfs: rm moves to /.Trash.
        XCTAssertEqual(fx.writeFile(fx.m("Notes/a.txt"), Array("a".utf8)), 0)
        XCTAssertEqual(fx.unlinkErrno(fx.m("Notes/a.txt")), 0)
        XCTAssertEqual(fx.list(fx.m(".Trash")), ["a.txt"])
        // mount -a again: the line is mounted already; not an error.
        r = fx.sh("mount --fstab fstab -a")
        XCTAssertEqual(r.status, 0, "second mount -a: \(r)")
        umountAndWaitForDaemon()

        r = fx.sh("mount -T fstab \"$PWD/mnt\"")
        XCTAssertEqual(r.status, 0, "mount -T FILE MOUNTPOINT: \(r)")
        XCTAssertTrue(fx.isMounted)
        XCTAssertEqual(fx.list(fx.m(".Trash")), ["a.txt"])
        umountAndWaitForDaemon()
    }

    /// Without /sbin/mount.fuse.docfs, mount(8) runs mount.fuse3, which runs `docfs STORE MNT -o OPTS`
    /// from PATH. Here mount.fuse3 is run directly (mount(8) would reset PATH).
    func testMountFuse3RunsDocfsFromPath() throws {
        let candidates: [String] = ["/sbin/mount.fuse3", "/usr/sbin/mount.fuse3"]
        let fuse3 = candidates.first { (path: String) -> Bool in access(path, X_OK) == 0 }
        guard let fuse3 else { throw XCTSkip("mount.fuse3 is not installed") }
        let binDir = (fx.bin as NSString).deletingLastPathComponent
        let r = fx.sh("PATH=\"\(binDir):$PATH\" \(fuse3) \"$PWD/store\" \"$PWD/mnt\" -t fuse.docfs -o rw,nofail,x-systemd.automount,log_level=debug")
        XCTAssertEqual(r.status, 0, "mount.fuse3: \(r)")
        XCTAssertTrue(fx.isMounted)
        XCTAssertEqual(fx.writeFile(fx.m("Notes/b.txt"), Array("b".utf8)), 0)
        umountAndWaitForDaemon()
    }

    /// The helper as mount(8) calls it: its name is mount.fuse.docfs, then SOURCE MNT [-sfnv] -o OPTS.
    func testHelperArguments() throws {
        let link = fx.dir + "/mount.fuse.docfs"
        XCTAssertEqual(Glibc.symlink(fx.bin, link), 0)
        // -f is mount(8)'s fake mount: nothing happens.
        var r = fx.sh("./mount.fuse.docfs store mnt -f -o rw")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertFalse(fx.isMounted)
        r = fx.sh("./mount.fuse.docfs store")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("expected STORE and MOUNTPOINT"), r.stderr)
        r = fx.sh("./mount.fuse.docfs store mnt -N 1234")
        XCTAssertNotEqual(r.status, 0)
        XCTAssertFalse(fx.isMounted)
        r = fx.sh(
            "./mount.fuse.docfs docfs:\"$PWD/store\" \"$PWD/mnt\" -n -s -v -o rw,nofail,user,x-gvfs-show,log_file=\"$PWD/helper.log\",trash -t fuse.docfs"
        )
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertTrue(fx.isMounted)
        XCTAssertEqual(fx.list(fx.m(".Trash")), [], "-o trash gives the mount a trash")
        XCTAssertTrue(FileManager.default.fileExists(atPath: fx.dir + "/helper.log"), "-o log_file=PATH is where the daemon logs")
        // Asked again (mount -a does): already mounted, not an error.
        r = fx.sh("./mount.fuse.docfs \"$PWD/store\" \"$PWD/mnt\" -o rw")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertTrue(r.stderr.contains("already mounted"), r.stderr)
        umountAndWaitForDaemon()
        // docfs mount -o takes the same fstab words.
        r = fx.docfs(["mount", fx.store, fx.mnt, "-o", "defaults,nofail,_netdev,x-systemd.automount,noatime"])
        XCTAssertEqual(r.status, 0, "\(r)")
        umountAndWaitForDaemon()
    }

    // MARK: docfs new

    /// An extended attribute read with getfattr (nil when absent).
    private func attr(_ path: String, _ name: String) -> String? {
        let r = runProcess("/usr/bin/getfattr", ["--only-values", "-n", name, path], cwd: "/", timeout: 30, outDir: "/tmp")
        return r.status == 0 ? r.stdout : nil
    }

    /// The class's layout with a template for com.example.invoice (relative to the layout file).
    private func writeLayoutWithTemplate() throws {
        try "<invoice/>\n".write(toFile: fx.dir + "/invoice-template.xml", atomically: true, encoding: .utf8)
        let layout = Self.layout!.replacingOccurrences(
            of: "    extensions: [invoice]\n",
            with: "    extensions: [invoice]\n    template: invoice-template.xml\n")
        XCTAssertTrue(layout.contains("template:"))
        try layout.write(toFile: fx.dir + "/layout.yaml", atomically: true, encoding: .utf8)
    }

    func testNewDocumentThroughTheMount() throws {
        // The store again, from a layout that names a template.
        try writeLayoutWithTemplate()
        try FileManager.default.removeItem(atPath: fx.store)
        var r = fx.docfs(["init", fx.store, "--layout", fx.dir + "/layout.yaml"])
        XCTAssertEqual(r.status, 0, "\(r)")
        try fx.mount()

        func new(_ args: [String]) -> ShellResult { fx.docfs(["new"] + args) }
        r = new(["public.plain-text", "--in", fx.m("Notes")])
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled.txt") + "\n")
        r = new(["txt", "--in", fx.m("Notes")])
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled 2.txt") + "\n", "\(r)")
        r = new(["public.plain-text", "--in", fx.m("Notes")])
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled 3.txt") + "\n", "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("Notes/Untitled 3.txt")), [])
        r = new(["net.daringfireball.markdown", "--in", fx.m("Notes"), "--name", "Plan"])
        XCTAssertEqual(r.stdout, fx.m("Notes/Plan.md") + "\n", "\(r)")
        r = new(["md", "--in", fx.m("Notes"), "--name", "Plan"])
        XCTAssertEqual(r.stdout, fx.m("Notes/Plan 2.md") + "\n", "\(r)")
        r = new(["public.json", "--in", fx.m("Notes")])
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled.json") + "\n", "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("Notes/Untitled.json")), Array("{}\n".utf8))
        XCTAssertEqual(attr(fx.m("Notes/Untitled.json"), "user.docfs.type"), "public.json")
        // A package type: an empty package directory, one document.
        r = new(["com.example.deck", "--in", fx.m("Notes")])
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled.deck") + "\n", "\(r)")
        XCTAssertEqual(fx.list(fx.m("Notes/Untitled.deck")), [])
        XCTAssertEqual(attr(fx.m("Notes/Untitled.deck"), "user.docfs.type"), "com.example.deck")
        // The layout's template for its own type.
        r = new(["com.example.invoice", "--in", fx.m("Notes")])
        XCTAssertEqual(r.stdout, fx.m("Notes/Untitled.invoice") + "\n", "\(r)")
        XCTAssertBytes(fx.readFile(fx.m("Notes/Untitled.invoice")), Array("<invoice/>\n".utf8))

        // Refusals: no adding; a type the folder does not take; a type without a template.
        r = new(["public.plain-text", "--in", fx.m("Archive")])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssertTrue(r.stderr.contains("does not allow adding"), r.stderr)
        r = new(["public.plain-text", "--in", fx.m("Inbox")])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssertTrue(r.stderr.contains("not among the folder's allowed content types"), r.stderr)
        r = new(["public.png", "--in", fx.m("Notes")])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssertTrue(r.stderr.contains("no template"), r.stderr)
        r = new(["txt", "--in", fx.src])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssertTrue(r.stderr.contains("not inside a docfs mount"), r.stderr)
        XCTAssertEqual(fx.list(fx.m("Archive")), [])
        XCTAssertEqual(fx.list(fx.m("Inbox")), [])
        XCTAssertEqual(fx.stagedLeftovers(), [])
        XCTAssertTrue(fx.stopDaemon())
        r = fx.docfs(["check", fx.store])
        XCTAssertEqual(r.status, 0, "the store with its templates is consistent: \(r)")
    }

    func testLayoutWithAMissingTemplateIsRefusedBeforeTheStoreIsMade() throws {
        try writeLayoutWithTemplate()
        unlink(fx.dir + "/invoice-template.xml")
        let r = fx.docfs(["init", fx.dir + "/store2", "--layout", fx.dir + "/layout.yaml"])
        XCTAssertEqual(r.status, 1, "\(r)")
        XCTAssertTrue(r.stderr.contains("invoice-template.xml"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: fx.dir + "/store2"))
    }

    // MARK: --json

    private func jsonObject(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let data = text.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            XCTFail("not a JSON object: \(text)", file: file, line: line)
            return [:]
        }
        return object
    }

    func testJSONOutputs() throws {
        try fx.mount()
        try "one\n".write(toFile: fx.src + "/one.txt", atomically: true, encoding: .utf8)
        // import: one object a FILE, one line each, every field present.
        var r = fx.docfs(["import", "--json", fx.src + "/one.txt", fx.src + "/missing.txt", "--to", fx.m("Notes")])
        XCTAssertEqual(r.status, 1, "one refused: \(r)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, r.stdout)
        let imported = jsonObject(lines.first ?? "")
        XCTAssertEqual(Set(imported.keys), ["source", "name", "status", "identifier", "reason"])
        XCTAssertEqual(imported["status"] as? String, "imported")
        XCTAssertEqual(imported["name"] as? String, "one.txt")
        XCTAssertTrue(imported["reason"] is NSNull)
        let identifier = imported["identifier"] as? String
        XCTAssertNotNil(identifier)
        let refused = jsonObject(lines.last ?? "")
        XCTAssertEqual(refused["status"] as? String, "refused")
        XCTAssertTrue(refused["identifier"] is NSNull)
        XCTAssertNotNil(refused["reason"] as? String)

        // info
        r = fx.docfs(["info", "--json", fx.m("Notes/one.txt")])
        XCTAssertEqual(r.status, 0, "\(r)")
        let info = jsonObject(r.stdout)
        XCTAssertEqual(
            Set(info.keys),
            [
                "path", "identifier", "type", "conformsTo", "size", "created", "modified", "lastUsed",
                "capabilities", "tags", "favoriteRank", "contentVersion", "metadataVersion", "trashedFrom",
                "sync", "temporary", "downloaded", "pinned",
            ])
        XCTAssertTrue(info["sync"] is NSNull, "a store without a remote has no sync state")
        XCTAssertTrue(info["downloaded"] is NSNull, "nor contents on demand")
        XCTAssertEqual(info["pinned"] as? Bool, false)
        XCTAssertEqual(info["temporary"] as? Bool, false)
        XCTAssertEqual(info["identifier"] as? String, identifier)
        XCTAssertEqual(info["type"] as? String, "public.plain-text")
        XCTAssertEqual(info["size"] as? Int, 4)
        XCTAssertTrue((info["conformsTo"] as? [String] ?? []).contains("public.text"))
        XCTAssertTrue((info["capabilities"] as? [String] ?? []).contains("read"))
        XCTAssertEqual(info["tags"] as? [String], [])
        XCTAssertNotNil(info["contentVersion"] as? Int)
        XCTAssertTrue(info["trashedFrom"] is NSNull)

        // trash list: one array of {name, folder, trashedFrom, identifier}
        XCTAssertEqual(fx.unlinkErrno(fx.m("Notes/one.txt")), 0)
        r = fx.docfs(["trash", "list", "--json", fx.mnt])
        XCTAssertEqual(r.status, 0, "\(r)")
        let trash = (try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8))) as? [[String: Any]]
        XCTAssertEqual(trash?.count, 1, r.stdout)
        XCTAssertEqual(trash?.first?["name"] as? String, "one.txt")
        XCTAssertEqual(trash?.first?["folder"] as? Bool, false)
        XCTAssertEqual(trash?.first?["trashedFrom"] as? String, "/Notes/one.txt")
        XCTAssertEqual(trash?.first?["identifier"] as? String, identifier)

        // check (not mounted)
        XCTAssertTrue(fx.stopDaemon())
        r = fx.docfs(["check", "--json", fx.store])
        XCTAssertEqual(r.status, 0, "\(r)")
        let check = jsonObject(r.stdout)
        XCTAssertEqual(Set(check.keys), ["store", "repair", "consistent", "problems", "repairs", "remaining", "counts"])
        XCTAssertEqual(check["consistent"] as? Bool, true)
        XCTAssertEqual((check["counts"] as? [String: Any])?["files"] as? Int, 1)
        // A problem: a file in staging/ is a leftover.
        try "x".write(toFile: fx.store + "/staging/left-over", atomically: false, encoding: .utf8)
        r = fx.docfs(["check", "--json", fx.store])
        XCTAssertEqual(r.status, 1, "\(r)")
        let bad = jsonObject(r.stdout)
        XCTAssertEqual(bad["consistent"] as? Bool, false)
        let problems = bad["problems"] as? [[String: Any]] ?? []
        XCTAssertEqual(problems.first?["kind"] as? String, "stagedLeftover", r.stdout)
    }
}

/// The generated completion scripts and man page, and the help texts' paragraphs.
final class CitizenTestsGenerated: XCTestCase {
    private var bin: String!

    override func setUpWithError() throws {
        bin = try DocFSBinary.path()
    }

    private func run(_ args: [String], env: [String: String] = [:]) -> ShellResult {
        runProcess(bin, args, cwd: "/", env: env, timeout: 30, outDir: "/tmp")
    }

    /// Every command path, read from the help output itself (so new subcommands are covered).
    private func commandPaths() -> [[String]] {
        var paths: [[String]] = []
        func walk(_ path: [String]) {
            guard path.count < 3 else { return }
            let help = run(path + ["--help"], env: ["COLUMNS": "200"]).stdout
            guard let range = help.range(of: "SUBCOMMANDS:\n") else { return }
            for line in help[range.upperBound...].split(separator: "\n") {
                if !line.hasPrefix(" ") { break }
                // "  NAME   abstract"; continuation lines are indented further; "  See 'docfs help …'".
                guard line.hasPrefix("  "), !line.hasPrefix("   "), !line.hasPrefix("  See ") else { continue }
                guard let word = line.split(separator: " ").first.map(String.init), word != "help",
                    word.allSatisfy({ $0.isLowercase || $0 == "-" })
                else { continue }
                let sub = path + [word]
                paths.append(sub)
                walk(sub)
            }
        }
        walk([])
        return paths
    }

    func testEveryCommandIsListed() {
        let names = Set(commandPaths().map { $0.joined(separator: " ") })
        for expected in ["init", "mount", "unmount", "info", "check", "import", "new", "trash", "trash list", "trash restore", "trash empty", "tag"] {
            XCTAssertTrue(names.contains(expected), "\(expected) missing from \(names.sorted())")
        }
    }

    func testGeneratedCompletionsAndManPageMentionEverySubcommand() throws {
        let paths = commandPaths()
        XCTAssertFalse(paths.isEmpty)
        var scripts: [String: String] = [:]
        for shell in ["bash", "zsh", "fish"] {
            let r = run(["--generate-completion-script", shell])
            XCTAssertEqual(r.status, 0, "\(shell): \(r)")
            scripts[shell] = r.stdout
            for path in paths {
                XCTAssertTrue(r.stdout.contains(path.last!), "the \(shell) completion script does not mention \(path.joined(separator: " "))")
            }
        }
        // What `make generated` wrote (and `make install` installs) is exactly the generator's output.
        let generated =
            ProcessInfo.processInfo.environment["DOCFS_GENERATED"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/generated").path
        let man = generated + "/man/docfs.1"
        guard FileManager.default.fileExists(atPath: man) else {
            if ProcessInfo.processInfo.environment["DOCFS_GENERATED"] != nil { XCTFail("\(man) is missing; make generated did not run") }
            throw XCTSkip("no generated man page at \(man): run `make generated CONFIGURATION=debug` (make test does)")
        }
        for (shell, file) in [("bash", "docfs.bash"), ("zsh", "_docfs"), ("fish", "docfs.fish")] {
            let text = try String(contentsOfFile: generated + "/completions/" + file, encoding: .utf8)
            XCTAssertEqual(text, scripts[shell], "\(file) is not what docfs generates")
        }
        let page = try String(contentsOfFile: man, encoding: .utf8)
        XCTAssertTrue(page.contains(".Dt DOCFS 1"), "not a section 1 page for docfs")
        for path in paths {
            // The manual generator lists each subcommand as an item: `.It Em NAME`.
            XCTAssertTrue(page.contains(".It Em \(path.last!)"), "the man page does not mention \(path.joined(separator: " "))")
        }
        XCTAssertTrue(page.contains("fuse.docfs"), "the man page carries the mount help")
    }

    /// Paragraphs of help text are single lines that ArgumentParser wraps to the terminal: at a
    /// very wide terminal no paragraph is broken; at a narrow one no line is longer than the width
    /// unless it is one word.
    func testHelpParagraphsWrapAtAnyWidth() {
        for path in [[]] + commandPaths() {
            let wide = run(path + ["--help"], env: ["COLUMNS": "2000"])
            XCTAssertEqual(wide.status, 0)
            let text = wide.stdout.components(separatedBy: "\nUSAGE:").first ?? ""
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for (a, b) in zip(lines, lines.dropFirst()) where !a.isEmpty && !b.isEmpty {
                XCTFail("docfs \(path.joined(separator: " ")) --help: a paragraph is broken by a hard line break:\n\(a)\n\(b)")
            }
            let narrow = run(path + ["--help"], env: ["COLUMNS": "50"])
            for line in narrow.stdout.split(separator: "\n") where line.count > 50 {
                let words = line.split(separator: " ")
                // Only the usage line and unbreakable words may stick out.
                if line.hasPrefix("USAGE:") || line.hasPrefix("  See '") || words.count == 1 { continue }
                if line.hasPrefix("  ") && words.count <= 2 { continue } // an option name and its value
                XCTFail("docfs \(path.joined(separator: " ")) --help at 50 columns: a line of \(line.count): \(line)")
            }
        }
    }
}
