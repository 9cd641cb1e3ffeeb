"""Model-based random test: the same random operations on a plain directory and on a docfs
mount (no layout: every capability granted) must give the same trees and the same errnos.

Run by `make test` after `swift test` with a short budget (HYPOTHESIS_PROFILE=ci: seeded,
derandomized, ~60 s); longer by hand:

    make fuzz                                  # HYPOTHESIS_PROFILE=fuzz, random seeds
    MODEL_EXAMPLES=2000 make fuzz              # more sequences (MODEL_BUDGET=S: stop after S s)

DOCFS_BIN must point at the built docfs. The test mounts with `docfs mount STORE MNT -f -o
auto_unmount,allow_other` as a subprocess, kills only the PID it started, and always unmounts
(`fusermount3 -uz`) at the end (MODEL_KEEP_LOG=FILE keeps the daemon's log). A failure prints the shrunk sequence of steps, which replays
as Python (`state = DocfsModel(); state.write(...)`).

Owners, modes and times are part of the model: rules chmod (set-ID and sticky bits included),
chown / lchown (root, among a few ids), utimensat (explicit nanoseconds, UTIME_NOW, UTIME_OMIT,
AT_SYMLINK_NOFOLLOW), mkfifo, and calls made by a second user (uid 2001 or 2002, in a forked
child) whose errnos are compared. Each tree snapshot compares type, mode, uid, gid and mtime_ns:
an mtime from before the run (one a rule set explicitly) exactly, a recent one (set by the
filesystem at the moment of a change) as "recent" on both sides. Folder atimes and ctimes are
not compared; ctime must not go backwards across a chmod. Must run as root.

MODEL_PROVIDER=memory runs the same against the in-memory provider (`docfs mount memory: MNT`)
instead of a store: the remount rule is left out (the tree would be lost) and so is the final
`docfs check`. `make test` runs it for both providers, the memory run with MODEL_EXAMPLES=60.
"""
import ctypes
import ctypes.util
import errno
import os
import pickle
import select
import shutil
import stat
import signal
import subprocess
import tempfile
import threading
import time

