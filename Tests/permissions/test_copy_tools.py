"""Copy tools on docfs keep what they keep on ext4: the same command into a plain directory and
into a docfs mount (no layout), then every entry compared — file type, mode, uid, gid, size,
contents, mtime_ns (folders too, after the tool finished), atime_ns where the tool keeps it,
symlink targets and user.* xattrs.

    DOCFS_BIN=/work/main/.build/debug/docfs python3 -m pytest -q -s -p no:cacheprovider \\
        Tests/permissions/test_copy_tools.py

Needs cp, tar, rsync, install and touch (the Makefile's `deps` installs rsync); a missing tool
skips its test and says which. Runs as root; `tar xf` also runs as uid 2001.
"""
import hashlib
import os
import shutil
import stat
import subprocess

import pytest

import docfs_testlib as lib

NS = 1_000_000_000
T_2020 = 1_588_723_200 * NS + 123_456_789          # 2020-05-06 00:00:00.123456789
T_PRE1970 = -(86_400 * 400) * NS + 987_654_321      # 1968-11-27, with nanoseconds
T_ODD = 1_002_002_954                               # 1970-01-01T00:00:01.002002954

# path: (kind, mode, uid, gid, atime_ns, mtime_ns, extra)
SOURCE = [
    ("a.txt", "file", 0o640, 2001, 2001, T_2020, T_2020 + 1, b"alpha\n" * 100),
    ("b.txt", "file", 0o644, 2002, 2001, T_PRE1970, T_PRE1970 + 7, b"beta"),
    ("c.bin", "file", 0o600, 2003, 2003, T_ODD, T_ODD, bytes(range(256)) * 300),
    ("run.sh", "file", 0o755, 0, 0, T_2020 + 5, T_ODD + 5, b"#!/bin/sh\necho hi\n"),
    ("suid", "file", 0o4755, 2001, 2001, T_2020 + 6, T_2020 + 7, b"#!/bin/sh\n"),
    ("empty", "file", 0o644, 2002, 2002, T_2020 + 8, T_PRE1970 + 9, b""),
    ("fifo", "fifo", 0o640, 2001, 2002, T_2020 + 10, T_2020 + 11, None),
    ("link", "link", None, 2002, 2002, T_2020 + 12, T_ODD + 12, "a.txt"),
    ("dangling", "link", None, 2001, 2001, T_PRE1970 + 13, T_2020 + 13, "no/such/file"),
    ("sub", "dir", 0o750, 2001, 2002, T_2020 + 14, T_2020 + 15, None),
    ("sub/d.txt", "file", 0o640, 2002, 2002, T_2020 + 16, T_PRE1970 + 17, b"delta\n"),
    ("sub/deep", "dir", 0o700, 2003, 2003, T_ODD + 18, T_PRE1970 + 19, None),
    ("sub/deep/e.txt", "file", 0o644, 2003, 2001, T_2020 + 20, T_2020 + 21, b"epsilon\n" * 5000),
    ("sub/deep/up", "link", None, 2003, 2003, T_2020 + 22, T_2020 + 23, "../../a.txt"),
    ("shared", "dir", 0o2775, 2001, 2004, T_2020 + 24, T_ODD + 25, None),
    ("shared/g.txt", "file", 0o664, 2002, 2004, T_2020 + 26, T_2020 + 27, b"gamma"),
]
XATTRS = {"a.txt": {"user.note": b"first"}, "sub/d.txt": {"user.x": b"1", "user.y": b"\x00\xff"},
          "sub": {"user.folder": b"yes"}, "suid": {"user.k": b"v"}}
TOP_TIMES = (T_2020 + 90, T_2020 + 91)   # the source folder itself


