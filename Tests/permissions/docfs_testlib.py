"""Shared pieces of the owners-and-permissions tests: a docfs mount run as a subprocess, users
made of numeric ids in forked children, and outcomes that compare errno for errno.

Nothing here touches /etc/passwd: a "user" is a (uid, gid, supplementary groups, umask) that a
forked child takes with setgroups / setresgid / setresuid before it makes its calls. The daemon
runs as root with `-o allow_other`, so those children may use the mount at all.
"""
import contextlib
import ctypes
import ctypes.util
import errno
import os
import pickle
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time

import pytest


def on_mounts(path):
    with open("/proc/self/mounts") as f:
        return any(line.split(" ")[1] == path for line in f)


def docfs_bin():
    b = os.environ.get("DOCFS_BIN")
    if not b or not os.access(b, os.X_OK):
        pytest.fail("DOCFS_BIN must name the built docfs executable (e.g. DOCFS_BIN=$(swift build --show-bin-path)/docfs)")
    return b


def make_base(tag):
    """A fresh directory under /tmp (ext4 here; DOCFS_TEST_TMPDIR to choose another) that other
    uids can reach: 0755 on every component we create. The name carries our pid so `make
    clean-mounts` knows whose it is."""
    base = tempfile.mkdtemp(prefix="docfs-test-%d-%s-" % (os.getpid(), tag), dir=os.environ.get("DOCFS_TEST_TMPDIR", "/tmp"))
    os.chmod(base, 0o755)
    return base


def fs_type(path):
    """The filesystem type holding path (the longest mount point above it), e.g. "ext4"."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split(" ")
            mp = fields[1].replace("\\040", " ")
            if (path == mp or path.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, kind = mp, fields[2]
    return kind


class Mount:
    """A docfs daemon in the foreground on its own store; the only process it ever kills is its own."""

    def __init__(self, base, opts="auto_unmount,allow_other"):
        self.bin = docfs_bin()
        self.base = base
        self.opts = opts
        self.store = os.path.join(base, "store")
        self.mnt = os.path.join(base, "mnt")
        self.log = os.path.join(base, "docfs.log")
        os.mkdir(self.mnt)
        os.chmod(self.mnt, 0o755)
        r = subprocess.run([self.bin, "init", self.store], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            pytest.fail("docfs init failed (%s): %s%s" % (r.returncode, r.stdout, r.stderr))
        self.proc = None
        self.last_stop = ""

    def start(self):
        # A binary being rebuilt may be missing or half-written for a moment: retry a few times.
        for attempt_ in range(4):
            logf = open(self.log, "ab")
            try:
                self.proc = subprocess.Popen([self.bin, "mount", self.store, self.mnt, "-f", "-o", self.opts,
                                              "--log-level", os.environ.get("PERM_LOG_LEVEL", "info")],
                                             stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
            except OSError as e:
                logf.close()
                if attempt_ == 3:
                    pytest.fail("cannot start %s: %s" % (self.bin, e))
                time.sleep(20)
                continue
            logf.close()
            deadline = time.monotonic() + 30
            while not on_mounts(self.mnt):
                if self.proc.poll() is not None:
                    self.proc = None
                    if attempt_ == 3:
                        pytest.fail("docfs mount exited:\n%s" % self.tail())
                    time.sleep(20)
                    break
                if time.monotonic() > deadline:
                    self.stop(clean=False)
                    pytest.fail("the mount did not appear within 30 s:\n%s" % self.tail())
                time.sleep(0.02)
            else:
                return
        pytest.fail("docfs mount never came up:\n%s" % self.tail())

    def stop(self, clean=True):
        """SIGTERM (clean) or SIGKILL our daemon, wait for the mount to vanish, and detach it
        with `fusermount3 -uz` if it is still there. True when the stop was clean."""
        ok = True
        if self.proc is not None:
            if clean:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    status = self.proc.wait(30)
                    ok = status == 0
                    self.last_stop = "exit status %s" % status
                except subprocess.TimeoutExpired:
                    ok = False
                    self.last_stop = "still running 30 s after SIGTERM"
            else:
                self.last_stop = "killed"
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        deadline = time.monotonic() + 5
        while on_mounts(self.mnt) and time.monotonic() < deadline:
            time.sleep(0.02)
        if on_mounts(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], timeout=15)
            ok = False
            self.last_stop += ", mount still there after 5 s"
        return ok

    def tail(self, n=3000):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.stop(clean=True)
        finally:
            if on_mounts(self.mnt):
                subprocess.run(["fusermount3", "-uz", self.mnt], timeout=15)


@contextlib.contextmanager
def mounted(tag):
    """with mounted("x") as m: a started Mount, always stopped and unmounted afterwards."""
    base = make_base(tag)
    m = Mount(base)
    # A hung call on the mount must not hang the test run: after WATCHDOG seconds our daemon
    # is killed (by its PID) and the mount detached, so hung calls fail with ENOTCONN.
    def watchdog():
        m.watchdog_fired = True
        if m.proc is not None:
            try:
                m.proc.kill()
            except Exception:  # noqa: BLE001
                pass
        subprocess.run(["fusermount3", "-uz", m.mnt], timeout=15)
    m.watchdog_fired = False
    dog = threading.Timer(float(os.environ.get("PERM_WATCHDOG", "600")), watchdog)
    dog.daemon = True
    dog.start()
    try:
        m.start()
        yield m
        assert not m.watchdog_fired, "the watchdog fired: something hung on the mount for %s s" % os.environ.get("PERM_WATCHDOG", "600")
    finally:
        dog.cancel()
        m.close()
        if not on_mounts(m.mnt):
            shutil.rmtree(base, ignore_errors=True)


# MARK: users

class User:
    def __init__(self, name, uid, gid, groups, umask=0o022):
        self.name, self.uid, self.gid, self.groups, self.umask = name, uid, gid, groups, umask

    def become(self):
        """In a forked child only."""
        os.umask(self.umask)
        if self.uid == 0:
            return
        os.setgroups(self.groups)
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)

    def __repr__(self):
        return self.name


ROOT = User("root", 0, 0, None)
OWNER = User("owner", 2001, 2001, [2001, 2004])          # owns most of the tree; also in 2004
MEMBER = User("member", 2002, 2002, [2002, 2001, 2003])  # in the owner's group (supplementary)
OTHER = User("other", 2003, 2003, [2003])
USERS = [OWNER, MEMBER, OTHER, ROOT]


# MARK: outcomes

def ename(n):
    return errno.errorcode.get(n, str(n))


def attempt(call):
    """("ok", value) or ("err", "EACCES"); any other exception is ("exc", text)."""
    try:
        return ("ok", call())
    except OSError as e:
        return ("err", ename(e.errno))
    except Exception as e:  # noqa: BLE001 - reported, never hidden
        return ("exc", "%s: %s" % (type(e).__name__, e))


def show(outcome):
    if outcome is None:
        return "<none>"
    kind, value = outcome
    if kind == "ok":
        return "ok" if value is None else "ok %s" % (value,)
    return value if kind == "err" else "exception %s" % value


def _run_child(user, payload, timeout):
    """Forks; the child becomes `user` and runs payload() -> picklable; the parent gets it back."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            user.become()
            data = pickle.dumps(payload())
        except BaseException as e:  # noqa: BLE001
            data = pickle.dumps(("child-failed", repr(e)))
            code = 1
        try:
            view = memoryview(data)
            while view:
                n = os.write(w, view)
                view = view[n:]
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)   # our own child
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
    if timed_out:
        return ("timeout", timeout)
    return pickle.loads(b"".join(chunks)) if chunks else ("child-failed", "no answer")