import pytest
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
# `make test` runs a fixed number of sequences (about 35-60 s here): a time budget cannot bound
# it, because a sequence skipped for time draws differently from the same sequence run earlier,
# which hypothesis reports as flaky data generation (and it stops a failing run from shrinking).
EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "150" if PROFILE == "ci" else "1000"))
STEPS = int(os.environ.get("MODEL_STEPS", "40"))
# Opt-in only (e.g. for `make fuzz` on a deadline): seconds after which remaining sequences are
# skipped. 0: no limit. Expect a FlakyStrategyDefinition report when the limit is reached.
BUDGET = float(os.environ.get("MODEL_BUDGET", "0"))
settings.register_profile("ci", max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                          derandomize=True, database=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("fuzz", max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                          database=None, print_blob=True, suppress_health_check=list(HealthCheck))
settings.load_profile(PROFILE)

# Errnos a Linux filesystem may give interchangeably for the same failure.
SAME = {errno.EEXIST: errno.ENOTEMPTY}

# The second user needs root (to take its ids) and allow_other (which needs root, or
# user_allow_other in /etc/fuse.conf): without root, its rule is left out.
AS_ROOT = os.geteuid() == 0
# An mtime before this is one a rule set explicitly (compared exactly); after it, "recent".
RECENT_NS = (int(time.time()) - 86_400) * 1_000_000_000

# "store" (a fresh store made with docfs init) or "memory" (the in-memory provider).
PROVIDER = os.environ.get("MODEL_PROVIDER", "store")
if PROVIDER not in ("store", "memory"):
    raise SystemExit("MODEL_PROVIDER must be store or memory, not %r" % PROVIDER)
MEMORY = PROVIDER == "memory"

STATS = {"by_kind": {}, "lost_mounts": 0, "operations": 0, "examples": 0, "remounts": 0, "compares": 0, "skipped": 0, "started": time.monotonic()}


def on_mounts(path):
    with open("/proc/self/mounts") as f:
        return any(line.split(" ")[1] == path for line in f)


class Mount:
    """A docfs daemon in the foreground on a fresh store; the only process it ever kills is its own."""

    def __init__(self, base):
        self.bin = os.environ.get("DOCFS_BIN")
        if not self.bin or not os.access(self.bin, os.X_OK):
            pytest.fail("DOCFS_BIN must name the built docfs executable")
        self.base = base
        self.store = os.path.join(base, "store")
        self.mnt = os.path.join(base, "mnt")
        self.log = os.path.join(base, "log.txt")
        os.mkdir(self.mnt)
        subprocess.run([self.bin, "init", self.store], check=True, timeout=60)
        self.proc = None
        self.last_progress = time.monotonic()
        self.watchdog_fired = False
        self._stop = threading.Event()
        self._dog = threading.Thread(target=self._watch, daemon=True)
        self._dog.start()

    def start(self):
        logf = open(self.log, "ab")
        # The memory provider's staging folder goes into base (its TMPDIR), removed with it.
        self.proc = subprocess.Popen([self.bin, "mount", "memory:" if MEMORY else self.store, self.mnt, "-f", "-o", "auto_unmount,allow_other" if AS_ROOT else "auto_unmount",
                                      "--log-level", os.environ.get("MODEL_LOG_LEVEL", "info")], stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, TMPDIR=self.base) if MEMORY else None)
        logf.close()
        deadline = time.monotonic() + 20
        while not on_mounts(self.mnt):
            if self.proc.poll() is not None:
                pytest.fail("docfs mount exited with %s:\n%s" % (self.proc.returncode, self.tail()))
            if time.monotonic() > deadline:
                self.stop(clean=False)
                pytest.fail("the mount did not appear within 20 s")
            time.sleep(0.02)

    def stop(self, clean=True):
        if self.proc is None:
            return True
        ok = True
        self.last_stop = "killed"
        if clean:
            self.proc.send_signal(signal.SIGTERM)
            try:
                status = self.proc.wait(30)
                ok = status == 0
                self.last_stop = "exit status %s" % status
            except subprocess.TimeoutExpired:
                ok = False
                self.last_stop = "still running 30 s after SIGTERM"
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

    def tail(self):
        try:
            with open(self.log, "rb") as f:
                return f.read()[-4000:].decode(errors="replace")
        except OSError:
            return ""

    def progress(self):
        self.last_progress = time.monotonic()

    def _watch(self):
        # Never touches the mountpoint: kills our daemon and detaches the mount if an operation hangs.
        while not self._stop.wait(1):
            if self.proc is not None and time.monotonic() - self.last_progress > 60:
                self.watchdog_fired = True
                try:
                    self.proc.kill()
                except Exception:
                    pass
                subprocess.run(["fusermount3", "-uz", self.mnt], timeout=15)
                self.last_progress = time.monotonic()

    def close(self):
        self._stop.set()
        self.stop(clean=True)
        if on_mounts(self.mnt):
            subprocess.run(["fusermount3", "-uz", self.mnt], timeout=15)


def attempt(call):
    try:
        return ("ok", call())
    except OSError as e:
        return ("err", SAME.get(e.errno, e.errno))


def show(outcome):
    kind, value = outcome
    return errno.errorcode.get(value, str(value)) if kind == "err" else repr(value)[:80]


# MARK: a second user, and utimensat itself

class User:
    def __init__(self, uid, gid, groups):
        self.uid, self.gid, self.groups = uid, gid, groups

    def __repr__(self):
        return "uid %d" % self.uid


USERS = [User(2001, 2001, [2001]), User(2002, 2002, [2002, 2001])]   # 2002 is in 2001's group