def build_source(root):
    """The source tree, as root, on the local filesystem (times last, deepest first)."""
    old = os.umask(0)
    try:
        os.mkdir(root, 0o755)
        for rel, kind, mode, uid, gid, at, mt, extra in SOURCE:
            p = os.path.join(root, rel)
            if kind == "file":
                with open(p, "wb") as f:
                    f.write(extra)
            elif kind == "dir":
                os.mkdir(p)
            elif kind == "fifo":
                os.mkfifo(p)
            else:
                os.symlink(extra, p)
            os.chown(p, uid, gid, follow_symlinks=False)
            if mode is not None:
                os.chmod(p, mode)
            for k, v in XATTRS.get(rel, {}).items():
                os.setxattr(p, k, v)
        for rel, kind, mode, uid, gid, at, mt, extra in sorted(SOURCE, key=lambda s: -s[0].count("/")):
            os.utime(os.path.join(root, rel), ns=(at, mt), follow_symlinks=False)
        os.utime(root, ns=TOP_TIMES)
    finally:
        os.umask(old)


def snapshot(root, atimes):
    """{relative path: {field: value}}: everything stat'ed first (reading moves atimes), then read."""
    entries = {}
    stats = {}
    todo = [root]
    while todo:   # not os.walk: it follows symlinks to ask is_dir(), which moves their atime on ext4
        p = todo.pop()
        st = stats[p] = os.lstat(p)
        if stat.S_ISDIR(st.st_mode):
            todo += [os.path.join(p, n) for n in sorted(os.listdir(p), reverse=True)]
    for p, st in stats.items():
        kind = lib.ftype(st.st_mode)
        e = {"type": kind, "mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
             "mtime_ns": st.st_mtime_ns}
        if kind == "file":
            e["size"] = st.st_size
        if atimes and kind in ("file", "link"):
            e["atime_ns"] = st.st_atime_ns
        if kind == "link":
            e["target"] = os.readlink(p)
        if kind in ("file", "dir"):
            try:
                e["xattrs"] = {k: os.getxattr(p, k) for k in sorted(os.listxattr(p)) if k.startswith("user.")
                               and not k.startswith("user.docfs.")}
            except OSError as err:
                e["xattrs"] = lib.ename(err.errno)
        entries[os.path.relpath(p, root)] = e
    for p, st in stats.items():
        if stat.S_ISREG(st.st_mode):
            try:
                with open(p, "rb") as f:
                    entries[os.path.relpath(p, root)]["sha1"] = hashlib.sha1(f.read()).hexdigest()[:12]
            except OSError as err:
                entries[os.path.relpath(p, root)]["sha1"] = lib.ename(err.errno)
    return entries


def differences(expected, got):
    out = []
    for rel in sorted(set(expected) | set(got)):
        e, g = expected.get(rel), got.get(rel)
        if e is None or g is None:
            out.append("  %-16s plain=%s docfs=%s" % (rel, "present" if e else "(absent)", "present" if g else "(absent)"))
            continue
        for field in sorted(set(e) | set(g)):
            if e.get(field) != g.get(field):
                out.append("  %-16s %-8s plain=%r docfs=%r" % (rel, field, e.get(field), g.get(field)))
    return out


def need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not installed (make deps installs rsync; the others are coreutils / GNU tar)" % ", ".join(missing))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    return r.returncode, (r.stdout + r.stderr).strip()


class Pair:
    """A destination in both trees: plain/<name> and mnt/<name>, each made fresh by root."""

    def __init__(self, m, name, mode=0o755, uid=0, gid=0):
        self.m, self.name = m, name
        self.plain = os.path.join(m.plain, name)
        self.docfs = os.path.join(m.mnt, name)
        self.src = {}
        for t, p in (("plain", self.plain), ("docfs", self.docfs)):
            os.mkdir(p)
            os.chown(p, uid, gid)
            os.chmod(p, mode)
            # Each copy reads its own source: reading moves a source's atimes (relatime).
            self.src[t] = os.path.join(m.plain, "src-%s-%s" % (name, t))
            build_source(self.src[t])

    def both(self, command):
        """command(src, dest) -> argv; run for both trees; same exit status required."""
        outs = {}
        for t, dest in (("plain", self.plain), ("docfs", self.docfs)):
            outs[t] = run(command(self.src[t], dest))
        return outs

    def compare(self, what, atimes, outs=None, top_mtime=True):
        problems = []
        if outs and outs["plain"][0] != outs["docfs"][0]:
            problems.append("  exit status plain=%d docfs=%d\n  docfs said: %s" % (
                outs["plain"][0], outs["docfs"][0], outs["docfs"][1][-2000:]))
        expected, got = snapshot(self.plain, atimes), snapshot(self.docfs, atimes)
        if not top_mtime:   # DEST itself only got a new entry, at a different moment in each tree
            expected["."].pop("mtime_ns")
            got["."].pop("mtime_ns")
        problems += differences(expected, got)
        print("%s: %d entries compared with %s, %d differences" % (what, len(expected), lib.fs_type(self.plain), len(problems)))
        if problems:
            pytest.fail("%s: docfs differs from ext4 (%d):\n%s\ndocfs log tail:\n%s" % (
                what, len(problems), "\n".join(problems), self.m.tail(1500)), pytrace=False)


