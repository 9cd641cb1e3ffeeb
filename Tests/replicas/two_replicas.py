#!/usr/bin/env python3
"""Model-based random test of two replicas of one tree (`make test` runs it after `swift test`,
against the loopback servers of Tests/remote/servers.sh).

Each seed makes a fresh server (a database and a bucket), two stores of it (`docfs init
--remote`) and mounts both. Then, phase after phase:

1. PostgreSQL is stopped, so nothing either replica does reaches the other during the phase;
2. random operations run on both mounts (new files, overwrites, mkdir, renames and moves of files
   and folders, deletes, rmdir, chmod, hard links), each file written with contents of its own (a
   token);
3. PostgreSQL is started again, and the test waits until both replicas have nothing to send and
   nothing to apply;
4. the two trees must be equal (names, kinds, modes, bytes, and which names are one file), and
   every token a replica wrote in the phase and did not itself overwrite or delete must be in
   some file of the tree: whatever the other replica did concurrently — edit, delete, rename,
   rmdir of its folder — the conflict rules keep it (nothing lost). A file may have several
   names (`ln`): a write through one is a write of all (it overwrites the tokens held under the
   others), and removing one name keeps the token under another.

    Tests/remote/servers.sh run -- env DOCFS_BIN=.build/debug/docfs python3 Tests/replicas/two_replicas.py

REPLICA_MODEL_SEEDS (default 3), REPLICA_MODEL_PHASES (5) and REPLICA_MODEL_OPS (operations per
phase, 24) size the run; REPLICA_MODEL_SEED=N runs that seed alone; REPLICA_MODEL_KEEP_LOGS=DIR
keeps the daemons' logs and the server's change log of a failing seed there. Which replica
reaches the server first is up to timing, so a seed does not replay exactly. A failure prints the seed and
the operations of the failing phase. Mounts are unmounted and the servers' database and bucket
dropped however a seed ends; processes are ended only by the PIDs this test started.
Closes with "N passed, N failed".
"""
import json
import os
import random
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
S3CHECK = os.path.join(HERE, "..", "remote", "s3check.py")
ENV = os.environ
DOCFS = ENV["DOCFS_BIN"]
PSQL = os.path.join(ENV["DOCFS_TEST_PG_BIN"], "psql")
ADMIN_URL = ENV["DOCFS_TEST_PG_URL"]
S3_ENDPOINT = ENV["DOCFS_TEST_S3_ENDPOINT"]
S3_PYTHON = ENV["DOCFS_TEST_S3_PYTHON"]
SERVERS = [ENV["DOCFS_TEST_SERVERS_SH"], ENV["DOCFS_TEST_SERVERS_DIR"]]
AWS = {"AWS_ACCESS_KEY_ID": ENV["DOCFS_TEST_S3_ACCESS_KEY"], "AWS_SECRET_ACCESS_KEY": ENV["DOCFS_TEST_S3_SECRET_KEY"],
       "AWS_REGION": "us-east-1"}
SEEDS = int(ENV.get("REPLICA_MODEL_SEEDS", "3"))
PHASES = int(ENV.get("REPLICA_MODEL_PHASES", "5"))
OPS = int(ENV.get("REPLICA_MODEL_OPS", "24"))
ONE_SEED = ENV.get("REPLICA_MODEL_SEED")