def as_user(user, call, timeout=30):
    """call() in a forked child that has become `user` (umask 022); its OSError is raised here
    with the same errno, its result returned."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.umask(0o022)
            os.setgroups(user.groups)
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            try:
                out = ("ok", call())
            except OSError as e:
                out = ("err", e.errno)
            except Exception as e:  # noqa: BLE001
                out = ("exc", repr(e))
            os.write(w, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        if not data:
            try:
                os.kill(pid, signal.SIGKILL)   # our own child, hung on the mount
            except ProcessLookupError:
                pass
        os.waitpid(pid, 0)
    if not data:
        raise AssertionError("a call as %r hung for %d s" % (user, timeout))
    kind, value = pickle.loads(data)
    if kind == "err":
        raise OSError(value, os.strerror(value))
    if kind == "exc":
        raise AssertionError("a call as %r raised %s" % (user, value))
    return value


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_SYMLINK_NOFOLLOW = 0x100


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat(path, atime, mtime, nofollow):
    """utimensat(2): each time is nanoseconds, "now" or "omit"."""
    def ts(v):
        if v == "now":
            return _Timespec(0, UTIME_NOW)
        if v == "omit":
            return _Timespec(0, UTIME_OMIT)
        return _Timespec(v // 1_000_000_000, v % 1_000_000_000)
    times = (_Timespec * 2)(ts(atime), ts(mtime))
    if _libc.utimensat(-100, os.fsencode(path), times, AT_SYMLINK_NOFOLLOW if nofollow else 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)


NAMES = ["a", "b", "c"]
paths = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join)
small = st.binary(max_size=48)
blocks = st.builds(lambda n, b: bytes([b]) * n, st.integers(0, 200_000), st.integers(0, 255))
datas = st.one_of(small, small, blocks)
offsets = st.one_of(st.integers(0, 64), st.integers(0, 250_000))
sizes = st.one_of(st.integers(0, 64), st.integers(0, 250_000))
modes = st.sampled_from([0o644, 0o600, 0o755, 0o700, 0o000, 0o444, 0o777, 0o4755, 0o2755, 0o6755,
                         0o2745, 0o1777, 0o2775, 0o1755, 0o4711, 0o3777])
ids = st.sampled_from([0, 2001, 2002])
# Explicit times: all long before the run (see RECENT_NS), pre-1970 and odd nanoseconds included.
explicit_ns = st.one_of(st.sampled_from([1_002_002_954, 0, 1, 1_588_723_200_123_456_789, -86_400_000_000_001,
                                         999_999_999, 1_234_567_890_999_999_999]),
                        st.integers(-(2**31 - 1) * 10**9, 1_500_000_000 * 10**9))   # ext4's range starts in 1901
time_specs = st.one_of(explicit_ns, st.just("now"), st.just("omit"))
users = st.sampled_from(USERS)


def read_all(path):
    """Reads a file to its end; O_NONBLOCK so that a FIFO without a writer reads as empty."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def mtime_key(ns):
    return ns if ns < RECENT_NS else "recent"


def user_call(op, p, q, mode, data):
    """The second user's operations: a function to run in the child."""
    def write():
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o666)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def stat_():
        st_ = os.lstat(p)
        return (stat.S_IFMT(st_.st_mode), stat.S_IMODE(st_.st_mode), st_.st_uid, st_.st_gid)
    return {
        "create": lambda: os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)),
        "mkdir": lambda: os.mkdir(p, 0o777),
        "mkfifo": lambda: os.mkfifo(p, 0o666),
        "symlink": lambda: os.symlink("a", p),
        "unlink": lambda: os.unlink(p),
        "rmdir": lambda: os.rmdir(p),
        "rename": lambda: os.rename(p, q),
        "link": lambda: os.link(p, q),
        "write": write,
        "truncate": lambda: os.truncate(p, len(data)),
        "read": lambda: read_all(p),
        "listdir": lambda: sorted(os.listdir(p)),
        "stat": stat_,
        "access W_OK": lambda: os.access(p, os.W_OK),
        "chmod": lambda: os.chmod(p, mode),
        "chgrp 2001": lambda: os.chown(p, -1, 2001),
        "chown 2002": lambda: os.chown(p, 2002, -1),
        "utime now": lambda: os.utime(p, None),
        "utime explicit": lambda: os.utime(p, ns=(1_002_002_954, 1_588_723_200_123_456_789)),
        "setxattr": lambda: os.setxattr(p, "user.m", data),
    }[op]