def run_as(user, call, timeout=60):
    """One call as `user` in a forked child: ("ok", value) / ("err", "EPERM") / ..."""
    out = _run_child(user, lambda: attempt(call), timeout)
    if out[0] in ("timeout", "child-failed"):
        return ("exc", "%s %s" % out)
    return out


def run_batch_as(user, calls, timeout=300):
    """Many independent calls as `user` in one forked child (the same as one child each, only
    faster): {key: outcome}. Each call gets the child back to cwd / afterwards."""
    def payload():
        results = {}
        for key, call in calls:
            results[key] = attempt(call)
            os.chdir("/")
        return results
    out = _run_child(user, payload, timeout)
    if isinstance(out, tuple):
        return {key: ("exc", "%s %s" % out) for key, _ in calls}
    return out


# MARK: calls that os does not offer with an errno

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
_libc.access.argtypes = [ctypes.c_char_p, ctypes.c_int]
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _ts(ns):
    if ns in (UTIME_NOW, UTIME_OMIT):
        return _Timespec(0, ns)
    return _Timespec(ns // 1_000_000_000, ns % 1_000_000_000)


def utimensat(path, atime_ns, mtime_ns, nofollow=False):
    """utimensat(2) itself: atime_ns / mtime_ns may be UTIME_NOW or UTIME_OMIT; None: both NOW."""
    if atime_ns is None and mtime_ns is None:
        times = None
    else:
        times = (_Timespec * 2)(_ts(atime_ns), _ts(mtime_ns))
    rc = _libc.utimensat(AT_FDCWD, os.fsencode(path), times, AT_SYMLINK_NOFOLLOW if nofollow else 0)
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


def access(path, mode):
    """access(2) with its errno (os.access only says True/False)."""
    if _libc.access(os.fsencode(path), mode) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return True


def ftype(mode):
    for name, test in (("dir", stat.S_ISDIR), ("file", stat.S_ISREG), ("link", stat.S_ISLNK),
                       ("fifo", stat.S_ISFIFO), ("sock", stat.S_ISSOCK), ("chr", stat.S_ISCHR), ("blk", stat.S_ISBLK)):
        if test(mode):
            return name
    return "?"


def fmt_mode(mode):
    return "%s:%04o" % (ftype(mode), stat.S_IMODE(mode))