def run(args, env=None, timeout=120, check=True):
    r = subprocess.run(args, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("%s failed (%d): %s %s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def database_url(name):
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


def s3check(*args, check=True):
    """s3check.py ARGS, through the process Tests/remote/servers.sh keeps for it when there is one
    (DOCFS_TEST_S3CHECK_SOCKET: no boto3 import per call), else in a process of its own."""
    env = {**AWS, "DOCFS_TEST_S3_ENDPOINT": S3_ENDPOINT}
    path = ENV.get("DOCFS_TEST_S3CHECK_SOCKET")
    if not path:
        return run([S3_PYTHON, S3CHECK] + list(args), env=env, check=check)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(120)
        s.connect(path)
        s.sendall((json.dumps({"argv": list(args), "env": env}) + "\n").encode())
        data = b""
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    answer = json.loads(data)
    r = subprocess.CompletedProcess(["s3check.py"] + list(args), answer["status"], answer["stdout"], answer["stderr"])
    if check and r.returncode != 0:
        raise AssertionError("s3check.py %s failed (%d): %s %s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def status(mnt):
    r = run([DOCFS, "status", mnt, "--json"], timeout=30, check=False)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)
    except ValueError:
        return None


def wait_for_quiet(mounts, timeout=240, fields=("pending", "incoming"), database=None):
    """Waits, with a deadline, until every mount's status shows 0 for `fields` three times in a
    row half a second apart: the spacing is the point (a sync between two looks would otherwise
    pass for quiet). With `database`, each mount's anchor must also have reached the server's
    last change-log position: a replica whose connection died with PostgreSQL's restart does not
    know yet what it has to apply (its status says 0 to apply until its next catch-up answers)."""
    deadline = time.monotonic() + timeout
    quiet = 0
    last = None
    while time.monotonic() < deadline:
        head = server_head(database) if database else None
        last = [status(m) for m in mounts]
        if all(s is not None and all(s.get(f, 0) == 0 for f in fields) and (head is None or s.get("anchor", 0) >= head)
               for s in last):
            quiet += 1
            if quiet >= 3:
                return
        else:
            quiet = 0
        time.sleep(0.5)  # the spacing between looks (see above), within the deadline
    raise AssertionError("the replicas did not settle in %d s (server's last position %s): %s" % (timeout, head, last))


def server_head(database):
    """The server's last change-log position (0: none yet)."""
    out = run([PSQL, "-X", "-q", "-A", "-t", "-d", database_url(database), "-c",
               "SELECT coalesce(max(position), 0) FROM docfs_changes"]).stdout.strip()
    return int(out or 0)


def linked(root):
    """The names of each file with several, as a set of frozensets of relative paths."""
    by_inode = {}
    for folder, dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(folder, name)
            st = os.lstat(full)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                by_inode.setdefault(st.st_ino, set()).add(os.path.relpath(full, root))
    return {frozenset(names) for names in by_inode.values() if len(names) > 1}


def tree(root):
    """{relative path: (kind, mode, bytes)} of a mounted tree, read with plain os calls."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), None)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    out[rel] = ("file", stat.S_IMODE(st.st_mode), f.read())
            else:
                out[rel] = ("other", stat.S_IMODE(st.st_mode), None)
    return out


class Replica:
    """One mount and what it wrote: tokens[path] is the token this replica last wrote there and
    has not itself overwritten, deleted or moved away from (moves carry it along)."""

    def __init__(self, name, mnt):
        self.name = name
        self.mnt = mnt
        self.tokens = {}

    def paths(self):
        files, dirs = [], [""]
        for folder, ds, fs in os.walk(self.mnt):
            rel = os.path.relpath(folder, self.mnt)
            rel = "" if rel == "." else rel
            dirs += [os.path.join(rel, d) for d in ds]
            files += [os.path.join(rel, f) for f in fs]
        return sorted(files), sorted(dirs)

    def names_of(self, path):
        """The other names of the file at `path` (hard links), found by inode; none when the
        path names no file."""
        try:
            st = os.lstat(os.path.join(self.mnt, path))
        except OSError:
            return []
        if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
            return []
        files, _ = self.paths()
        return [p for p in files if p != path and os.lstat(os.path.join(self.mnt, p)).st_ino == st.st_ino]


class Phase:
    def __init__(self, rng, replicas, label):
        self.rng = rng
        self.replicas = replicas
        self.label = label
        self.log = []
        self.counter = 0

    def step(self):
        rng = self.rng
        r = rng.choice(self.replicas)
        files, dirs = r.paths()
        op = rng.choice(["new", "new", "new", "overwrite", "overwrite", "mkdir", "mkdir", "mv-file", "mv-dir", "rm", "rmdir",
                         "chmod", "ln", "ln"])
        full = lambda p: os.path.join(r.mnt, p)
        try:
            if op == "new" or (op == "overwrite" and not files):
                self.counter += 1
                path = os.path.join(rng.choice(dirs), "f%d-%s.txt" % (rng.randrange(6), r.name))
                self.write(r, path, op)
            elif op == "overwrite":
                self.write(r, rng.choice(files), op)
            elif op == "mkdir":
                path = os.path.join(rng.choice(dirs), "d%d" % rng.randrange(4))
                self.log.append("%s: mkdir %s" % (r.name, path))
                os.mkdir(full(path))
            elif op == "mv-file" and files:
                src = rng.choice(files)
                dst = os.path.join(rng.choice(dirs), "m%d.txt" % rng.randrange(4))
                self.log.append("%s: mv %s %s" % (r.name, src, dst))
                os.rename(full(src), full(dst))
                r.tokens.pop(dst, None)
                if src in r.tokens:
                    r.tokens[dst] = r.tokens.pop(src)
            elif op == "mv-dir" and len(dirs) > 1:
                src = rng.choice(dirs[1:])
                dst = os.path.join(rng.choice(dirs), "r%d" % rng.randrange(3))
                self.log.append("%s: mv %s %s" % (r.name, src, dst))
                os.rename(full(src), full(dst))
                moved = {p: t for p, t in r.tokens.items() if p.startswith(src + "/")}
                for p, t in moved.items():
                    del r.tokens[p]
                    r.tokens[dst + p[len(src):]] = t
            elif op == "rm" and files:
                path = rng.choice(files)
                self.log.append("%s: rm %s" % (r.name, path))
                others = r.names_of(path)
                os.unlink(full(path))
                token = r.tokens.pop(path, None)
                # The file stays under its other names, and so does what this replica wrote in it.
                if token is not None and others and not any(r.tokens.get(o) == token for o in others):
                    r.tokens[others[0]] = token
            elif op == "rmdir" and len(dirs) > 1:
                path = rng.choice(dirs[1:])
                self.log.append("%s: rmdir %s" % (r.name, path))
                os.rmdir(full(path))
            elif op == "ln" and files:
                src = rng.choice(files)
                dst = os.path.join(rng.choice(dirs), "l%d.txt" % rng.randrange(4))
                self.log.append("%s: ln %s %s" % (r.name, src, dst))
                os.link(full(src), full(dst))  # a new name holds what the file holds: no token of its own
            elif op == "chmod" and files:
                path = rng.choice(files)
                mode = rng.choice([0o600, 0o640, 0o644, 0o755])
                self.log.append("%s: chmod %o %s" % (r.name, mode, path))
                os.chmod(full(path), mode)
        except OSError as e:
            # Refused here as on any filesystem (a name taken, a folder not empty, a move below
            # itself): nothing changed, nothing to keep.
            self.log.append("    -> %s" % os.strerror(e.errno))

    def write(self, r, path, op):
        token = "%s/%s/%d/%d\n" % (self.label, r.name, len(self.log), self.rng.randrange(1 << 30))
        self.log.append("%s: %s %s" % (r.name, "write" if op == "new" else "overwrite", path))
        full = os.path.join(r.mnt, path)
        if os.path.isdir(full):
            raise IsADirectoryError(21, "is a directory")
        others = r.names_of(path)
        with open(full, "w") as f:
            f.write(token)
        # A write through one name is a write of the file: what its other names held is overwritten.
        for other in others:
            r.tokens.pop(other, None)
        r.tokens[path] = token


def check_phase(replicas, phase_tokens):
    a, b = (tree(r.mnt) for r in replicas)
    if a != b:
        only_a = {k: v for k, v in a.items() if b.get(k) != v}
        only_b = {k: v for k, v in b.items() if a.get(k) != v}
        raise AssertionError("the replicas differ:\n  A: %s\n  B: %s" % (only_a, only_b))
    links_a, links_b = (linked(r.mnt) for r in replicas)
    if links_a != links_b:
        raise AssertionError("the replicas' hard links differ:\n  A: %s\n  B: %s"
                             % (sorted(map(sorted, links_a - links_b)), sorted(map(sorted, links_b - links_a))))
    contents = {v[2].decode(errors="replace") for v in a.values() if v[0] == "file"}
    lost = sorted(t for t in phase_tokens if t not in contents)
    if lost:
        raise AssertionError("written and lost: %s\ntree: %s" % (lost, sorted(a)))
    return len(a)


def unmount(store, mnt):
    """Unmounts (lazily if it must) and makes sure the store's daemon is gone: one that has not
    exited 30 s after its mount went (an engine that never returns) is killed by its PID, from
    the store's lock file, with a line saying so; a run never leaves a daemon behind."""
    pid = None
    try:
        with open(os.path.join(store, "lock")) as f:
            pid = int(f.read().strip())
        pidfd = os.pidfd_open(pid)
    except (OSError, ValueError):
        pidfd = None
    run([DOCFS, "unmount", "--no-wait", mnt], timeout=60, check=False)
    subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)
    if pidfd is None:
        return
    if not select.select([pidfd], [], [], 30)[0]:
        print("%s: the daemon (pid %d) had not exited 30 s after its unmount; killed" % (store, pid), flush=True)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        select.select([pidfd], [], [], 10)
    os.close(pidfd)


def log_tail(path, lines=25):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(none)"


def one_seed(seed):
    rng = random.Random(seed)
    unique = "%x" % random.getrandbits(48)
    database, bucket = "docfs_model_" + unique, "docfs-model-" + unique
    # The PID in the name: `make clean-mounts` leaves the mounts of a test process still running.
    work = tempfile.mkdtemp(prefix="docfs-test-%d-replicas-" % os.getpid())
    mounts = []
    run([PSQL, "-q", "-d", ADMIN_URL, "-c", "CREATE DATABASE " + database])
    try:
        s3check("create-bucket", bucket)
        remote = ["--remote", database_url(database), "--objects", "s3://%s/tree" % bucket, "--s3-endpoint", S3_ENDPOINT,
                  "--region", "us-east-1"]
        replicas = []
        for name in ("A", "B"):
            store, mnt = os.path.join(work, "store" + name), os.path.join(work, "mnt" + name)
            os.mkdir(mnt)
            own = remote
            if name == "B":
                # B logs in as a role of its own (A, the owner's, set the server up).
                role = "b_" + unique
                run([DOCFS, "remote", "add-replica", role] + remote, env=AWS)
                own = list(remote)
                own[1] = database_url(database).replace("//docfs@", "//%s@" % role)
            run([DOCFS, "init", store] + own, env=AWS)
            run([DOCFS, "mount", store, mnt], env=AWS)
            mounts.append(mnt)
            replicas.append(Replica(name, mnt))
        for p in range(PHASES):
            phase = Phase(rng, replicas, "s%d-p%d" % (seed, p))
            for r in replicas:
                r.tokens = {}
            run(SERVERS[:1] + ["pg-stop"] + SERVERS[1:])
            try:
                for _ in range(OPS):
                    phase.step()
            finally:
                run(SERVERS[:1] + ["pg-start"] + SERVERS[1:])
            written = [t for r in replicas for t in r.tokens.values()]
            try:
                wait_for_quiet(mounts, database=database)
                entries = check_phase(replicas, written)
            except AssertionError as e:
                keep = ENV.get("REPLICA_MODEL_KEEP_LOGS")
                if keep:
                    os.makedirs(keep, exist_ok=True)
                    for n in "AB":
                        subprocess.run(["cp", os.path.join(work, "store" + n, "docfs.log"), os.path.join(keep, "seed%d-%s.log" % (seed, n))])
                    with open(os.path.join(keep, "seed%d-server.txt" % seed), "w") as f:
                        f.write(run([PSQL, "-d", database_url(database), "-c", "SELECT * FROM docfs_changes ORDER BY position",
                                     "-c", "SELECT id, parent_id, name, content_version, deleted, content_key FROM docfs_items ORDER BY id"],
                                    check=False).stdout)
                logs = "".join("\nlog %s (end):\n%s" % (n, log_tail(os.path.join(work, "store" + n, "docfs.log"))) for n in "AB")
                raise AssertionError("seed %d, phase %d:\n%s\noperations:\n  %s%s" % (seed, p, e, "\n  ".join(phase.log), logs))
            print("replicas: seed %d phase %d: %d operations, %d entries, equal, %d tokens kept"
                  % (seed, p, OPS, entries, len(written)), flush=True)
    finally:
        for n, mnt in zip("AB", mounts):
            unmount(os.path.join(work, "store" + n), mnt)
        run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % database], check=False)
        s3check("delete-bucket", bucket)
        subprocess.run(["rm", "-rf", work])


def run_seeds(one_seed, seeds, label):
    """Runs every seed (REPLICA_MODEL_SEED: that one alone), reports each failure, and closes
    with "N passed, N failed"; the exit status for the whole."""
    seeds = [int(ONE_SEED)] if ONE_SEED else list(range(1, seeds + 1))
    passed = failed = 0
    for seed in seeds:
        try:
            one_seed(seed)
            passed += 1
        except Exception as e:  # report every seed, then fail
            failed += 1
            where = "" if isinstance(e, AssertionError) else "\n" + traceback.format_exc()
            print("%s: FAILED %s%s" % (label, e, where), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def main():
    return run_seeds(one_seed, SEEDS, "replicas")


if __name__ == "__main__":
    sys.exit(main())
