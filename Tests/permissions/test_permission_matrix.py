"""The permission matrix: every (user x item x operation) on a plain directory (ext4) and on a
docfs mount without a layout (every capability granted), errno for errno and the resulting
modes, owners, sizes, contents, xattrs and time changes compared.

    DOCFS_BIN=/work/main/.build/debug/docfs python3 -m pytest -q -s -p no:cacheprovider \\
        Tests/permissions/test_permission_matrix.py

PERM_SELF_CHECK=1 runs the matrix against a second plain directory instead of docfs (a check of
the test itself: it must report no mismatch).

The same tree is built (as root) under both roots. Each row that may change something gets
its own fresh copy of its target (a row folder holding just what the row needs), so rows are
independent and their order does not matter; rows that only look (open for reading, access,
stat, listdir, chdir, exec, getxattr) share one copy per item. The calls run in forked children
that take the user's numeric ids (docfs_testlib.USERS): owner 2001 (groups 2001, 2004), member
2002 (groups 2002, 2001, 2003), other 2003, root.

A failure lists every mismatch as `user op item: plain=<outcome> docfs=<outcome>` followed by
the differing entries of the row's tree after the call.

Deliberate deviations of docfs (docs/PERMISSIONS.md), not compared with ext4 but checked as documented:
non-UTF-8 names are refused with EILSEQ; where a folder refuses writing, the kernel's own EPERM for
mknod of a device without CAP_MKNOD and for link of a folder comes before docfs's EACCES;
st_size/st_blocks of directories, st_ino/st_dev/st_nlink and directory atimes are never compared.
"""
import os
import socket
import stat
import time

import pytest

import docfs_testlib as lib
from docfs_testlib import MEMBER, OTHER, OWNER, ROOT, USERS

CONTENT = b"#!/bin/sh\nexit 0\n"          # every file is a runnable script (the exec rows)
OLD_A = 1_000_000_001_111_111_111          # 2001-09-09, set on every target after it is built
OLD_M = 1_000_000_002_222_222_222
SET_A = 1_588_723_200_123_456_789          # what the utime rows set: 2020-05-06 ...
SET_M = 1_002_002_954                      # ... and 1970-01-01T00:00:01.002002954
XATTR = "user.test"
SELF_CHECK = os.environ.get("PERM_SELF_CHECK") == "1"
PLAIN_FS = "?"

# name: (mode, uid, gid)
FILES = {"%04o" % m: (m, 2001, 2001) for m in
         (0o600, 0o640, 0o644, 0o604, 0o060, 0o006, 0o000, 0o755, 0o700, 0o4755, 0o2755, 0o6755, 0o2745, 0o754)}
FILES.update({
    "g2003-0664": (0o664, 2001, 2003),   # the owner is not in the file's group
    "g2003-2775": (0o2775, 2001, 2003),
    "root-0644": (0o644, 0, 0),
    "root-4755": (0o4755, 0, 0),
    "m-0640": (0o640, 2002, 2001),       # the member's file in the owner's group
})
DIRS = {"%04o" % m: (m, 2001, 2001) for m in
        (0o700, 0o750, 0o755, 0o711, 0o733, 0o770, 0o777, 0o1777, 0o1770, 0o2775, 0o555, 0o300)}
DIRS.update({
    "root-1777": (0o1777, 0, 0),         # like /tmp
    "g2003-0775": (0o775, 2001, 2003),   # the owner is not in the folder's group
    "g2003-2770": (0o2770, 2001, 2003),
    "2777": (0o2777, 2001, 2001),        # set-group-ID and writable by "other", who is not in 2001
})


class Op:
    def __init__(self, name, call, mutates=True, needs="", exact_times=False, exempt=None, target=None):
        self.name, self.call, self.mutates, self.needs = name, call, mutates, needs
        self.exact_times, self.exempt, self.target = exact_times, exempt, target


def _open(path, flags, data=None):
    fd = os.open(path, flags)
    try:
        if data is not None:
            os.write(fd, data)
        if flags & os.O_ACCMODE != os.O_WRONLY:
            return os.read(fd, 64)
    finally:
        os.close(fd)


def _pwrite(path, data, offset):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def _create(path, mode):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))