def test_source_tree_is_what_we_meant():
    """The source on ext4 has the owners, modes and nanosecond times it is meant to have."""
    base = lib.make_base("copysrc")
    try:
        src = os.path.join(base, "src")
        build_source(src)
        snap = snapshot(src, atimes=True)
        for rel, kind, mode, uid, gid, at, mt, extra in SOURCE:
            e = snap[rel]
            assert (e["type"], e["uid"], e["gid"], e["mtime_ns"]) == (kind, uid, gid, mt), (rel, e)
            if mode is not None:
                assert e["mode"] == "%04o" % mode, (rel, e)
            if kind in ("file", "link"):
                assert e["atime_ns"] == at, (rel, e)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_cp_archive(copy_mount):
    need("cp")
    p = Pair(copy_mount, "cp-a")
    outs = p.both(lambda s, d: ["cp", "-a", s + "/.", d + "/"])
    p.compare("cp -a src/. DEST/", atimes=True, outs=outs)


def test_cp_preserve_all_recursive(copy_mount):
    need("cp")
    p = Pair(copy_mount, "cp-preserve")
    outs = p.both(lambda s, d: ["cp", "--preserve=all", "-r", s, d + "/tree"])
    p.compare("cp --preserve=all -r src DEST/tree", atimes=True, outs=outs, top_mtime=False)


def test_tar_extract_as_root(copy_mount):
    need("tar")
    p = Pair(copy_mount, "tar-root")
    archive = os.path.join(copy_mount.base, "root.tar")
    rc, out = run(["tar", "--format=posix", "--xattrs", "--xattrs-include=user.*", "-cf", archive, "-C", p.src["plain"], "."])
    assert rc == 0, out
    outs = p.both(lambda s, d: ["tar", "--xattrs", "--xattrs-include=user.*", "-xpf", archive, "-C", d])
    p.compare("tar cf (posix, xattrs) + tar xpf as root", atimes=False, outs=outs)


def test_tar_extract_as_a_user(copy_mount):
    """tar xf as uid 2001 into a folder it owns: new items are 2001's, modes follow the umask."""
    need("tar")
    p = Pair(copy_mount, "tar-user", mode=0o755, uid=2001, gid=2001)
    archive = os.path.join(copy_mount.base, "user.tar")
    rc, out = run(["tar", "--format=posix", "-cf", archive, "-C", p.src["plain"], "."])
    assert rc == 0, out
    os.chmod(archive, 0o644)
    outs = {}
    for t, dest in (("plain", p.plain), ("docfs", p.docfs)):
        outs[t] = run(["tar", "-xf", archive, "-C", dest], user=2001, group=2001, extra_groups=[2001], umask=0o027)
    p.compare("tar xf as uid 2001 (umask 027)", atimes=False, outs=outs)


def test_rsync_archive_twice(copy_mount):
    need("rsync")
    p = Pair(copy_mount, "rsync")
    outs = p.both(lambda s, d: ["rsync", "-a", s + "/", d + "/"])
    p.compare("rsync -a src/ DEST/", atimes=False, outs=outs)
    # A second run finds everything up to date: nothing itemized, on either tree.
    again = p.both(lambda s, d: ["rsync", "-a", "-i", s + "/", d + "/"])
    assert again["plain"] == (0, ""), "test bug: on ext4 the second rsync did something: %r" % (again["plain"],)
    assert again["docfs"] == (0, ""), "the second rsync -a -i on docfs transferred or changed:\n%s" % again["docfs"][1]
    p.compare("rsync -a src/ DEST/ (second run)", atimes=False)


