#!/usr/bin/env python3
"""Randomized test of three replicas online at once, with faults (`make replica-model` runs it
after two_replicas.py, against the loopback servers of Tests/remote/servers.sh).

Each seed makes a fresh server (a database and a bucket) and three stores of it, mounted, which
reach PostgreSQL and the S3 server through fault proxies of this test's own (fault_proxy.py, on
127.0.0.1). Then, round after round, random operations on random replicas, a little apart so
that the syncs interleave with them:
- files written and closed; files held open for writing by a program of their own
  (Tests/remote/hold_open.py: this process forks, and a fork's exec would close a copy of a
  descriptor it held, which commits) across other replicas' changes, closed later;
- renames and moves of files and folders, rm and rmdir (which trash: the mounts have a trash),
  moves into the trash, deletes for good inside it, chmod;
- faults between them: PostgreSQL stopped and started, a replica killed with -9 and mounted
  again, the proxies cutting every connection, slowing them, stalling them or refusing new
  ones for a while; `docfs remote gc --grace 0` (the owner's gc with the shortest grace, run
  from a replica's store through the proxies, in the background while the replicas upload);
  and a pack damaged in the bucket (overwritten with as many zero bytes, straight on the S3
  server, what its blocks held noted first).
At the end of a round the faults stop, every writer closes, gc's run ends, and once the
replicas have nothing to send and nothing to apply (after a round that damaged a pack, the owner
runs `docfs remote check` first, as an operator would: it marks the damaged blocks, and the
replicas holding their bytes send them again, which the test waits for):
- the three trees are equal (names, kinds, modes, bytes) and nothing is pending or set aside;
- every token a replica wrote whose close() returned 0, and that this replica did not itself
  overwrite, delete or trash afterwards (a file it overwrites, replaces by a move or deletes
  for good is read first: its own token found there is its own doing, also when a conflict
  had moved it into a conflicted copy under another name), is in the tree (under its name, moved, or as a
  conflicted copy) or in a version the server keeps (another replica changed it after it
  arrived): no close() that returned 0 is lost. The one exception is the damage's own: the
  bytes of a version no longer current (another replica changed the file since) that only the
  damaged pack held: no replica has them to send again. Such a token is excused only when the
  test noted it in a pack it damaged, the owner's `docfs remote check` reported its block
  damaged, the block is still marked, and no current version names it; the round counts them.

    Tests/remote/servers.sh run -- env DOCFS_BIN=.build/debug/docfs python3 Tests/replicas/online_replicas.py

REPLICA_MODEL_SEEDS (default 1 here), ONLINE_MODEL_ROUNDS (4) and ONLINE_MODEL_OPS (operations
per round, 60) size the run; REPLICA_MODEL_SEED=N runs that seed alone. Operations and faults
come from the seed; which replica reaches the server first is up to timing. A failure prints the
seed, the round's operations and faults, and the daemons' logs. Mounts are unmounted and the
database and bucket dropped however a seed ends; processes are ended only by the PIDs this test
started. Closes with "N passed, N failed".
"""
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_proxy import FaultProxy  # noqa: E402
from two_replicas import wait_for_quiet as shared_wait_for_quiet  # noqa: E402
from two_replicas import (ADMIN_URL, AWS, DOCFS, ENV, PSQL, S3_ENDPOINT, SERVERS,  # noqa: E402
                          database_url, log_tail, run, run_seeds, s3check, status, tree, unmount)

HOLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote", "hold_open.py")
SEEDS = int(ENV.get("REPLICA_MODEL_SEEDS", "1"))
ROUNDS = int(ENV.get("ONLINE_MODEL_ROUNDS", "4"))
OPS = int(ENV.get("ONLINE_MODEL_OPS", "60"))
NAMES = ("A", "B", "C")


def port_of(url):
    return int(url.rsplit(":", 1)[1].split("/")[0])


class Server:
    """The seed's server: its database and bucket, and what the packs damaged so far held
    ({block hash: its bytes as text}) and which of those blocks `docfs remote check` reported."""

    def __init__(self, database, bucket):
        self.database = database
        self.bucket = bucket
        self.damaged = {}
        self.zeroed = set()  # the packs zeroed so far: never chosen again (a second read would note zeros)
        self.reported = set()
        self.written = {}  # every round's tokens -> where they were written and closed
        self.logs = []  # the operations of the rounds before (a failure's trace of an older token)

    def psql(self, sql):
        return run([PSQL, "-X", "-q", "-A", "-t", "-F", "|", "-d", database_url(self.database), "-c", sql]).stdout.splitlines()


def read_blocks(bucket, request):
    """{key: text} of `request` ({key: [[pack, offset, length], ...]}) read from the bucket with
    boto3 (the S3 server itself, not a proxy); None when a pack is gone."""
    if not request:
        return {}
    keys = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(request, keys)
    keys.close()
    try:
        got = s3check("read", bucket, keys.name, check=False)
        return json.loads(got.stdout) if got.returncode == 0 else None
    finally:
        os.unlink(keys.name)


