import Foundation
import Glibc
import XCTest

/// Owners and permission bits through a real mount with `--allow-other`, driven as other users
/// (`setpriv` children with their own uid, gid and groups). The full errno-for-errno matrix
/// against ext4 is Tests/permissions; these are the rows a regression would break first.
final class OwnershipMountTests: MountTestCase {
    override class var mountsInSetUp: Bool { false }

    override func setUpWithError() throws {
        try super.setUpWithError()
        // Other users must reach the mountpoint: the fixture's folder is private by default.
        chmod(fx.dir, 0o755)
        do { try fx.mount(extra: ["--allow-other"]) } catch { fx.teardown(); throw error }
    }

    /// Runs `script` in the fixture's folder as `uid` (gid = uid, with these supplementary groups).
    private func sh(as uid: Int, groups: [Int] = [], _ script: String) -> ShellResult {
        let groupArg = groups.isEmpty ? "--clear-groups" : "--groups=\(groups.map(String.init).joined(separator: ","))"
        let quoted = "'" + script.replacingOccurrences(of: "'", with: "'\\''") + "'"
        return fx.sh("setpriv --reuid=\(uid) --regid=\(uid) \(groupArg) sh -c \(quoted)")
    }

    func testOtherUsersAreHeldToTheModeBitsAndAccessAgrees() {
        var r = fx.sh("cd mnt && echo secret > private && chmod 600 private && mkdir shared && chmod 755 shared && echo hi > open")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2001,
            """
            cd mnt
            cat private 2>/dev/null && echo read || echo no-read
            test -r private && echo r || echo no-r
            echo x >> private 2>/dev/null && echo wrote || echo no-write
            touch shared/new 2>/dev/null && echo created || echo no-create
            test -w shared && echo w || echo no-w
            cat open
            stat -c '%U:%G %a' private
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "no-read\nno-r\nno-write\nno-create\nno-w\nhi\nroot:root 600\n", "\(r)\n\(fx.log)")
        // No log line to look for: the kernel refused these itself (default_permissions), before
        // asking docfs, as it does on ext4 (docs/PERMISSIONS.md).
    }

    /// The kernel opens FIFOs and connects sockets without asking the daemon: only its own check
    /// (default_permissions) keeps another user out of a 0600 one. As on ext4: EACCES for reading,
    /// writing (ENXIO, no reader, had it got past the check) and both, and for connect, which
    /// needs write permission on the socket; the owner (root, then a user given it) gets in.
    /// Each call runs in a forked child that took the user's uid and gid (no other groups).
    func testFIFOOpensAndSocketConnectsFollowTheModeBits() throws {
        let script = """
            import errno, os, socket, sys

            def attempt(call):
                try:
                    r = call()
                    if isinstance(r, int): os.close(r)
                    elif r is not None: r.close()
                    return "ok"
                except OSError as e:
                    return errno.errorcode[e.errno]

            def as_user(uid, call):
                # The call's result, from a forked child with this uid and gid (no other groups).
                sys.stdout.flush()
                rd, wr = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(rd)
                    try:
                        os.setgroups([]); os.setgid(uid); os.setuid(uid)
                        res = call()
                    except BaseException as e:
                        res = "child failed: %r" % e
                    os.write(wr, res.encode()); os._exit(0)
                os.close(wr)
                out = b""
                while chunk := os.read(rd, 100): out += chunk
                os.close(rd); os.waitpid(pid, 0)
                return out.decode()

            def fifo_opens(path):
                return " ".join(attempt(lambda f=f: os.open(path, f)) for f in
                                (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK, os.O_RDWR))

            def connect(path):
                def call():
                    c = socket.socket(socket.AF_UNIX); c.settimeout(5)
                    try: c.connect(path)
                    finally: c.close()
                return attempt(call)

            os.umask(0o022)
            os.mkfifo("mnt/fifo", 0o600)
            # Another user: EACCES for reading, writing (ENXIO if it got past the check: no reader) and both.
            print("other", as_user(2001, lambda: fifo_opens("mnt/fifo")))
            # Its owner, root: a reader held open, so that the non-blocking writer finds one.
            reader = os.open("mnt/fifo", os.O_RDONLY | os.O_NONBLOCK)
            print("root", fifo_opens("mnt/fifo"))
            os.chown("mnt/fifo", 2001, 2001)
            print("owner", as_user(2001, lambda: fifo_opens("mnt/fifo")))
            print("other", as_user(2002, lambda: fifo_opens("mnt/fifo")))
            os.close(reader)

            server = socket.socket(socket.AF_UNIX)
            server.bind("mnt/sock"); server.listen(8)
            os.chmod("mnt/sock", 0o600)
            print("socket other", as_user(2001, lambda: connect("mnt/sock")))
            print("socket root", connect("mnt/sock"))
            os.chown("mnt/sock", 2001, 2001)
            print("socket owner", as_user(2001, lambda: connect("mnt/sock")), "other", as_user(2002, lambda: connect("mnt/sock")))
            server.close()
            """
        try script.write(toFile: fx.dir + "/fifo_modes.py", atomically: true, encoding: .utf8)
        let r = fx.sh("python3 fifo_modes.py", timeout: 60)
        XCTAssertEqual(
            r.stdout,
            """
            other EACCES EACCES EACCES
            root ok ok ok
            owner ok ok ok
            other EACCES EACCES EACCES
            socket other EACCES
            socket root ok
            socket owner ok other EACCES

            """, "\(r)\n\(fx.log)")
        XCTAssertEqual(r.status, 0, "\(r)")
    }

    func testNewItemsBelongToTheirMakerAndSetGroupIDFoldersPassTheirGroupOn() {
        var r = fx.sh("cd mnt && mkdir team && chown 0:3000 team && chmod 2777 team && mkdir home && chmod 777 home")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2001, groups: [3000],
            """
            cd mnt
            umask 022
            echo a > home/mine && mkdir home/dir && stat -c '%u %g %a' home/mine home/dir
            echo b > team/f && mkdir team/sub && stat -c '%u %g %a' team/f team/sub
            """)
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        XCTAssertEqual(r.stdout, "2001 2001 644\n2001 2001 755\n2001 3000 644\n2001 3000 2755\n", "\(r)")
    }

    func testChownChgrpAndChmodFollowLinuxRules() {
        var r = fx.sh("cd mnt && mkdir -m 777 pub && echo x > pub/f && chown 2001:2001 pub/f")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2001, groups: [3000],
            """
            cd mnt/pub
            chown 2002 f 2>&1 | grep -q 'not permitted' && echo chown-EPERM
            chgrp 3000 f && stat -c %g f
            chgrp 4000 f 2>&1 | grep -q 'not permitted' && echo chgrp-EPERM
            chmod 2750 f && stat -c %a f
            """)
        XCTAssertEqual(r.stdout, "chown-EPERM\n3000\nchgrp-EPERM\n2750\n", "\(r)\n\(fx.log)")
        // Someone else may not chmod; root may do anything, and a chown clears set-user-ID.
        r = sh(as: 2002, "chmod 777 mnt/pub/f 2>&1 | grep -q 'not permitted' && echo chmod-EPERM")
        XCTAssertEqual(r.stdout, "chmod-EPERM\n", "\(r)")
        r = fx.sh("cd mnt/pub && chmod 4755 f && chown 2002:2002 f && stat -c '%u %g %a' f")
        XCTAssertEqual(r.stdout, "2002 2002 755\n", "\(r)")
    }

    func testStickyFolderKeepsOthersFromRemovingWhatIsNotTheirs() {
        var r = fx.sh("cd mnt && mkdir -m 1777 tmp")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(as: 2001, "echo a > mnt/tmp/a-file")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2002,
            """
            rm -f mnt/tmp/a-file 2>&1 | grep -q 'not permitted' && echo rm-EPERM
            mv mnt/tmp/a-file mnt/tmp/b 2>&1 | grep -q 'not permitted' && echo mv-EPERM
            echo b > mnt/tmp/b-file && rm mnt/tmp/b-file && echo own-removed
            """)
        XCTAssertEqual(r.stdout, "rm-EPERM\nmv-EPERM\nown-removed\n", "\(r)\n\(fx.log)")
        r = sh(as: 2001, "rm mnt/tmp/a-file && echo removed")
        XCTAssertEqual(r.stdout, "removed\n", "\(r)")
    }

    func testWritesByOthersClearSetIDBits() {
        var r = fx.sh(
            "cd mnt && mkdir -m 777 w && cd w && for f in u g k t o; do printf a > $f; done && chown 2001:2001 u g k t o && chmod 4755 u && chmod 2775 g && chmod 2765 k && chmod 6755 t && chmod 4755 o"
        )
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2001,
            """
            cd mnt/w
            printf b >> u && printf b >> g && printf b >> k && truncate -s 0 t && : > o
            stat -c %a u g k t o
            """)
        XCTAssertEqual(r.status, 0, "\(r)")
        // Group execute off: set-group-ID marks mandatory locking and stays.
        XCTAssertEqual(r.stdout, "755\n775\n2765\n755\n755\n", "\(r)")
    }

    /// A first write of a megabyte clears the bits as a small one does, and lands whole.
    func testLargeWritesByOthersClearSetIDBits() throws {
        try largeWriteByAnotherUserClearsSetID()
    }

    /// The same with `-o splice`, where the write's bytes reach the daemon as a pipe.
    func testSplicedLargeWritesByOthersClearSetIDBits() throws {
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.mount(extra: ["--allow-other", "-o", "splice"])
        try largeWriteByAnotherUserClearsSetID()
        XCTAssert(fx.log.contains("splice of requests on"), "log:\n\(fx.log)")
    }

    private func largeWriteByAnotherUserClearsSetID() throws {
        try fx.writeSource("large.bin", testBytes(3 << 20, seed: 5))
        var r = fx.sh(
            "chmod 755 src && chmod 644 src/large.bin && cd mnt && mkdir -m 777 big && printf a > big/u && chown 2001:2001 big/u && chmod 4755 big/u")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(
            as: 2001,
            "dd if=src/large.bin of=mnt/big/u bs=1M conv=notrunc status=none && stat -c %a mnt/big/u && cmp src/large.bin mnt/big/u && echo same")
        XCTAssertEqual(r.stdout, "755\nsame\n", "\(r)\nlog:\n\(fx.log)")
    }

    /// A set-ID bit added while another user's writer has the file open, the kernel writing it
    /// itself (passthrough: no write request reaches the daemon), goes at that writer's next
    /// write, as on ext4: the kernel asks the daemon to clear it first. Both kinds of kernel
    /// writer: an existing file opened for appending (its staged copy) and a new one
    /// (`-o passthrough_create`).
    func testSetIDAddedWhileTheKernelWritesTheFileGoesAtTheNextWrite() throws {
        XCTAssert(fx.stopDaemon(), "clean stop; log:\n\(fx.log)")
        try fx.mount(extra: ["--allow-other", "-o", "metrics=127.0.0.1:0,passthrough_create"])
        try fx.skipUnlessPassthrough()
        var r = fx.sh("mkdir -m 777 flags && cd mnt && mkdir -m 777 sx && printf a > sx/old && chown 2001:2001 sx/old && chmod 755 sx/old")
        XCTAssertEqual(r.status, 0, "\(r)")
        let before = try MetricsScrape.requests("write", of: fx)
        // The writer opens both, writes the new one once, then waits (60 s at most) for the bits.
        let writer = """
            cd mnt/sx && exec 3>>old 4>new && printf a >&4 && : > ../../flags/open || exit 8
            i=0; while [ ! -e ../../flags/go ]; do i=$((i + 1)); [ $i -gt 1200 ] && exit 9; sleep 0.05; done
            printf b >&3 && printf b >&4 && stat -c %a old new
            exec 3>&- 4>&-
            """
        let quoted = "'" + writer.replacingOccurrences(of: "'", with: "'\\''") + "'"
        r = fx.sh(
            """
            setpriv --reuid=2001 --regid=2001 --clear-groups sh -c \(quoted) > writer.out 2>&1 &
            w=$!
            i=0; while [ ! -e flags/open ]; do i=$((i + 1)); [ $i -gt 1200 ] && break; sleep 0.05; done
            chmod 4755 mnt/sx/old mnt/sx/new && stat -c %a mnt/sx/old mnt/sx/new && : > flags/go
            wait $w; echo "writer $?"; cat writer.out
            stat -c '%a %s' mnt/sx/old mnt/sx/new && cat mnt/sx/old mnt/sx/new
            """)
        XCTAssertEqual(r.stdout, "4755\n4755\nwriter 0\n755\n755\n755 2\n755 2\nabab", "\(r)\nlog:\n\(fx.log)")
        XCTAssertEqual(try MetricsScrape.requests("write", of: fx) - before, 0, "the kernel wrote both files itself; log:\n\(fx.log)")
    }

    func testSearchPermissionHoldsEvenForNamesTheKernelSawBefore() {
        var r = fx.sh("cd mnt && mkdir -m 755 box && echo in > box/f && cat box/f && chmod 700 box")
        XCTAssertEqual(r.status, 0, "\(r)")
        r = sh(as: 2001, "cat mnt/box/f 2>&1; stat mnt/box/f >/dev/null 2>&1 && echo stat-ok || echo stat-refused")
        XCTAssertEqual(r.stdout, "cat: mnt/box/f: Permission denied\nstat-refused\n", "\(r)\n\(fx.log)")
        // Root walked it again meanwhile: still refused for the other user.
        XCTAssertEqual(fx.sh("cat mnt/box/f").stdout, "in\n")
        r = sh(as: 2001, "cat mnt/box/f 2>/dev/null || echo refused")
        XCTAssertEqual(r.stdout, "refused\n", "\(r)")
    }

    func testOwnersModesAndExactTimesSurviveRemountAndKill9() throws {
        var r = fx.sh(
            """
            cd mnt && mkdir -m 2750 d && chown 2001:3000 d && echo x > d/f && chown 2002:3001 d/f && chmod 4640 d/f
            touch -h -d '2019-01-02 03:04:05.123456789' d/f && ln -s f d/l && touch -h -d '2001-02-03 04:05:06.000000007' d/l
            mkfifo -m 620 d/pipe
            python3 -c "import os; os.utime('d', ns=(1002002954, 1002002954))"
            stat -c '%n %u %g %a %F %.9Y' d d/f d/l d/pipe
            """)
        XCTAssertEqual(r.status, 0, "\(r)\n\(fx.log)")
        XCTAssertTrue(
            r.stdout.hasPrefix(
                """
                d 2001 3000 2750 directory 1.002002954
                d/f 2002 3001 4640 regular file 1546398245.123456789
                d/l 0 3000 777 symbolic link 981173106.000000007
                d/pipe 0 3000 620 fifo 

                """.dropLast()), "\(r)")
        let expected = r.stdout
        let listing = "cd mnt && stat -c '%n %u %g %a %F %.9Y' d d/f d/l d/pipe"
        XCTAssertTrue(fx.stopDaemon())
        try fx.mount(extra: ["--allow-other"])
        XCTAssertEqual(fx.sh(listing).stdout, expected, "after a clean remount")
        XCTAssertEqual(fx.sh("cd mnt && chown 2003 d/f && chmod 0604 d/f").status, 0)
        fx.kill9()
        try fx.mount(extra: ["--allow-other"])
        XCTAssertEqual(fx.sh("cd mnt && stat -c '%u %a' d/f").stdout, "2003 604\n", "after kill -9")
    }

    /// Times as ext4 keeps them: O_TRUNC moves an empty file's mtime; a time set while the file
    /// is open for writing (after a truncate by path committed a version) stays through close.
    func testTimesThroughTruncationAndOpenHandles() throws {
        let script = """
            import os
            os.chdir("mnt")
            open("e", "w").close()
            os.utime("e", ns=(10**9, 10**9))
            fd = os.open("e", os.O_WRONLY | os.O_TRUNC); os.close(fd)
            print(os.stat("e").st_mtime_ns > 10**9)
            fd = os.open("a", os.O_RDWR | os.O_CREAT, 0o644); os.write(fd, b"x")
            os.truncate("a", 0)
            os.utime("a", ns=(1002002954, 1002002954))
            print(os.stat("a").st_mtime_ns)
            os.close(fd)
            print(os.stat("a").st_mtime_ns)
            """
        try script.write(toFile: fx.dir + "/times.py", atomically: true, encoding: .utf8)
        let r = fx.sh("python3 times.py")
        XCTAssertEqual(r.stdout, "True\n1002002954\n1002002954\n", "\(r)\n\(fx.log)")
    }
}