def test_install_with_owner_and_mode(copy_mount):
    need("install")
    p = Pair(copy_mount, "install")
    outs = p.both(lambda s, d: ["install", "-m", "0644", "-o", "2001", "-g", "2002", os.path.join(s, "c.bin"), d + "/"])
    outs2 = p.both(lambda s, d: ["install", "-m", "4750", "-o", "2003", "-g", "2004", os.path.join(s, "run.sh"), d + "/"])
    outs3 = p.both(lambda s, d: ["install", "-d", "-m", "2770", "-o", "2002", "-g", "2001", d + "/made/dirs"])
    for o in (outs2, outs3):
        for t in o:
            outs[t] = (outs[t][0] or o[t][0], outs[t][1] + o[t][1])
    # install does not keep times (new mtime): compare everything but them.
    for t in ("plain", "docfs"):
        for dirpath, dirnames, filenames in os.walk(getattr(p, t)):
            for n in dirnames + filenames + ["."]:
                os.utime(os.path.join(dirpath, n), ns=(T_2020, T_2020), follow_symlinks=False)
    p.compare("install -m -o -g", atimes=True, outs=outs)


def test_touch_and_utime_nanoseconds(copy_mount):
    need("touch")
    p = Pair(copy_mount, "touch")
    problems = []
    for t, dest in (("plain", p.plain), ("docfs", p.docfs)):
        f = os.path.join(dest, "f")
        with open(f, "wb") as fh:
            fh.write(b"x")
        rc, out = run(["touch", "-d", "2019-01-02 03:04:05.123456789", f])
        if rc != 0:
            problems.append("%s: touch -d failed: %s" % (t, out))
    expected_ns = None
    for t, dest in (("plain", p.plain), ("docfs", p.docfs)):
        st = os.stat(os.path.join(dest, "f"))
        if expected_ns is None:
            expected_ns = (st.st_atime_ns, st.st_mtime_ns)
            assert expected_ns[1] % NS == 123_456_789, expected_ns
        elif (st.st_atime_ns, st.st_mtime_ns) != expected_ns:
            problems.append("touch -d '2019-01-02 03:04:05.123456789': plain=%r docfs=%r" % (
                expected_ns, (st.st_atime_ns, st.st_mtime_ns)))
    # os.utime round trips, to the nanosecond, on a file, a folder and (not following) a symlink.
    values = [(T_ODD, 1_002_002_954), (T_2020, T_PRE1970), (0, 1), (999_999_999, NS), (T_PRE1970, -1),
              (-NS, -NS + 1), (2**33 * NS + 5, 2**31 * NS - 1), (1_700_000_000 * NS + 999_999_999, 1_002_002_954 * NS + 1_002_002_954 % NS)]
    for t, dest in (("plain", p.plain), ("docfs", p.docfs)):
        os.mkdir(os.path.join(dest, "d"))
        os.symlink("f", os.path.join(dest, "l"))
    for a, mt in values:
        got = {}
        for t, dest in (("plain", p.plain), ("docfs", p.docfs)):
            row = []
            for name, follow in (("f", True), ("d", True), ("l", False)):
                path = os.path.join(dest, name)
                out = lib.attempt(lambda: os.utime(path, ns=(a, mt), follow_symlinks=follow))
                st = os.lstat(path)
                row.append((name, lib.show(out), st.st_atime_ns if name != "d" else None, st.st_mtime_ns))
            got[t] = row
        if got["plain"] != got["docfs"]:
            problems.append("utime ns=(%d, %d): plain=%r docfs=%r" % (a, mt, got["plain"], got["docfs"]))
    print("touch / utime: %d time pairs on a file, a folder and a symlink" % (1 + len(values)))
    if problems:
        pytest.fail("times differ from ext4:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture(scope="module")
def copy_mount():
    with lib.mounted("copy") as m:
        m.plain = os.path.join(m.base, "plain")
        os.mkdir(m.plain, 0o755)
        yield m