class Holder:
    """A program holding a file open for writing (hold_open.py), with the token it wrote."""

    def __init__(self, work, path, token):
        self.path = path
        self.token = token
        self.go = os.path.join(work, "go-%x" % random.getrandbits(40))
        self.out = self.go + ".out"
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen([sys.executable, HOLD, path, "trunc", token, self.go], stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None and "ready" not in self.output():
            time.sleep(0.02)  # the poll interval of its output file, within the deadline
        self.ready = "ready" in self.output()
        # Known by its inode: another replica's move takes the file elsewhere while it is held.
        try:
            self.ino = os.stat(path).st_ino if self.ready else None
        except OSError:
            self.ino = None

    def output(self):
        try:
            with open(self.out) as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        """Lets it close; True when its close() returned 0."""
        open(self.go, "w").close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return "closed 0" in self.output()


class Replica:
    def __init__(self, name, store, mnt):
        self.name = name
        self.store = store
        self.mnt = mnt
        self.tokens = {}  # path -> token this replica wrote there and has not itself superseded
        self.inodes = {}  # path -> the inode of the file a token was written into
        self.holders = []

    def pid(self):
        try:
            with open(os.path.join(self.store, "lock")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def mount(self):
        # Idle replicas ask for damaged blocks every 2 s, not 15: heal() waits for that ask.
        run([DOCFS, "mount", self.store, self.mnt, "--trash"], env={**AWS, "DOCFS_HEAL_INTERVAL": "2"})

    def paths(self):
        files, dirs = [], [""]
        for folder, ds, fs in os.walk(self.mnt):
            rel = os.path.relpath(folder, self.mnt)
            rel = "" if rel == "." else rel
            if rel.split(os.sep)[0] == ".Trash":
                continue
            dirs += [os.path.join(rel, d) for d in ds if not (rel == "" and d == ".Trash")]
            files += [os.path.join(rel, f) for f in fs]
        return sorted(files), sorted(dirs)

    def moved(self, src, dst, folder):
        """This replica moved src to dst: its tokens and held files there move along (a file it
        replaced at dst is its own overwrite)."""
        def where(p):
            if p == src:
                return dst
            if folder and p.startswith(src + "/"):
                return dst + p[len(src):]
            return p
        self.tokens = {where(p): t for p, t in self.tokens.items() if not (p == dst and p != src)}
        self.inodes = {where(p): i for p, i in self.inodes.items() if not (p == dst and p != src)}
        for h in self.holders:
            h.path = os.path.join(self.mnt, where(os.path.relpath(h.path, self.mnt)))

    def wrote(self, path, token):
        self.tokens[path] = token
        try:
            self.inodes[path] = os.lstat(os.path.join(self.mnt, path)).st_ino
        except OSError:
            self.inodes.pop(path, None)

    def inode(self, path):
        try:
            return os.lstat(os.path.join(self.mnt, path)).st_ino
        except OSError:
            return None

    def identifier(self, path):
        """The item's identifier (the server's id once it is known there), which a failure's
        trace follows across renames: one getxattr, no process."""
        try:
            return os.getxattr(os.path.join(self.mnt, path), "user.docfs.identifier").decode()
        except OSError:
            return None

    def contents(self, full):
        """What a file holds now (None for no file), read before this replica overwrites,
        replaces or deletes it."""
        try:
            with open(full, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return None

    def overwrote(self, text):
        """This replica overwrote, replaced or deleted for good a file that held `text`: a token
        of its own there is superseded by this replica itself, wherever the model thought it was
        (a conflicted copy holds the token under another name and inode)."""
        if text:
            self.tokens = {p: t for p, t in self.tokens.items() if t != text}

    def truncated(self, path, ino):
        """This replica truncated the file at `path` (its inode `ino` before): a token of its own
        in that file is superseded by this replica itself, as on any filesystem, also when
        another replica moved the file (or a folder above it) since it was written elsewhere."""
        if ino is not None:
            self.tokens = {p: t for p, t in self.tokens.items() if p == path or self.inodes.get(p) != ino}

    def held(self, files):
        """The paths of the files this replica holds open, where they are now among `files` (from
        `paths()`): another replica's move of a held file (or of a folder above it) takes it
        elsewhere, and this replica's own overwrite of it there would supersede the held bytes
        (then nothing was promised)."""
        where = {}
        for f in files:
            try:
                where[os.lstat(os.path.join(self.mnt, f)).st_ino] = os.path.join(self.mnt, f)
            except OSError:
                pass
        for h in self.holders:
            if h.ino in where:
                h.path = where[h.ino]
        return {os.path.relpath(h.path, self.mnt) for h in self.holders}


class Round:
    def __init__(self, rng, replicas, proxies, label, work, server):
        self.rng = rng
        self.server = server  # the seed's Server: its database, bucket, and the packs damaged so far
        self.replicas = replicas
        self.proxies = proxies
        self.label = label
        self.work = work
        self.log = []
        self.faults = {"pg-restart": 0, "kill-9": 0, "cut": 0, "delay": 0, "stall": 0, "refuse": 0, "gc": 0, "damage": 0}
        self.gc = None  # the gc running now: (its process, its output file)
        self.gc_failed = []  # the last line of each gc run that did not exit 0 (a fault cut it, most often)
        self.gc_removed = {}  # what the gc runs that ended removed, summed (manifests, blocks, packs)
        self.damaged = False  # a pack was damaged in this round
        self.pg_down_until = None
        self.proxy_until = None
        self.promised = 0
        self.written = server.written  # token -> where it was written and closed (a failure's trace)

    def token(self, r):
        return "%s/%s/%d/%d\n" % (self.label, r.name, len(self.log), self.rng.randrange(1 << 30))

    def step(self):
        self.maybe_fault()
        rng = self.rng
        r = rng.choice(self.replicas)
        files, dirs = r.paths()
        # A file this replica holds open is changed by the others only (its own overwrite or
        # unlink would take the held bytes with it, as on any filesystem).
        held = r.held(files)
        files = [f for f in files if f not in held]
        op = rng.choice(["new", "new", "overwrite", "overwrite", "hold", "hold", "release", "mkdir", "mkdir",
                         "mv-file", "mv-dir", "rm", "rmdir", "chmod", "trash", "purge"])
        full = lambda p: os.path.join(r.mnt, p)
        try:
            if op == "new" or (op == "overwrite" and not files):
                path = os.path.join(rng.choice(dirs), "f%d-%s.txt" % (rng.randrange(5), r.name))
                if path in held:
                    return
                self.write(r, path)
            elif op == "overwrite":
                self.write(r, rng.choice(files))
            elif op == "hold" and len(r.holders) < 3:
                path = rng.choice(files) if files and rng.random() < 0.7 else os.path.join(rng.choice(dirs), "h%d.txt" % rng.randrange(3))
                if os.path.isdir(full(path)) or path in held:
                    return
                if not os.path.exists(full(path)):
                    with open(full(path), "w"):
                        pass  # made first: the holder opens an existing file in place
                token = self.token(r)
                ino = r.inode(path)
                before = r.contents(full(path))
                h = Holder(self.work, full(path), token)
                self.log.append("%s: hold %s%s" % (r.name, path, "" if h.ready else " -> did not open"))
                if h.ready:
                    r.truncated(path, ino)
                    r.overwrote(before)
                    # Its own token in this file is superseded now, not at the release: the
                    # release records the held token where the file is then (another replica may
                    # move it meanwhile), and a failed close promises nothing.
                    if ino is not None and r.inodes.get(path) == ino:
                        r.tokens.pop(path, None)
                        r.inodes.pop(path, None)
                    r.holders.append(h)
                else:
                    h.close()
            elif op == "release" and r.holders:
                self.release(r, rng.choice(r.holders))
            elif op == "mkdir":
                path = os.path.join(rng.choice(dirs), "d%d" % rng.randrange(4))
                self.log.append("%s: mkdir %s" % (r.name, path))
                os.mkdir(full(path))
            elif op == "mv-file" and files:
                src = rng.choice(files)
                dst = os.path.join(rng.choice(dirs), "m%d.txt" % rng.randrange(4))
                if dst in held:
                    return
                self.log.append("%s: mv %s %s" % (r.name, src, dst))
                replaced = r.contents(full(dst))
                os.rename(full(src), full(dst))
                r.overwrote(replaced)
                r.moved(src, dst, folder=False)
            elif op == "mv-dir" and len(dirs) > 1:
                src = rng.choice(dirs[1:])
                dst = os.path.join(rng.choice(dirs), "r%d" % rng.randrange(3))
                self.log.append("%s: mv %s %s" % (r.name, src, dst))
                os.rename(full(src), full(dst))
                r.moved(src, dst, folder=True)
            elif op == "rm" and files:
                path = rng.choice(files)
                self.log.append("%s: rm %s" % (r.name, path))
                os.unlink(full(path))
                r.tokens.pop(path, None)
            elif op == "rmdir" and len(dirs) > 1:
                path = rng.choice(dirs[1:])
                self.log.append("%s: rmdir %s" % (r.name, path))
                os.rmdir(full(path))
            elif op == "chmod" and files:
                path = rng.choice(files)
                mode = rng.choice([0o600, 0o640, 0o644, 0o755])
                self.log.append("%s: chmod %o %s" % (r.name, mode, path))
                os.chmod(full(path), mode)
            elif op == "trash" and files:
                # The mounts have a trash (--trash): `rm` trashes too; this names the place.
                path = rng.choice(files)
                self.log.append("%s: mv %s .Trash/" % (r.name, path))
                os.rename(full(path), os.path.join(r.mnt, ".Trash", "t%d-%s" % (rng.randrange(1 << 20), os.path.basename(path))))
                r.tokens.pop(path, None)
            elif op == "purge":
                trashed = sorted(os.listdir(os.path.join(r.mnt, ".Trash")))
                files = [t for t in trashed if os.path.isfile(os.path.join(r.mnt, ".Trash", t))]
                if files:
                    name = rng.choice(files)
                    self.log.append("%s: rm .Trash/%s" % (r.name, name))
                    gone = r.contents(os.path.join(r.mnt, ".Trash", name))
                    os.unlink(os.path.join(r.mnt, ".Trash", name))
                    r.overwrote(gone)
        except OSError as e:
            # Refused here as on any filesystem (a name taken, a folder not empty, a move below
            # itself): nothing changed, nothing to keep.
            self.log.append("    -> %s" % os.strerror(e.errno))

    def write(self, r, path):
        token = self.token(r)
        self.log.append("%s: write %s" % (r.name, path))
        full = os.path.join(r.mnt, path)
        if os.path.isdir(full):
            raise IsADirectoryError(21, "is a directory")
        ino = r.inode(path)
        before = r.contents(full)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        r.truncated(path, ino)
        r.overwrote(before)
        try:
            os.write(fd, token.encode())
        finally:
            os.close(fd)  # raises when close() does not return 0: then nothing was promised
        r.wrote(path, token)
        self.written[token] = "%s wrote %s (inode %s, item %s) at step %d" % (r.name, path, r.inodes.get(path), r.identifier(path), len(self.log) - 1)
        self.promised += 1

    def release(self, r, h):
        r.holders.remove(h)
        ok = h.close()
        path = os.path.relpath(h.path, r.mnt)
        self.log.append("%s: close held %s%s" % (r.name, path, "" if ok else " -> close() failed"))
        if ok:
            r.wrote(path, h.token)
            self.written[h.token] = "%s closed held %s (inode %s, item %s) at step %d" % (r.name, path, h.ino, r.identifier(path), len(self.log) - 1)
            self.promised += 1

    def maybe_fault(self):
        rng = self.rng
        now = time.monotonic()
        if self.pg_down_until and now >= self.pg_down_until:
            run(SERVERS[:1] + ["pg-start"] + SERVERS[1:])
            self.log.append("   [PostgreSQL started]")
            self.pg_down_until = None
        if self.proxy_until and now >= self.proxy_until:
            for p in self.proxies:
                p.set_mode("pass")
            self.log.append("   [proxies pass]")
            self.proxy_until = None
        roll = rng.random()
        if roll < 0.03 and not self.pg_down_until:
            run(SERVERS[:1] + ["pg-stop"] + SERVERS[1:])
            self.pg_down_until = now + rng.uniform(0.5, 3)
            self.faults["pg-restart"] += 1
            self.log.append("   [PostgreSQL stopped]")
        elif roll < 0.05:
            self.kill9(rng.choice(self.replicas))
        elif roll < 0.10 and not self.proxy_until:
            kind = rng.choice(["cut", "cut", "delay", "stall", "refuse"])
            self.faults[kind] += 1
            if kind == "cut":
                for p in self.proxies:
                    p.cut()
                self.log.append("   [connections cut]")
            else:
                for p in self.proxies:
                    p.set_mode(kind, delay=rng.uniform(0.05, 0.5))
                self.proxy_until = now + rng.uniform(0.5, 3)
                self.log.append("   [proxies %s]" % kind)
        elif roll < 0.13:
            rng.choice(self.replicas)  # drawn as before, so that a seed's schedule stays the same
            # From the owner's store: B and C log in as replica roles, which may not run gc.
            self.start_gc(self.replicas[0])
        elif roll < 0.15:
            self.damage_pack(rng.random())
        self.gc_ended(wait=0)

    def start_gc(self, r):
        """`docfs remote gc --grace 0` from `r`'s store (A's: the owner's role), in the background, through the proxies like the replicas: it runs while
        they upload, and its end is looked at before each later step. One at a time (a second
        would only be refused by the gc lock)."""
        if self.gc is not None:
            return
        self.faults["gc"] += 1
        out = os.path.join(self.work, "gc-%s-%d.out" % (self.label, len(self.log)))
        with open(out, "w") as f, open(out + ".err", "w") as err:
            proc = subprocess.Popen([DOCFS, "remote", "gc", r.store, "--grace", "0", "--json"], env={**ENV, **AWS},
                                    stdout=f, stderr=err)
        self.gc = (proc, out)
        self.log.append("   [gc --grace 0 from %s]" % r.name)

    def gc_ended(self, wait):
        """Notes the end of the gc running, if it ended (within `wait` seconds: at the round's
        end, its deadline; a gc still running then is killed by its PID and fails the round)."""
        if self.gc is None:
            return
        proc, out = self.gc
        try:
            rc = proc.wait(wait) if wait else proc.poll()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.gc = None
            raise AssertionError("docfs remote gc did not end within %d s" % wait)
        if rc is None:
            return
        self.gc = None
        with open(out) as f, open(out + ".err") as err:
            text, errors = f.read(), err.read()
        if rc == 0:
            try:
                report = json.loads(text)
                done = {k: report[k] for k in ("manifests", "blocks", "packsDeleted", "packsRewritten") if report.get(k)}
                for k, v in done.items():
                    self.gc_removed[k] = self.gc_removed.get(k, 0) + v
                self.log.append("   [gc ended: %s]" % (done or "nothing to remove"))
            except ValueError:
                self.log.append("   [gc ended: %s %s]" % (text.strip()[-200:], errors.strip()[-200:]))
        else:
            line = ((text + errors).strip().splitlines() or ["(no output)"])[-1][:300]
            self.gc_failed.append(line)
            self.log.append("   [gc exited %d: %s]" % (rc, line))

    def damage_pack(self, u):
        """One pack the blocks are in, chosen by `u`, overwritten in the bucket with as many zero
        bytes (straight on the S3 server, not through a proxy); what each of its blocks held is
        noted first (the end check's exception). Skipped while PostgreSQL is down, or when gc
        removed or rewrote the pack in between."""
        srv = self.server
        rows = run([PSQL, "-X", "-q", "-A", "-t", "-F", "|", "-d", database_url(srv.database), "-c",
                    "SELECT hash, pack_key, pack_offset, length FROM docfs_blocks WHERE damaged_ns IS NULL ORDER BY pack_key, pack_offset"],
                   check=False)
        if rows.returncode != 0:
            self.log.append("   [no pack damaged: PostgreSQL is down]")
            return
        blocks = [line.split("|") for line in rows.stdout.splitlines() if line]
        # A pack zeroed before is not chosen again: its blocks are not marked until a reader or
        # the check finds them, and reading it again would note zeros as what they held.
        packs = sorted({b[1] for b in blocks} - srv.zeroed)
        if not packs:
            return
        pack = packs[min(int(u * len(packs)), len(packs) - 1)]
        mine = {h: [[p, int(o), int(n)]] for h, p, o, n in blocks if p == pack}
        held = read_blocks(srv.bucket, mine)
        zeroed = s3check("zero", srv.bucket, pack, check=False)
        if held is None or zeroed.returncode != 0:
            self.log.append("   [no pack damaged: %s went meanwhile]" % pack.rsplit("/", 1)[-1])
            return
        srv.zeroed.add(pack)
        for h, text in held.items():
            srv.damaged.setdefault(h, text)  # what the block held when first zeroed
        self.damaged = True
        self.faults["damage"] += 1
        self.log.append("   [pack %s zeroed in the bucket: %d block(s)]" % (pack.rsplit("/", 1)[-1], len(held)))

    def kill9(self, r):
        pid = r.pid()
        if not pid:
            return
        self.faults["kill-9"] += 1
        self.log.append("   [kill -9 %s]" % r.name)
        # The daemon is not this process's child: its end is awaited through a pidfd (readable
        # once it has exited), at most 10 s.
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            pidfd = None
        os.kill(pid, signal.SIGKILL)
        if pidfd is not None:
            select.select([pidfd], [], [], 10)
            os.close(pidfd)
        # Its writers' close() fails (the mount is gone): nothing of theirs was promised.
        for h in r.holders:
            h.close()
        r.holders = []
        subprocess.run(["fusermount3", "-uz", r.mnt], capture_output=True)
        r.mount()

    def settle(self):
        """Faults off, writers closed: the round's end."""
        if self.pg_down_until:
            run(SERVERS[:1] + ["pg-start"] + SERVERS[1:])
            self.pg_down_until = None
        for p in self.proxies:
            p.set_mode("pass")
        self.proxy_until = None
        for r in self.replicas:
            for h in list(r.holders):
                self.release(r, h)
        self.gc_ended(wait=300)


def wait_for_quiet(mounts, database, timeout=300):
    """Nothing to send or apply on any mount, nothing set aside, and every anchor at the server's
    last position."""
    return shared_wait_for_quiet(mounts, timeout, fields=("pending", "incoming", "setAside"), database=database)


def server_contents(database, bucket):
    """The contents of every version the server keeps: an object's bytes, or (schema 8) the
    version's blocks cut from their packs in order."""
    rows = run([PSQL, "-X", "-q", "-A", "-t", "-F", "|", "-d", database_url(database), "-c", """
        SELECT v.key, m.key IS NOT NULL, b.pack_key, b.pack_offset, b.length
        FROM (SELECT DISTINCT content_key AS key FROM docfs_versions WHERE content_key IS NOT NULL) v
        LEFT JOIN docfs_manifests m ON m.key = v.key
        LEFT JOIN docfs_manifest_blocks mb ON mb.key = v.key LEFT JOIN docfs_blocks b ON b.hash = mb.hash
        ORDER BY v.key, mb.ordinal"""]).stdout.splitlines()
    if not rows:
        return set()
    objects, manifests = [], {}
    for row in rows:
        key, is_manifest, pack, offset, length = row.split("|")
        if is_manifest != "t":
            objects.append(key)
            continue
        manifests.setdefault(key, [])
        if pack:
            manifests[key].append([pack, int(offset), int(length)])
    out = set()
    for request in (objects, manifests):
        got = read_blocks(bucket, request)
        if got is None:
            raise AssertionError("the bucket lacks a pack or an object a kept version names: %s" % sorted(request)[:5])
        out |= set(got.values())
    return out


def heal(replicas, server):
    """After a round that damaged a pack: the owner's `docfs remote check` (from A's store)
    reads every pack and marks the damaged blocks (a reader would mark a block it read, but the
    end check's reads must not fail first); the replicas holding the bytes of a current version
    that names one send them again (when idle, every 2 s: DOCFS_HEAL_INTERVAL at the mount), which
    this waits for with a deadline;
    then a second check must find no current version damaged."""
    def check_once():
        r = run([DOCFS, "remote", "check", replicas[0].store, "--json"], env=AWS, timeout=300, check=False)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            report = None
        if r.returncode not in (0, 1) or not isinstance(report, dict):
            raise AssertionError("docfs remote check failed (%d): %s %s" % (r.returncode, r.stdout, r.stderr))
        server.reported |= {d["hash"] for d in report.get("damaged", [])}
        return report
    first = check_once()
    deadline = time.monotonic() + 180
    named = None
    while time.monotonic() < deadline:
        named = server.psql("""
            SELECT DISTINCT i.id || ' ' || b.hash FROM docfs_blocks b JOIN docfs_manifest_blocks mb ON mb.hash = b.hash
            JOIN docfs_items i ON i.content_key = mb.key AND NOT i.deleted WHERE b.damaged_ns IS NOT NULL""")
        if not named:
            break
        time.sleep(0.5)  # the poll interval of the server's marks, within the deadline
    else:
        raise AssertionError("damaged blocks of current versions not sent again in 180 s (item hash): %s\ncheck: %s\n%s"
                             % (named, first, holders(replicas, server, [n.split(" ")[0] for n in named])))
    wait_for_quiet([r.mnt for r in replicas], server.database)
    second = check_once()
    current = [v for v in second.get("versions", []) if v.get("current")]
    if current:
        raise AssertionError("current versions still damaged after the heal: %s" % current)
    return len(first.get("damaged", [])), len(second.get("damaged", []))


def holders(replicas, server, ids):
    """For items whose damaged blocks were not sent again: the server's row and versions, and
    each replica's record of the item (its sqlite row: name, contents version, key, absent) and
    outbox entries: who should have held the bytes, and why it did not send them."""
    out = []
    for i in sorted(set(ids)):
        out.append("item %s on the server (id|parent|name|deleted|trashed|current|key):\n    %s" % (i, "\n    ".join(server.psql(
            "SELECT id, parent_id, name, deleted, trashed_ns IS NOT NULL, content_version, content_key FROM docfs_items WHERE id = %s" % int(i)))))
        out.append("  its versions (version|size|replica|key):\n    %s" % "\n    ".join(server.psql(
            "SELECT content_version, size, replica, content_key FROM docfs_versions WHERE item_id = %s ORDER BY 1" % int(i))))
        for r in replicas:
            db = os.path.join(r.store, "store.sqlite")
            row = run(["sqlite3", "-readonly", db, "SELECT id, parent, name, contentVersion, remoteKey, absent FROM item WHERE id = %d" % int(i)], check=False)
            box = run(["sqlite3", "-readonly", db, "SELECT seq, kind FROM outbox WHERE row = %d" % int(i)], check=False)
            files = [f for f in os.listdir(os.path.join(r.store, "contents")) if f.startswith(str(i))] if os.path.isdir(os.path.join(r.store, "contents")) else []
            out.append("  %s: record %s; outbox %s; content files %s; log: %s" % (
                r.name, (row.stdout or row.stderr).strip(), (box.stdout or box.stderr).strip() or "none", files,
                [l for l in log_tail(os.path.join(r.store, "docfs.log"), 100000).splitlines() if "sent again" in l or "damaged" in l][-3:]))
    return "\n".join(out)


def lost_to_damage(lost, server):
    """The tokens of `lost` the damage itself took: held by a damaged block only (noted when the
    pack was zeroed), reported by `docfs remote check`, still marked, and named by no current
    version (so no replica had the bytes to send again). Raises for any other."""
    by_text = {}
    for h, text in server.damaged.items():
        by_text.setdefault(text, []).append(h)
    excused, unexplained = set(), []
    for token in lost:
        ok, why = False, []
        for h in by_text.get(token, []):
            row = server.psql("""
                SELECT (SELECT damaged_ns IS NOT NULL FROM docfs_blocks WHERE hash = '%s'),
                       count(*), coalesce(bool_or(i.content_version = v.content_version AND NOT i.deleted), false)
                FROM docfs_manifest_blocks mb JOIN docfs_versions v ON v.content_key = mb.key JOIN docfs_items i ON i.id = v.item_id
                WHERE mb.hash = '%s'""" % (h, h))
            marked, versions, current = row[0].split("|")
            ok = ok or (h in server.reported and marked == "t" and int(versions) > 0 and current == "f")
            why.append("block %s: reported %s, marked %s, %s version(s), current %s" % (h[:12], h in server.reported, marked, versions, current))
        (excused.add if ok else unexplained.append)(token)
        if not ok:
            why.append("in no damaged pack" if not why else "")
            unexplained[-1] = "%r (%s)" % (token, "; ".join(w for w in why if w))
    if unexplained:
        raise LostTokens("closed with 0 and lost: %s" % sorted(unexplained), [t for t in lost if t not in excused])
    return excused


class LostTokens(AssertionError):
    def __init__(self, message, tokens):
        super().__init__(message)
        self.tokens = tokens


def trace(tokens, replicas, rnd, server):
    """Where each lost token was written, which files of each store still hold its bytes (its
    content file, a journal, recovered/), the log lines naming its file, and the server's rows of
    items of that name: what a failure needs to be explained."""
    out = []
    for token in tokens:
        what = rnd.written.get(token, "written in an earlier round")
        out.append("token %r: %s" % (token, what))
        name = what.split(" (inode")[0].split(" ")[-1] if " (inode" in what else None
        for r in replicas:
            found = run(["grep", "-rlF", "--binary-files=text", token.strip(), r.store], check=False).stdout.split()
            out.append("  %s's store holds it in: %s" % (r.name, found or "nothing"))
            if name:
                base = os.path.basename(name)
                lines = [l for l in log_tail(os.path.join(r.store, "docfs.log"), 100000).splitlines() if base in l]
                out.append("  %s's log lines naming %s (last 12):\n    %s" % (r.name, base, "\n    ".join(lines[-12:])))
        if name:
            base = os.path.basename(name)
            earlier = ["%s: %s" % (label, op) for label, ops in server.logs for op in ops if base in op or op.startswith("   [")]
            out.append("  the operations of earlier rounds naming %s, and their faults:\n    %s" % (base, "\n    ".join(earlier)))
        item = what.split(", item ")[1].split(")")[0] if ", item " in what else None
        if item and item.isdigit():
            out.append(holders(replicas, server, [item]))
            out.append("  its change log (seq|op|replica):\n    %s" % "\n    ".join(server.psql(
                "SELECT * FROM docfs_changes WHERE item_id = %s ORDER BY 1" % item)))
            for r in replicas:
                lines = [l for l in log_tail(os.path.join(r.store, "docfs.log"), 200000).splitlines()
                         if ("item %s " % item) in l or ("item %s)" % item) in l or ("item %s:" % item) in l or ("item %s," % item) in l]
                out.append("  %s's log lines naming item %s (last 12):\n    %s" % (r.name, item, "\n    ".join(lines[-12:])))
        if name:
            rows = server.psql("""SELECT i.id, i.parent_id, i.name, i.deleted, i.content_version, v.content_version, v.size, v.replica,
                       v.content_key, m.key IS NOT NULL, (SELECT string_agg(b.pack_key || '@' || b.pack_offset || CASE WHEN b.damaged_ns IS NULL THEN '' ELSE ' damaged' END, ',')
                         FROM docfs_manifest_blocks mb LEFT JOIN docfs_blocks b ON b.hash = mb.hash WHERE mb.key = v.content_key)
                FROM docfs_items i LEFT JOIN docfs_versions v ON v.item_id = i.id LEFT JOIN docfs_manifests m ON m.key = v.content_key
                WHERE i.name LIKE '%s%%' ORDER BY 1, 6""" % os.path.splitext(os.path.basename(name))[0].replace("'", "''"))
            out.append("  the server's items of that name (id|parent|name|deleted|current|version|size|replica|key|manifest|blocks):\n    %s" % "\n    ".join(rows))
    return "\n".join(out)


def identities(replicas, paths, database):
    """For paths the replicas disagree on: each replica's item there (identifier, sync state,
    as `docfs info` shows it) and the server's row of that identifier (name, parent, deleted),
    what a divergence needs to be explained."""
    out, ids = [], set()
    for path in sorted(set(paths)):
        for r in replicas:
            got = run([DOCFS, "info", "--json", os.path.join(r.mnt, path)], check=False)
            try:
                info = json.loads(got.stdout)
                ident = str(info.get("identifier"))
                out.append("  %s %s: identifier %s, %s" % (r.name, path, ident, {k: info.get(k) for k in ("sync", "conflict", "type")}))
                if ident.isdigit():
                    ids.add(ident)
            except ValueError:
                out.append("  %s %s: not there (%s)" % (r.name, path, (got.stderr or "").strip()[-120:]))
    if ids:
        rows = run([PSQL, "-X", "-q", "-A", "-t", "-d", database_url(database), "-c",
                    "SELECT id, parent_id, name, kind, deleted, trashed_ns IS NOT NULL FROM docfs_items WHERE id IN (%s) ORDER BY id" % ",".join(sorted(ids))],
                   check=False).stdout
        out.append("  the server's rows (id|parent|name|kind|deleted|trashed):\n    " + "\n    ".join(rows.splitlines()))
        # Each replica's record of them (contents version, key) and outbox: which side kept what.
        try:
            out.append(holders(replicas, Server(database, None), sorted(ids)))
        except Exception as e:  # the trace is a help, never the failure
            out.append("  (their records could not be read: %r)" % e)
        for r in replicas:
            out.append("  %s's log lines naming those identifiers or names (last 8):" % r.name)
            names = {os.path.basename(p) for p in paths}
            lines = [l for l in log_tail(os.path.join(r.store, "docfs.log"), 100000).splitlines()
                     if any(("item %s " % i) in l or ("item %s)" % i) in l for i in ids) or any(n in l for n in names)]
            out.extend("    " + l for l in lines[-8:])
    return "identities:\n" + "\n".join(out)


def check(replicas, server):
    database, bucket = server.database, server.bucket
    # Every version made of blocks has the size of its manifest (a retry that named an earlier
    # attempt's manifest once gave a version bytes of another size: EIO on the other replicas).
    wrong = run([PSQL, "-X", "-q", "-A", "-t", "-d", database_url(database), "-c", """
        SELECT v.item_id, v.content_version, v.size, m.size FROM docfs_versions v
        JOIN docfs_manifests m ON m.key = v.content_key WHERE v.size <> m.size LIMIT 5"""]).stdout.split()
    if wrong:
        raise AssertionError("versions whose size is not their manifest's (item|version|size|manifest size): %s" % wrong)
    full = [tree(r.mnt) for r in replicas]
    # In the trash each replica names what it holds its own way (an item renamed on one replica
    # while another trashed it keeps the name it had there): the trash is compared by what it
    # holds, the rest of the tree by names too.
    trees = [{k: v for k, v in t.items() if k.split(os.sep)[0] != ".Trash"} for t in full]
    trash = [sorted(v[2] for k, v in t.items() if k.split(os.sep)[0] == ".Trash" and v[0] == "file") for t in full]
    for r, t, bin_ in zip(replicas[1:], trees[1:], trash[1:]):
        if t != trees[0]:
            only = {k: v for k, v in t.items() if trees[0].get(k) != v}
            first = {k: v for k, v in trees[0].items() if t.get(k) != v}
            names = sorted({os.path.basename(k) for k in list(first) + list(only)})
            versions = run([PSQL, "-X", "-q", "-A", "-t", "-d", database_url(database), "-c", """
                SELECT i.id, i.name, i.content_version, v.content_version, v.content_key, v.size, v.replica
                FROM docfs_items i JOIN docfs_versions v ON v.item_id = i.id
                WHERE i.name = ANY(%s) ORDER BY 1, 4""" % ("ARRAY[%s]::text[]" % ",".join("'%s'" % n.replace("'", "''") for n in names))],
                check=False).stdout
            raise AssertionError("the replicas differ:\n  A: %s\n  %s: %s\nthe server's versions of those names:\n%s\n%s"
                                 % (first, r.name, only, versions, identities(replicas, list(first) + list(only), database)))
        if bin_ != trash[0]:
            raise AssertionError("the replicas' trash holds other files:\n  A: %s\n  %s: %s" % (trash[0], r.name, bin_))
    here = {v[2].decode(errors="replace") for v in full[0].values() if v[0] == "file"}
    kept = here | server_contents(database, bucket)
    lost = sorted({t for r in replicas for t in r.tokens.values()} - kept)
    try:
        excused = lost_to_damage(lost, server)
    except LostTokens as e:
        raise LostTokens("%s\ntree: %s" % (e, sorted(trees[0])), e.tokens)
    return len(full[0]), len(excused)


def one_seed(seed):
    rng = random.Random(seed)
    unique = "%x" % random.getrandbits(48)
    database, bucket = "docfs_online_" + unique, "docfs-online-" + unique
    # The PID in the name: `make clean-mounts` leaves the mounts of a test process still running.
    work = tempfile.mkdtemp(prefix="docfs-test-%d-online-" % os.getpid())
    replicas, proxies = [], []
    server = Server(database, bucket)
    rnd = None
    run([PSQL, "-q", "-d", ADMIN_URL, "-c", "CREATE DATABASE " + database])
    totals = {"ops": 0, "promised": 0, "excused": 0, "gc-failed": 0}
    faults = {}
    try:
        s3check("create-bucket", bucket)
        pg_proxy = FaultProxy(port_of(ADMIN_URL), "postgres")
        s3_proxy = FaultProxy(port_of(S3_ENDPOINT), "s3")
        proxies = [pg_proxy, s3_proxy]
        url = database_url(database).replace(":%d/" % port_of(ADMIN_URL), ":%d/" % pg_proxy.port)
        remote = ["--remote", url, "--objects", "s3://%s/tree" % bucket,
                  "--s3-endpoint", "http://127.0.0.1:%d" % s3_proxy.port, "--region", "us-east-1"]
        for name in NAMES:
            store, mnt = os.path.join(work, "store" + name), os.path.join(work, "mnt" + name)
            os.mkdir(mnt)
            own = remote
            if name != NAMES[0]:
                # The first replica is the owner's (it sets the server up); the others log in as a
                # role of their own, as `docfs remote add-replica` makes one (roles are the
                # cluster's: named after this run's database).
                role = "%s_%s" % (name.lower(), unique)
                run([DOCFS, "remote", "add-replica", role] + remote, env=AWS)
                own = list(remote)
                own[1] = url.replace("//docfs@", "//%s@" % role)
            run([DOCFS, "init", store] + own, env=AWS)
            r = Replica(name, store, mnt)
            r.mount()
            replicas.append(r)
        for n in range(ROUNDS):
            rnd = Round(rng, replicas, proxies, "s%d-r%d" % (seed, n), work, server)
            started = time.monotonic()
            healed = ""
            try:
                for _ in range(OPS):
                    rnd.step()
                    time.sleep(rng.uniform(0, 0.05))  # the point: operations spaced so the syncs interleave with them
                rnd.settle()
                wait_for_quiet([r.mnt for r in replicas], server.database)
                if rnd.damaged:
                    found, left = heal(replicas, server)
                    healed = "; check found %d damaged block(s), %d left after the heal (older versions only)" % (found, left)
                entries, excused = check(replicas, server)
            except Exception as e:  # an assertion, or an OSError outside an operation (a walk, a read)
                if isinstance(e, LostTokens):
                    try:
                        print("online replicas: trace of the lost:\n" + trace(e.tokens, replicas, rnd, server), flush=True)
                    except Exception as t:  # the trace is a help, never the failure
                        print("online replicas: trace failed: %r" % t, flush=True)
                logs = "".join("\nlog %s (end):\n%s" % (r.name, log_tail(os.path.join(r.store, "docfs.log"), 40)) for r in replicas)
                raise AssertionError("seed %d, round %d:\n%s\n%s\nfaults: %s\noperations:\n  %s%s"
                                     % (seed, n, repr(e), traceback.format_exc(), rnd.faults, "\n  ".join(rnd.log), logs))
            server.logs.append((rnd.label, rnd.log))
            totals["ops"] += OPS
            totals["promised"] += rnd.promised
            totals["gc-failed"] += len(rnd.gc_failed)
            totals["excused"] = excused
            for k, v in rnd.faults.items():
                faults[k] = faults.get(k, 0) + v
            print("online replicas: seed %d round %d: %d operations, %d closes kept, faults %s%s%s%s; %d entries, equal on 3 replicas, "
                  "nothing lost%s (%.0f s)"
                  % (seed, n, OPS, rnd.promised, {k: v for k, v in rnd.faults.items() if v},
                     "; gc removed %s" % rnd.gc_removed if rnd.gc_removed else "",
                     "; %d gc run(s) failed: %s" % (len(rnd.gc_failed), rnd.gc_failed) if rnd.gc_failed else "", healed, entries,
                     " but %d older version(s) only the damaged packs held" % excused if excused else "", time.monotonic() - started),
                  flush=True)
        print("online replicas: seed %d: %d operations, %d closes that returned 0, all kept%s; faults %s%s"
              % (seed, totals["ops"], totals["promised"],
                 " but %d older version(s) only damaged packs held" % totals["excused"] if totals["excused"] else "", faults,
                 "; %d gc run(s) failed" % totals["gc-failed"] if totals["gc-failed"] else ""), flush=True)
    finally:
        if rnd is not None and rnd.gc is not None:
            rnd.gc[0].kill()  # by its PID: a gc this test started
            rnd.gc[0].wait()
        for r in replicas:
            for h in r.holders:
                h.close()
            unmount(r.store, r.mnt)
        for p in proxies:
            p.close()
        run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % database], check=False)
        s3check("delete-bucket", bucket)
        subprocess.run(["rm", "-rf", work])


def main():
    return run_seeds(one_seed, SEEDS, "online replicas")


if __name__ == "__main__":
    sys.exit(main())