USER_OPS = ["create", "mkdir", "mkfifo", "symlink", "unlink", "rmdir", "rename", "link", "write", "truncate", "read",
            "listdir", "stat", "access W_OK", "chmod", "chgrp 2001", "chown 2002", "utime now", "utime explicit",
            "setxattr"]


class DocfsModel(RuleBasedStateMachine):
    mount = None      # set by the test
    counter = 0

    def __init__(self):
        super().__init__()
        DocfsModel.counter += 1
        self.skip = BUDGET > 0 and time.monotonic() - STATS["started"] > BUDGET
        STATS["skipped" if self.skip else "examples"] += 1
        self.name = "ex%d" % DocfsModel.counter
        if not on_mounts(self.mount.mnt):
            # The daemon died in an earlier sequence (that sequence failed with it). Mount again,
            # so that hypothesis can go on shrinking that failure to its shortest sequence.
            STATS["lost_mounts"] += 1
            STATS["lost_log"] = self.mount.tail()
            self.mount.stop(clean=False)
            self.mount.start()
        self.plain_root = os.path.join(self.mount.base, "plain", self.name)
        os.makedirs(self.plain_root)
        os.chmod(os.path.dirname(self.plain_root), 0o755)
        os.mkdir(os.path.join(self.mount.mnt, self.name))
        for root in self.roots():
            os.chmod(root, 0o777)     # the second user may create here too
        self.handles = {}     # handle number -> (plain fd, docfs fd, path)
        self.next_handle = 0

    def roots(self):
        return self.plain_root, os.path.join(self.mount.mnt, self.name)

    def both(self, what, call):
        """Runs call(root) on both trees; their outcomes must agree. Returns the outcome."""
        if self.skip:
            return ("skipped", None)
        STATS["operations"] += 1
        kind = what.split(":")[0] if what.startswith("as ") else what.split(" ")[0]
        STATS["by_kind"][kind] = STATS["by_kind"].get(kind, 0) + 1
        self.mount.progress()
        plain_root, docfs_root = self.roots()
        expected = attempt(lambda: call(plain_root))
        got = attempt(lambda: call(docfs_root))
        self.mount.progress()
        assert not self.mount.watchdog_fired, "an operation hung for 60 s; the daemon was killed"
        assert got == expected, "%s: local filesystem %s, docfs %s\nlog tail:\n%s" % (
            what, show(expected), show(got), self.mount.tail())
        return got

    # MARK: rules on paths

    @rule(path=paths)
    def create(self, path):
        self.both("create %s" % path, lambda r: os.close(os.open(os.path.join(r, path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)))

    @rule(path=paths, data=datas, offset=offsets, truncate=st.booleans())
    def write(self, path, data, offset, truncate):
        def call(root):
            fd = os.open(os.path.join(root, path), os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | (os.O_TRUNC if truncate else 0), 0o644)
            try:
                os.pwrite(fd, data, offset)
            finally:
                os.close(fd)
        self.both("write %d bytes at %d to %s%s" % (len(data), offset, path, " (O_TRUNC)" if truncate else ""), call)

    @rule(path=paths, data=small)
    def append(self, path, data):
        def call(root):
            fd = os.open(os.path.join(root, path), os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        self.both("append to %s" % path, call)

    @rule(path=paths, size=sizes)
    def truncate(self, path, size):
        self.both("truncate %s to %d" % (path, size), lambda r: os.truncate(os.path.join(r, path), size))

    def close_handles_under(self, *paths_):
        """Known limitation (docs/USING.md): a file still being copied in (created and never closed)
        cannot be renamed over an existing name (EEXIST). The model closes handles on a rename's
        source first instead of comparing that. Unlinking or replacing an open file is compared:
        its handles keep working until closed, as on a local filesystem."""
        for h in sorted(self.handles):
            p = self.handles[h][2]
            if any(p == q or p.startswith(q + "/") for q in paths_):
                self.close_exact(h)

    @rule(src=paths, dst=paths)
    def rename(self, src, dst):
        self.close_handles_under(src)
        self.both("rename %s -> %s" % (src, dst), lambda r: os.rename(os.path.join(r, src), os.path.join(r, dst)))

    @rule(path=paths)
    def mkdir(self, path):
        self.both("mkdir %s" % path, lambda r: os.mkdir(os.path.join(r, path)))

    @rule(path=paths)
    def rmdir(self, path):
        self.close_handles_under(path)
        self.both("rmdir %s" % path, lambda r: os.rmdir(os.path.join(r, path)))

    @rule(path=paths)
    def unlink(self, path):
        self.both("unlink %s" % path, lambda r: os.unlink(os.path.join(r, path)))

    @rule(src=paths, dst=paths)
    def link(self, src, dst):
        self.both("link %s -> %s" % (src, dst), lambda r: os.link(os.path.join(r, src), os.path.join(r, dst)))

    @rule(path=paths, link=st.sampled_from(["a", "../b", "c/a", "/nowhere", "x y"]))
    def symlink(self, path, link):
        self.both("symlink %s -> %s" % (path, link), lambda r: os.symlink(link, os.path.join(r, path)))

    @rule(path=paths)
    def read(self, path):
        self.both("read %s" % path, lambda root: read_all(os.path.join(root, path)))

    # MARK: open handles (reopen, write, read, close)

    @precondition(lambda self: len(self.handles) < 3)
    @rule(path=paths, create=st.booleans())
    def open_handle(self, path, create):
        flags = os.O_RDWR | os.O_NONBLOCK | (os.O_CREAT if create else 0)
        fds = []
        def call(root):
            fd = os.open(os.path.join(root, path), flags, 0o644)
            fds.append(fd)
        outcome = self.both("open %s O_RDWR%s" % (path, "|O_CREAT" if create else ""), call)
        if outcome[0] == "ok":
            self.handles[self.next_handle] = (fds[0], fds[1], path)
            self.next_handle += 1

    def pick(self, data):
        return sorted(self.handles)[data % len(self.handles)]

    @precondition(lambda self: self.handles)
    @rule(which=st.integers(0, 5), data=datas, offset=offsets)
    def write_handle(self, which, data, offset):
        h = self.pick(which)
        plain_fd, docfs_fd, path = self.handles[h]
        fds = iter([plain_fd, docfs_fd])
        self.both("pwrite %d bytes at %d to handle %d (%s)" % (len(data), offset, h, path), lambda r: os.pwrite(next(fds), data, offset))

    @precondition(lambda self: self.handles)
    @rule(which=st.integers(0, 5), offset=offsets, size=st.integers(0, 70_000))
    def read_handle(self, which, offset, size):
        h = self.pick(which)
        plain_fd, docfs_fd, path = self.handles[h]
        fds = iter([plain_fd, docfs_fd])
        self.both("pread %d at %d from handle %d (%s)" % (size, offset, h, path), lambda r: os.pread(next(fds), size, offset))

    @precondition(lambda self: self.handles)
    @rule(which=st.integers(0, 5), size=sizes)
    def ftruncate_handle(self, which, size):
        h = self.pick(which)
        plain_fd, docfs_fd, path = self.handles[h]
        fds = iter([plain_fd, docfs_fd])
        self.both("ftruncate handle %d (%s) to %d" % (h, path, size), lambda r: os.ftruncate(next(fds), size))

    @precondition(lambda self: self.handles)
    @rule(which=st.integers(0, 5))
    def close_handle(self, which):
        self.close_exact(self.pick(which))

    def close_exact(self, h):
        """Closes handle number h (not an index, as close_handle's argument is)."""
        plain_fd, docfs_fd, path = self.handles.pop(h)
        fds = iter([plain_fd, docfs_fd])
        self.both("close handle %d (%s)" % (h, path), lambda r: os.close(next(fds)))

    def close_all(self):
        for h in sorted(self.handles):
            self.close_exact(h)

    # MARK: owners, modes, times, FIFOs, a second user

    @rule(path=paths, mode=modes)
    def chmod(self, path, mode):
        def call(root):
            p = os.path.join(root, path)
            try:
                before = os.stat(p).st_ctime_ns
            except OSError:
                before = None
            os.chmod(p, mode)
            after = os.stat(p).st_ctime_ns
            assert before is None or after >= before, "chmod %04o %s moved ctime backwards (%d -> %d) under %s" % (
                mode, path, before, after, root)
        self.both("chmod %04o %s" % (mode, path), call)

    @rule(path=paths, uid=st.sampled_from([-1, 0, 2001, 2002]), gid=st.sampled_from([-1, 0, 2001, 2002]),
          follow=st.booleans())
    def chown(self, path, uid, gid, follow):
        self.both("%s %d:%d %s" % ("chown" if follow else "lchown", uid, gid, path),
                  lambda r: os.chown(os.path.join(r, path), uid, gid, follow_symlinks=follow))

    @rule(path=paths, atime=time_specs, mtime=time_specs, nofollow=st.booleans())
    def utimens(self, path, atime, mtime, nofollow):
        self.both("utimensat %s atime=%s mtime=%s%s" % (path, atime, mtime, " AT_SYMLINK_NOFOLLOW" if nofollow else ""),
                  lambda r: utimensat(os.path.join(r, path), atime, mtime, nofollow))

    @rule(path=paths)
    def mkfifo(self, path):
        self.both("mkfifo %s" % path, lambda r: os.mkfifo(os.path.join(r, path), 0o644))

    @precondition(lambda self: AS_ROOT)
    @rule(user=users, op=st.sampled_from(USER_OPS), path=paths, path2=paths, mode=modes, data=small)
    def as_user(self, user, op, path, path2, mode, data):
        """One call by uid 2001 or 2002 (in a forked child): errno for errno."""
        if op == "rename":
            self.close_handles_under(path)
        self.both("as %r: %s %s%s" % (user, op, path, " -> " + path2 if op == "rename" else ""),
                  lambda r: as_user(user, user_call(op, os.path.join(r, path), os.path.join(r, path2), mode, data)))

    # MARK: remount

    @rule(crash=st.booleans())
    def remount(self, crash):
        """Close everything, then stop the daemon (cleanly, or kill -9) and mount again."""
        # Not for the memory provider: nothing survives a remount there. (Returning here rather
        # than a @precondition keeps the store run's sequences exactly as they were.)
        if self.skip or MEMORY:
            return
        self.close_all()
        STATS["remounts"] += 1
        STATS["operations"] += 1
        clean = self.mount.stop(clean=not crash)
        if not crash:
            assert clean, "a clean stop must exit 0 and unmount (%s):\n%s" % (self.mount.last_stop, self.mount.tail())
        self.mount.start()
        self.mount.progress()

    # MARK: comparing

    @staticmethod
    def snapshot(root):
        """{path: (type, ..., "mode uid:gid mtime")}: the mtime exactly when it is one set
        explicitly (before RECENT_NS), else "recent"; not atimes, not ctimes."""
        tree, names, nlinks = {}, {}, {}
        todo = [root]
        while todo:
            d = todo.pop()
            for name in sorted(os.listdir(d)):
                full = os.path.join(d, name)
                rel = os.path.relpath(full, root)
                st_ = os.lstat(full)
                meta = "%04o %d:%d mtime=%s" % (stat.S_IMODE(st_.st_mode), st_.st_uid, st_.st_gid, mtime_key(st_.st_mtime_ns))
                if stat.S_ISLNK(st_.st_mode):
                    tree[rel] = ("link", os.readlink(full), meta)
                elif stat.S_ISDIR(st_.st_mode):
                    tree[rel] = ("dir", meta)
                    todo.append(full)
                elif stat.S_ISFIFO(st_.st_mode):
                    tree[rel] = ("fifo", meta)
                elif stat.S_ISREG(st_.st_mode):
                    with open(full, "rb") as f:
                        data = f.read()
                    assert len(data) == st_.st_size, "%s: stat says %d bytes, read gives %d" % (full, st_.st_size, len(data))
                    tree[rel] = ("file", st_.st_size, data, meta)
                else:
                    tree[rel] = ("other %o" % stat.S_IFMT(st_.st_mode), meta)
                if not stat.S_ISDIR(st_.st_mode):
                    names.setdefault(st_.st_ino, []).append(rel)
                    nlinks[rel] = st_.st_nlink
        # Hard links: each name carries its link count and the other names of its inode.
        for group in names.values():
            for rel in group:
                tree[rel] = tree[rel] + ("nlink=%d" % nlinks[rel], tuple(sorted(n for n in group if n != rel)))
        return tree

    @invariant()
    def same_tree(self):
        if self.skip:
            return
        STATS["compares"] += 1
        self.mount.progress()
        plain_root, docfs_root = self.roots()
        expected, got = self.snapshot(plain_root), self.snapshot(docfs_root)
        if expected != got:
            diff = []
            for key in sorted(set(expected) | set(got)):
                e, g = expected.get(key), got.get(key)
                if e != g:
                    short = lambda v: v if v is None or v[0] != "file" else ("file", v[1], v[2][:16]) + v[3:]
                    diff.append("  %s: local %r, docfs %r" % (key, short(e), short(g)))
            raise AssertionError("trees differ:\n" + "\n".join(diff) + "\nlog tail:\n" + self.mount.tail())

    def teardown(self):
        for h in sorted(self.handles):
            plain_fd, docfs_fd, _ = self.handles.pop(h)
            for fd in (plain_fd, docfs_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
        for root in self.roots():
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def mount():
    base = tempfile.mkdtemp(prefix="docfs-test-%d-model-" % os.getpid())
    os.chmod(base, 0o755)     # the second user reaches both trees
    m = Mount(base)
    try:
        m.start()
        yield m
    finally:
        m.close()
        keep = os.environ.get("MODEL_KEEP_LOG")    # e.g. MODEL_KEEP_LOG=/tmp/model-docfs.log
        if keep:
            shutil.copyfile(m.log, keep)
        if not on_mounts(m.mnt):
            shutil.rmtree(base, ignore_errors=True)


def test_docfs_behaves_like_a_local_filesystem(mount):
    DocfsModel.mount = mount
    started = STATS["started"] = time.monotonic()
    try:
        run_state_machine_as_test(DocfsModel)
    finally:
        print("\nmodel test (%s, %s): %d operations, %d tree comparisons, %d remounts in %d sequences, %.1f s%s" % (
            PROFILE, PROVIDER, STATS["operations"], STATS["compares"], STATS["remounts"], STATS["examples"], time.monotonic() - started,
            " (%d more skipped: MODEL_BUDGET=%gs reached)" % (STATS["skipped"], BUDGET) if STATS["skipped"] else ""))
    new = ["chmod", "chown", "lchown", "utimensat", "mkfifo", "link", "as uid 2001", "as uid 2002"]
    print("  of them: " + ", ".join("%s %d" % (k, STATS["by_kind"].get(k, 0)) for k in new))
    assert STATS["operations"] > 0, "the model test ran no operations"
    assert STATS["lost_mounts"] == 0, "the mount was gone %d times at the start of a sequence; log tail:\n%s" % (
        STATS["lost_mounts"], STATS.get("lost_log", ""))
    # The store is consistent after all of it (the memory provider has no store to check).
    assert mount.stop(clean=True), mount.tail()
    if MEMORY:
        return
    check = subprocess.run([mount.bin, "check", mount.store], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