def _exec(path):
    """execve() in a grandchild: 0 (the script ran), or the errno execve gave."""
    pid = os.fork()
    if pid == 0:
        try:
            devnull = os.open("/dev/null", os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            os.execv(path, [path])
        except OSError as e:
            os._exit(100 + e.errno)
        os._exit(99)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code >= 100:
        raise OSError(code - 100, os.strerror(code - 100), path)
    return "exit %d" % code


def _stat(path):
    st = os.stat(path)
    return "%s %d:%d%s" % (lib.fmt_mode(st.st_mode), st.st_uid, st.st_gid,
                           " size=%d" % st.st_size if stat.S_ISREG(st.st_mode) else "")


def _chdir(path):
    os.chdir(path)
    return os.getcwd() == path


def _mksock(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
    finally:
        s.close()


# Operations on a file F (in a row folder owned by root, 0755). The file's uid is known from its spec.
def file_ops(spec):
    mode, uid, gid = spec
    F = lambda r: os.path.join(r, "F")  # noqa: E731
    return [
        Op("open O_RDONLY", lambda r: _open(F(r), os.O_RDONLY), mutates=False),
        Op("open O_WRONLY", lambda r: _open(F(r), os.O_WRONLY), mutates=False),
        Op("open O_RDWR", lambda r: _open(F(r), os.O_RDWR), mutates=False),
        Op("open O_WRONLY|O_TRUNC", lambda r: _open(F(r), os.O_WRONLY | os.O_TRUNC)),
        Op("open O_APPEND+write", lambda r: _open(F(r), os.O_WRONLY | os.O_APPEND, b"+")),
        Op("access R_OK", lambda r: lib.access(F(r), os.R_OK), mutates=False),
        Op("access W_OK", lambda r: lib.access(F(r), os.W_OK), mutates=False),
        Op("access X_OK", lambda r: lib.access(F(r), os.X_OK), mutates=False),
        Op("access F_OK", lambda r: lib.access(F(r), os.F_OK), mutates=False),
        Op("stat", lambda r: _stat(F(r)), mutates=False),
        Op("exec", lambda r: _exec(F(r)), mutates=False),
        Op("getxattr", lambda r: os.getxattr(F(r), XATTR), mutates=False),
        Op("truncate 3", lambda r: os.truncate(F(r), 3)),
        Op("write 1 byte", lambda r: _pwrite(F(r), b"X", 1)),
        Op("chmod 0640", lambda r: os.chmod(F(r), 0o640)),
        Op("chmod 2755", lambda r: os.chmod(F(r), 0o2755)),
        Op("chmod 4711", lambda r: os.chmod(F(r), 0o4711)),
        Op("chown 2003", lambda r: os.chown(F(r), 2003, -1)),
        Op("chown to its own uid", lambda r: os.chown(F(r), uid, -1)),
        Op("chgrp 2004", lambda r: os.chown(F(r), -1, 2004)),
        Op("chgrp 2003", lambda r: os.chown(F(r), -1, 2003)),
        Op("chown -1 -1", lambda r: os.chown(F(r), -1, -1)),
        Op("utime ns", lambda r: os.utime(F(r), ns=(SET_A, SET_M)), exact_times=True),
        Op("utime NOW", lambda r: os.utime(F(r), None)),
        Op("setxattr", lambda r: os.setxattr(F(r), XATTR, b"new")),
        Op("removexattr", lambda r: os.removexattr(F(r), XATTR)),
        # protected_hardlinks (EPERM) comes before the folder's write permission (EACCES).
        Op("link", lambda r: os.link(F(r), os.path.join(r, "F.ln"))),
    ]


# Operations on a folder D (in a row folder owned by root, 0755). D holds what `needs` says:
# f (owner's file 0644), m (member's file 0644), s (owner's empty subfolder 0755); "T" adds a
# second folder T (root, 0777) holding x (root's file 0644) and sd (member's empty folder 0755).
def dir_ops(spec):
    D = lambda r, *n: os.path.join(r, "D", *n)  # noqa: E731
    T = lambda r, *n: os.path.join(r, "T", *n)  # noqa: E731
    return [
        Op("listdir", lambda r: sorted(os.listdir(D(r))), mutates=False, needs="fms"),
        Op("chdir", lambda r: _chdir(D(r)), mutates=False, needs="fms"),
        Op("stat child", lambda r: _stat(D(r, "f")), mutates=False, needs="fms"),
        Op("open child O_RDONLY", lambda r: _open(D(r, "f"), os.O_RDONLY), mutates=False, needs="fms"),
        Op("access R_OK", lambda r: lib.access(D(r), os.R_OK), mutates=False, needs="fms"),
        Op("access W_OK", lambda r: lib.access(D(r), os.W_OK), mutates=False, needs="fms"),
        Op("access X_OK", lambda r: lib.access(D(r), os.X_OK), mutates=False, needs="fms"),
        Op("access F_OK", lambda r: lib.access(D(r), os.F_OK), mutates=False, needs="fms"),
        Op("getxattr", lambda r: os.getxattr(D(r), XATTR), mutates=False, needs="fms"),
        Op("create file 0666", lambda r: _create(D(r, "new"), 0o666)),
        Op("create file 2775", lambda r: _create(D(r, "new"), 0o2775)),
        Op("create file O_EXCL over f", lambda r: _create(D(r, "f"), 0o666), needs="f"),
        Op("mkdir 0777", lambda r: os.mkdir(D(r, "nd"), 0o777)),
        Op("mkfifo", lambda r: os.mkfifo(D(r, "fifo"), 0o666)),
        Op("unix socket", lambda r: _mksock(D(r, "sock"))),
        Op("symlink", lambda r: os.symlink("f", D(r, "ln"))),
        Op("unlink own file", lambda r: os.unlink(D(r, "f")), needs="f"),
        Op("unlink member's file", lambda r: os.unlink(D(r, "m")), needs="m"),
        Op("rmdir", lambda r: os.rmdir(D(r, "s")), needs="s"),
        Op("rename within", lambda r: os.rename(D(r, "f"), D(r, "f2")), needs="f"),
        Op("rename over existing", lambda r: os.rename(D(r, "f"), D(r, "m")), needs="fm"),
        Op("rename file out to T", lambda r: os.rename(D(r, "f"), T(r, "f")), needs="fT"),
        Op("rename file in from T", lambda r: os.rename(T(r, "x"), D(r, "x")), needs="T"),
        Op("rename file in over f", lambda r: os.rename(T(r, "x"), D(r, "f")), needs="fT"),
        Op("rename folder out to T", lambda r: os.rename(D(r, "s"), T(r, "s")), needs="sT"),
        Op("rename folder in from T", lambda r: os.rename(T(r, "sd"), D(r, "sd")), needs="T"),
        Op("link own file within", lambda r: os.link(D(r, "f"), D(r, "f2")), needs="f"),
        Op("link member's file within", lambda r: os.link(D(r, "m"), D(r, "m2")), needs="m"),
        Op("link file in from T", lambda r: os.link(T(r, "x"), D(r, "x")), needs="T"),
        Op("link file out to T", lambda r: os.link(D(r, "f"), T(r, "f")), needs="fT"),
        Op("link over existing", lambda r: os.link(D(r, "f"), D(r, "m")), needs="fm"),
        Op("link folder", lambda r: os.link(D(r, "s"), D(r, "s2")), needs="s"),
        Op("chmod 0775", lambda r: os.chmod(D(r), 0o775)),
        Op("chmod 2775", lambda r: os.chmod(D(r), 0o2775)),
        Op("chown 2003", lambda r: os.chown(D(r), 2003, -1)),
        Op("chgrp 2004", lambda r: os.chown(D(r), -1, 2004)),
        Op("chgrp 2003", lambda r: os.chown(D(r), -1, 2003)),
        Op("chown -1 -1", lambda r: os.chown(D(r), -1, -1)),
        Op("utime ns", lambda r: os.utime(D(r), ns=(SET_A, SET_M)), exact_times=True),
        Op("utime NOW", lambda r: os.utime(D(r), None)),
        Op("setxattr", lambda r: os.setxattr(D(r), XATTR, b"new")),
        Op("removexattr", lambda r: os.removexattr(D(r), XATTR)),
        # The owner's symlink l -> f inside D: its own times and owner (AT_SYMLINK_NOFOLLOW).
        Op("symlink: utime ns nofollow", lambda r: os.utime(D(r, "l"), ns=(SET_A, SET_M), follow_symlinks=False),
           needs="fl", exact_times=True, target="D/l"),
        Op("symlink: utime NOW nofollow", lambda r: lib.utimensat(D(r, "l"), None, None, nofollow=True), needs="fl"),
        Op("symlink: lchown 2003", lambda r: os.chown(D(r, "l"), 2003, -1, follow_symlinks=False), needs="fl"),
        Op("symlink: lchgrp 2004", lambda r: os.chown(D(r, "l"), -1, 2004, follow_symlinks=False), needs="fl"),
        Op("symlink: readlink", lambda r: os.readlink(D(r, "l")), mutates=False, needs="fms"),
        # The owner's FIFO p (0640) inside D: the kernel opens FIFOs itself without asking the
        # daemon (no FUSE request); its own check (default_permissions) holds them to their mode.
        Op("fifo: open O_RDONLY|O_NONBLOCK", lambda r: _open(D(r, "p"), os.O_RDONLY | os.O_NONBLOCK), mutates=False),
        Op("fifo: open O_WRONLY|O_NONBLOCK", lambda r: _open(D(r, "p"), os.O_WRONLY | os.O_NONBLOCK), mutates=False),
        Op("fifo: open O_RDWR", lambda r: os.close(os.open(D(r, "p"), os.O_RDWR)), mutates=False),
        # Device nodes: made by root only (CAP_MKNOD), as on ext4.
        Op("mknod c 1 3", lambda r: os.mknod(D(r, "dev"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))),
        # Deliberate deviations: docfs refuses these where ext4 would do them.
        Op("create non-UTF-8 name", lambda r: _create(os.fsencode(D(r)) + b"/\xff\xfe", 0o644), exempt="EILSEQ"),
    ]


# MARK: building the tree (as root)

class Builder:
    """Builds items as root; an error is recorded (never raised) so that one failing setup step
    on docfs does not hide the rest of the matrix."""

    def __init__(self, tree):
        self.tree = tree
        self.errors = []

    def step(self, what, path, call):
        out = lib.attempt(call)
        if out[0] != "ok":
            self.errors.append("%s %s %s: %s" % (self.tree, what, path, lib.show(out)))

    # Every item of a row gets its own mtime (OLD_M + a fixed offset per name): how the result
    # knows an item again after a rename (inode numbers are not stable enough for that).
    def owned(self, path, mode, uid, gid, mtime=OLD_M, xattr=True):
        self.step("chown %d:%d" % (uid, gid), path, lambda: os.chown(path, uid, gid))
        self.step("chmod %04o" % mode, path, lambda: os.chmod(path, mode))
        if xattr:
            self.step("setxattr", path, lambda: os.setxattr(path, XATTR, b"orig"))
        self.step("utime", path, lambda: os.utime(path, ns=(OLD_A, mtime)))

    def file(self, path, mode, uid, gid, mtime=OLD_M):
        def make():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, CONTENT)
            finally:
                os.close(fd)
        self.step("create", path, make)
        self.owned(path, mode, uid, gid, mtime)

    def folder(self, path, mode, uid, gid, mtime):
        self.step("mkdir", path, lambda: os.mkdir(path, 0o700))
        self.owned(path, mode, uid, gid, mtime, xattr=False)

    def row_dir(self, path):
        self.step("mkdir", path, lambda: os.mkdir(path, 0o755))
        self.step("chmod 0755", path, lambda: os.chmod(path, 0o755))

    def file_target(self, rowdir, spec):
        self.row_dir(rowdir)
        self.file(os.path.join(rowdir, "F"), *spec)

    def dir_target(self, rowdir, spec, needs):
        self.row_dir(rowdir)
        D = os.path.join(rowdir, "D")
        self.step("mkdir", D, lambda: os.mkdir(D, 0o700))
        if "f" in needs:
            self.file(os.path.join(D, "f"), 0o644, 2001, 2001, OLD_M + 1)
        if "m" in needs:
            self.file(os.path.join(D, "m"), 0o644, 2002, 2002, OLD_M + 2)
        if "s" in needs:
            self.folder(os.path.join(D, "s"), 0o755, 2001, 2001, OLD_M + 3)
        if "p" in needs:
            fifo = os.path.join(D, "p")
            self.step("mkfifo", fifo, lambda: os.mkfifo(fifo, 0o600))
            self.owned(fifo, 0o640, 2001, 2001, OLD_M + 8, xattr=False)
        if "l" in needs:
            ln = os.path.join(D, "l")
            self.step("symlink", ln, lambda: os.symlink("f", ln))
            self.step("lchown 2001:2001", ln, lambda: os.chown(ln, 2001, 2001, follow_symlinks=False))
            self.step("utime nofollow", ln, lambda: os.utime(ln, ns=(OLD_A, OLD_M + 7), follow_symlinks=False))
        self.owned(D, *spec)      # after its children: chown, chmod, xattr, times
        if "T" in needs:
            T = os.path.join(rowdir, "T")
            self.step("mkdir", T, lambda: os.mkdir(T, 0o777))
            self.file(os.path.join(T, "x"), 0o644, 0, 0, OLD_M + 5)
            self.folder(os.path.join(T, "sd"), 0o755, 2002, 2002, OLD_M + 6)
            self.owned(T, 0o777, 0, 0, OLD_M + 4, xattr=False)


# MARK: looking at the result (as root)

def observe(rel, path, pre, exact_times, st=None):
    """One entry, as the comparison sees it: type, mode, owner, size (files), contents (files),
    user.test, whether mtime / ctime moved since the tree was built, exact times where the row set them."""
    try:
        st = st or os.lstat(path)
    except OSError as e:
        return "(%s)" % lib.ename(e.errno)
    parts = [lib.fmt_mode(st.st_mode), "%d:%d" % (st.st_uid, st.st_gid)]
    kind = lib.ftype(st.st_mode)
    if kind == "file":
        parts.append("size=%d" % st.st_size)
    if pre is not None:
        # pre: {relative path: lstat} of the row's tree before the call. An item is known again
        # by its mtime (unique in its row), else by its path.
        was = next((p for p in pre.values() if p.st_mtime_ns == st.st_mtime_ns), None) or pre.get(rel)
        if was is None or lib.ftype(was.st_mode) != kind:
            parts.append("new item")
        else:
            parts.append("mtime " + ("moved" if st.st_mtime_ns != was.st_mtime_ns else "same"))
            parts.append("ctime " + ("moved" if st.st_ctime_ns != was.st_ctime_ns else "same"))
    if exact_times:
        parts.append("atime_ns=%d mtime_ns=%d" % (st.st_atime_ns, st.st_mtime_ns))
    if kind == "link":
        parts.append("-> " + os.readlink(path))
    if kind in ("file", "dir"):
        try:
            parts.append("%s=%r" % (XATTR, os.getxattr(path, XATTR, follow_symlinks=False)))
        except OSError as e:
            parts.append("%s:%s" % (XATTR, lib.ename(e.errno)))
    if kind == "file":
        try:
            with open(path, "rb") as f:
                data = f.read()
            if data != CONTENT:
                parts.append("data=%r" % data[:40])
        except OSError as e:
            parts.append("read:%s" % lib.ename(e.errno))
    return " ".join(parts)


def walk(rowdir):
    """{relative path: lstat} of everything under rowdir (not rowdir itself)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(rowdir):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            try:
                out[os.path.relpath(full, rowdir)] = os.lstat(full)
            except OSError:
                pass
    return out


class Row:
    def __init__(self, n, user, op, item, spec, rowdir):
        self.n, self.user, self.op, self.item, self.spec, self.rowdir = n, user, op, item, spec, rowdir

    def label(self):
        mode, uid, gid = self.spec
        return "%-6s %-26s %-11s" % (self.user.name, self.op.name, "%s(%d:%d)" % (self.item, uid, gid))


def run_matrix(mount, kind):
    """Builds both trees, runs every row in both, returns (rows, results, setup errors)."""
    specs = FILES if kind == "file" else DIRS
    ops_of = file_ops if kind == "file" else dir_ops
    # PERM_SELF_CHECK=1: a second plain directory stands in for docfs; must give 0 mismatches.
    global PLAIN_FS
    PLAIN_FS = lib.fs_type(mount.plain)
    other = os.path.join(mount.plain, "self-check") if SELF_CHECK else mount.mnt
    os.makedirs(other, 0o755, exist_ok=True)
    roots = {"plain": os.path.join(mount.plain, kind + "s"), "docfs": os.path.join(other, kind + "s")}
    builders = {t: Builder(t) for t in roots}
    old_umask = os.umask(0)
    rows = []
    try:
        for t, r in roots.items():
            os.mkdir(r, 0o755)
        n = 0
        for item, spec in specs.items():
            shared = "s-" + item
            made_shared = False
            for op in ops_of(spec):
                if not op.mutates and not made_shared:
                    for t, r in roots.items():
                        if kind == "file":
                            builders[t].file_target(os.path.join(r, shared), spec)
                        else:
                            builders[t].dir_target(os.path.join(r, shared), spec, "fmslp")
                    made_shared = True
                for user in USERS:
                    n += 1
                    rowdir = shared if not op.mutates else "r%04d" % n
                    if op.mutates:
                        for t, r in roots.items():
                            if kind == "file":
                                builders[t].file_target(os.path.join(r, rowdir), spec)
                            else:
                                builders[t].dir_target(os.path.join(r, rowdir), spec, op.needs)
                    rows.append(Row(n, user, op, item, spec, rowdir))
    finally:
        os.umask(old_umask)

    results = {t: {} for t in roots}
    pre = {t: {} for t in roots}
    for t, r in roots.items():
        for row in rows:
            if row.op.exact_times:
                # Only the target, and no readdir of it: that would move a folder's atime.
                target = row.op.target or ("F" if kind == "file" else "D")
                pre[t][row.n] = {target: os.lstat(os.path.join(r, row.rowdir, target))}
            elif row.op.mutates:
                pre[t][row.n] = walk(os.path.join(r, row.rowdir))
    for t, r in roots.items():
        for user in USERS:
            mine = [row for row in rows if row.user is user]
            calls = [(row.n, (lambda row=row: row.op.call(os.path.join(r, row.rowdir)))) for row in mine]
            outcomes = lib.run_batch_as(user, calls)
            for row in mine:
                results[t][row.n] = [outcomes[row.n], None]
    for t, r in roots.items():
        for row in rows:
            if not row.op.mutates:
                continue
            base = os.path.join(r, row.rowdir)
            target = row.op.target or ("F" if kind == "file" else "D")
            # The target's own stat before anything reads its folder (readdir moves a folder's atime).
            first = lib.attempt(lambda: os.lstat(os.path.join(base, target)))
            after = walk(base)
            before = pre[t][row.n]
            results[t][row.n][1] = {rel: observe(rel, os.path.join(base, rel), before,
                                                 row.op.exact_times and rel == target,
                                                 first[1] if rel == target and first[0] == "ok" else None)
                                    for rel in after}
    return rows, results, builders


def compare(rows, results):
    """[(row, [lines])] of the rows where docfs differs from ext4, and notes on the exempt rows."""
    mismatches, exempt_notes = [], []
    for row in rows:
        (p_out, p_tree), (d_out, d_tree) = results["plain"][row.n], results["docfs"][row.n]
        if row.op.exempt and not SELF_CHECK:
            # docfs must refuse with the documented errno where ext4 does it, and otherwise give
            # ext4's errno or the documented one.
            want = row.op.exempt
            ok = (d_out == ("err", want)) if p_out[0] == "ok" else d_out in (p_out, ("err", want))
            exempt_notes.append((row, p_out, d_out, ok))
            if not ok:
                mismatches.append((row, ["%s: plain=%s docfs=%s (deliberate deviation: docfs must answer %s)" % (
                    row.label(), lib.show(p_out), lib.show(d_out), want)]))
            continue
        lines = []
        if p_out != d_out:
            lines.append("%s: plain=%s docfs=%s" % (row.label(), lib.show(p_out), lib.show(d_out)))
        if p_tree != d_tree:
            if not lines:
                lines.append("%s: plain=%s docfs=%s, but the results differ:" % (
                    row.label(), lib.show(p_out), lib.show(d_out)))
            for rel in sorted(set(p_tree or {}) | set(d_tree or {})):
                pv, dv = (p_tree or {}).get(rel, "(absent)"), (d_tree or {}).get(rel, "(absent)")
                if pv != dv:
                    lines.append("        %-6s plain=%s" % (rel, pv))
                    lines.append("        %-6s docfs=%s" % ("", dv))
        if lines:
            mismatches.append((row, lines))
    return mismatches, exempt_notes


def report(title, rows, mismatches, builders, started):
    plain_errors = builders["plain"].errors
    errors = builders["docfs"].errors
    print("\n%s: %d rows (%d users x %d items x %d operations), %d mismatches, %d docfs setup errors, %.1f s "
          "(the reference tree is on %s)" % (
              title, len(rows), len(USERS), len({r.item for r in rows}), len({r.op.name for r in rows}),
              len(mismatches), len(errors), time.monotonic() - started, PLAIN_FS))
    assert not plain_errors, "building the plain tree failed (a test bug):\n" + "\n".join(plain_errors[:20])
    if not mismatches and not errors:
        return
    by_op, by_user = {}, {}
    for row, _ in mismatches:
        by_op[row.op.name] = by_op.get(row.op.name, 0) + 1
        by_user[row.user.name] = by_user.get(row.user.name, 0) + 1
    msg = ["%s: %d of %d rows differ from ext4 (by user: %s)" % (
        title, len(mismatches), len(rows), ", ".join("%s %d" % kv for kv in sorted(by_user.items())))]
    if errors:
        msg.append("docfs refused %d steps of building the tree as root (first 15):" % len(errors))
        msg += ["  " + e for e in errors[:15]]
    msg.append("mismatching rows by operation:")
    msg += ["  %4d  %s" % (c, k) for k, c in sorted(by_op.items(), key=lambda kv: (-kv[1], kv[0]))]
    msg.append("every mismatch (user op item(uid:gid): plain=<errno/result> docfs=<errno/result>; then the entries that differ):")
    for row, lines in sorted(mismatches, key=lambda m: (m[0].op.name, m[0].item, m[0].user.name)):
        msg += lines
    pytest.fail("\n".join(msg), pytrace=False)


def test_file_matrix(docfs_mount):
    started = time.monotonic()
    rows, results, builders = run_matrix(docfs_mount, "file")
    mismatches, _ = compare(rows, results)
    report("file matrix", rows, mismatches, builders, started)


def test_folder_matrix(docfs_mount):
    started = time.monotonic()
    rows, results, builders = run_matrix(docfs_mount, "dir")
    mismatches, exempt_notes = compare(rows, results)
    print("\nexempt rows (deliberate deviations of docfs, not compared with ext4):")
    summary = {}
    for row, p_out, d_out, ok in exempt_notes:
        key = (row.op.name, lib.show(p_out), lib.show(d_out), ok)
        summary[key] = summary.get(key, 0) + 1
    for (op, p, d, ok), c in sorted(summary.items()):
        print("  %3d x %-22s plain=%-7s docfs=%-7s %s" % (c, op, p, d, "as documented" if ok else "NOT AS DOCUMENTED"))
    report("folder matrix", rows, mismatches, builders, started)


# MARK: owners and modes survive a remount and a kill -9

def _persist_tree(root, round_):
    """Items of every spec with owners, modes, exact times and an xattr (round 0), or every mode
    and owner changed again (round 1: done just before a kill -9)."""
    old_umask = os.umask(0)
    try:
        for i, (name, (mode, uid, gid)) in enumerate(sorted(FILES.items())):
            p = os.path.join(root, "f-" + name)
            if round_ == 0:
                with open(p, "wb") as f:
                    f.write(CONTENT)
                os.chown(p, uid, gid)
                os.chmod(p, mode)
                os.setxattr(p, XATTR, name.encode())
                os.utime(p, ns=(OLD_A + i, SET_M + i))
            else:
                os.chown(p, 2003, 2004)
                os.chmod(p, mode ^ 0o4070)
        for i, (name, (mode, uid, gid)) in enumerate(sorted(DIRS.items())):
            p = os.path.join(root, "d-" + name)
            if round_ == 0:
                os.mkdir(p)
                os.symlink("../f-0644", os.path.join(p, "ln"))
                os.chown(os.path.join(p, "ln"), uid, gid, follow_symlinks=False)
                os.mkfifo(os.path.join(p, "fifo"), 0o640)
                os.chown(os.path.join(p, "fifo"), uid, gid)
                os.chown(p, uid, gid)
                os.chmod(p, mode)
                os.utime(p, ns=(OLD_A, OLD_M + i))
            else:
                os.chown(p, 2002, 2003)
                os.chmod(p, mode ^ 0o2005)
    finally:
        os.umask(old_umask)


def _persist_snapshot(root):
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            kind = lib.ftype(st.st_mode)
            v = "%s %d:%d" % (lib.fmt_mode(st.st_mode), st.st_uid, st.st_gid)
            if kind == "file":
                v += " size=%d atime_ns=%d" % (st.st_size, st.st_atime_ns)
            if kind in ("file", "dir"):
                v += " mtime_ns=%d" % st.st_mtime_ns
                try:
                    v += " %s=%r" % (XATTR, os.getxattr(full, XATTR))
                except OSError as e:
                    v += " %s:%s" % (XATTR, lib.ename(e.errno))
            if kind == "link":
                v += " -> " + os.readlink(full)
            snap[os.path.relpath(full, root)] = v
    return snap


def _persist_diff(expected, got):
    return ["  %-16s ext4=%s\n  %-16s docfs=%s" % (k, expected.get(k, "(absent)"), "", got.get(k, "(absent)"))
            for k in sorted(set(expected) | set(got)) if expected.get(k) != got.get(k)]


def test_owners_and_modes_survive_remount_and_kill9():
    with lib.mounted("persist") as m:
        plain = os.path.join(m.base, "plain")
        os.mkdir(plain, 0o755)
        docfs = os.path.join(m.mnt, "p")
        os.mkdir(docfs, 0o755)
        problems = []
        for t in (plain, docfs):
            out = lib.attempt(lambda: _persist_tree(t, 0))
            if out[0] != "ok":
                problems.append("building the tree in %s: %s" % (t, lib.show(out)))
        expected = _persist_snapshot(plain)

        def check(when):
            got = _persist_snapshot(docfs)
            d = _persist_diff(expected, got)
            if d:
                problems.append("%s: %d of %d entries differ from ext4:\n%s" % (when, len(d), len(expected), "\n".join(d)))
            return got

        before = check("right after building")
        assert m.stop(clean=True), "a clean stop must exit 0 and unmount (%s):\n%s" % (m.last_stop, m.tail())
        m.start()
        after = check("after a clean remount")
        if after != before:
            problems.append("a clean remount changed:\n" + "\n".join(_persist_diff(before, after)))

        # Change every owner and mode again, then kill -9 at once: what returned must be kept.
        for t in (plain, docfs):
            out = lib.attempt(lambda: _persist_tree(t, 1))
            if out[0] != "ok":
                problems.append("changing the tree in %s: %s" % (t, lib.show(out)))
        expected = _persist_snapshot(plain)
        before = _persist_snapshot(docfs)
        m.proc.kill()               # our own daemon: kill -9
        m.proc.wait()
        m.proc = None
        deadline = time.monotonic() + 10
        while lib.on_mounts(m.mnt) and time.monotonic() < deadline:   # auto_unmount
            time.sleep(0.05)
        if lib.on_mounts(m.mnt):
            problems.append("auto_unmount left the mount behind after kill -9 (detached with fusermount3 -uz)")
            m.stop(clean=False)
        m.start()
        after = check("after kill -9 and a remount")
        if after != before:
            problems.append("kill -9 and a remount changed what stat showed before the kill:\n" +
                            "\n".join(_persist_diff(before, after)))
        print("\npersistence: %d entries compared before and after a clean remount and a kill -9" % len(expected))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)
