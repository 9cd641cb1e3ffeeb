#!/usr/bin/env python3
"""Two figures for several replicas of one tree, against the loopback servers of
Tests/remote/servers.sh (a benchmark, never part of `make test`):

1. latency: a small file written on mount A, then the time until mount B reads its contents
   (median and 99th percentile over BENCH_FILES files, default 200, one at a time), and the
   same for two `rclone mount`s of one bucket when rclone is installed (at most 50 files);
2. init: a tree of BENCH_ITEMS items (default 100,000: folders of 100 files of 1,000 bytes each)
   made on the server with SQL, then `docfs init --remote` of it (metadata only: contents are
   downloaded when a file is opened, so the objects the rows name need not exist) and `ls -lR` of
   the mounted replica;
3. far read: on B, a 64 KiB read at the end of a large file not downloaded yet (one ranged
   request for its chunk), beside reading the whole file;
4. drain: a `cp -r` of 2,000 small files and of the fsbench tree until all of it is on the
   server, beside `rclone copy` of the same trees; bytes uploaded for an append and a middle edit.

5. fanout: N = 10, 100, 1,000 replica clients in one process (`docfs-scale replicas`): the time
   until every client has a file made on one of them, the server's CPU and sessions, the clients'
   memory; writers: W = 1, 10, 50 clients writing at once, the operations the server commits per
   second (BENCH_CLIENTS, BENCH_WRITERS: other lists). Not in the default run.

    make bench-replicas          (builds release, starts the servers, runs this)
    make bench-replicas BENCH_REPLICAS=drain    (one part)

Prints one line per figure; the machine is shared, so compare runs, not absolute times.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

ENV = os.environ
DOCFS = ENV["DOCFS_BIN"]
PSQL = os.path.join(ENV["DOCFS_TEST_PG_BIN"], "psql")
ADMIN_URL = ENV["DOCFS_TEST_PG_URL"]
S3_ENDPOINT = ENV["DOCFS_TEST_S3_ENDPOINT"]
S3_PYTHON = ENV["DOCFS_TEST_S3_PYTHON"]
S3CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "remote", "s3check.py")
AWS = {"AWS_ACCESS_KEY_ID": ENV["DOCFS_TEST_S3_ACCESS_KEY"], "AWS_SECRET_ACCESS_KEY": ENV["DOCFS_TEST_S3_SECRET_KEY"],
       "AWS_REGION": "us-east-1"}
FILES = int(ENV.get("BENCH_FILES", "200"))
ITEMS = int(ENV.get("BENCH_ITEMS", "100000"))


def run(args, env=None, timeout=1800):
    r = subprocess.run(args, env={**ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise SystemExit("%s failed (%d): %s %s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def database_url(name):
    return ADMIN_URL.rsplit("/", 1)[0] + "/" + name


class Server:
    def __init__(self, name):
        self.database, self.bucket = "bench_" + name, "bench-" + name.replace("_", "-")
        run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.database,
             "-c", "CREATE DATABASE " + self.database])
        run([S3_PYTHON, S3CHECK, "create-bucket", self.bucket], env={**AWS, "DOCFS_TEST_S3_ENDPOINT": S3_ENDPOINT})
        self.remote = ["--remote", database_url(self.database), "--objects", "s3://%s/tree" % self.bucket,
                       "--s3-endpoint", S3_ENDPOINT, "--region", "us-east-1"]

    def drop(self):
        subprocess.run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.database],
                       capture_output=True)
        subprocess.run([S3_PYTHON, S3CHECK, "delete-bucket", self.bucket], env={**ENV, **AWS, "DOCFS_TEST_S3_ENDPOINT": S3_ENDPOINT},
                       capture_output=True)


def mount(store, mnt):
    os.makedirs(mnt, exist_ok=True)
    run([DOCFS, "mount", store, mnt], env=AWS)


def unmount(mnt):
    subprocess.run([DOCFS, "unmount", "--no-wait", mnt], capture_output=True, timeout=120)
    subprocess.run(["fusermount3", "-uz", mnt], capture_output=True)


def measure(a, b, count, timeout):
    """Writes count small files on mount a, one at a time; for each, the seconds until mount b
    reads its contents."""
    times = []
    for i in range(count):
        body = ("file %d " % i).encode() * 12
        start = time.monotonic()
        with open(os.path.join(a, "f%d.txt" % i), "wb") as f:
            f.write(body)
        target = os.path.join(b, "f%d.txt" % i)
        while True:
            try:
                with open(target, "rb") as f:
                    if f.read() == body:
                        break
            except OSError:
                pass
            if time.monotonic() - start > timeout:
                raise SystemExit("f%d.txt did not reach %s within %d s" % (i, b, timeout))
            time.sleep(0.002)
        times.append(time.monotonic() - start)
    return sorted(times)


def report(label, times):
    p99 = times[min(len(times) - 1, int(round(0.99 * len(times))) - 1)]
    print("%s: write on A -> readable on B, %d files: median %.3f s, p99 %.3f s, min %.3f s, max %.3f s"
          % (label, len(times), statistics.median(times), p99, times[0], times[-1]), flush=True)


def latency(work):
    server = Server("latency")
    mounts = []
    try:
        for name in "AB":
            run([DOCFS, "init", os.path.join(work, "lat" + name)] + server.remote, env=AWS)
            mount(os.path.join(work, "lat" + name), os.path.join(work, "m" + name))
            mounts.append(os.path.join(work, "m" + name))
        report("latency", measure(*mounts, FILES, timeout=60))
    finally:
        for m in mounts:
            unmount(m)
        server.drop()


def latency_rclone(work):
    """The same figure for two `rclone mount`s of one bucket (S3 has no change notification: B
    sees a new file when its listing cache expires, --dir-cache-time 1s; A uploads on close with
    --vfs-cache-mode writes --vfs-write-back 0s). On the moto that checks no signatures: moto's
    checker refuses the `/` rclone's listings put in query values."""
    if subprocess.run(["which", "rclone"], capture_output=True).returncode != 0:
        print("latency (rclone): rclone is not installed; skipped", flush=True)
        return
    endpoint = ENV["DOCFS_TEST_S3_OPEN_ENDPOINT"]
    bucket = "bench-rclone"
    env = {**AWS, "DOCFS_TEST_S3_ENDPOINT": endpoint}
    run([S3_PYTHON, S3CHECK, "create-bucket", bucket], env=env)
    rclone_env = {"RCLONE_CONFIG_B_TYPE": "s3", "RCLONE_CONFIG_B_PROVIDER": "Other", "RCLONE_CONFIG_B_ENDPOINT": endpoint,
                  "RCLONE_CONFIG_B_ACCESS_KEY_ID": AWS["AWS_ACCESS_KEY_ID"],
                  "RCLONE_CONFIG_B_SECRET_ACCESS_KEY": AWS["AWS_SECRET_ACCESS_KEY"], "RCLONE_CONFIG_B_REGION": "us-east-1",
                  "AWS_CA_BUNDLE": ""}
    mounts = []
    try:
        for name in "AB":
            mnt = os.path.join(work, "r" + name)
            os.makedirs(mnt)
            run(["rclone", "mount", "b:%s/tree" % bucket, mnt, "--daemon", "--vfs-cache-mode", "writes", "--vfs-write-back", "0s",
                 "--dir-cache-time", "1s", "--cache-dir", os.path.join(work, "rcache" + name)], env=rclone_env)
            mounts.append(mnt)
        report("latency (rclone mount)", measure(*mounts, min(FILES, 50), timeout=120))
    finally:
        for m in mounts:
            subprocess.run(["fusermount3", "-uz", m], capture_output=True)
        subprocess.run([S3_PYTHON, S3CHECK, "delete-bucket", bucket], env={**ENV, **env}, capture_output=True)


def init_tree(work):
    server = Server("init")
    mnt = os.path.join(work, "mi")
    try:
        # Make the schema with an empty replica, then fill the server with SQL.
        run([DOCFS, "init", os.path.join(work, "seed")] + server.remote, env=AWS)
        folders = max(1, ITEMS // 101)
        files = ITEMS - folders
        sql = """
            INSERT INTO docfs_items (parent_id, name, kind, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode)
            SELECT (SELECT id FROM docfs_items WHERE parent_id IS NULL), 'folder' || g, 'directory', 1, 1, 1, 1, 0, 0, 493
            FROM generate_series(1, %d) g;
            INSERT INTO docfs_items (parent_id, name, kind, created_ns, modified_ns, changed_ns, accessed_ns, uid, gid, mode)
            SELECT f.id, 'file' || g || '.txt', 'file', 1, 1, 1, 1, 0, 0, 420
            FROM docfs_items f, generate_series(1, %d) g WHERE f.kind = 'directory' AND f.parent_id IS NOT NULL;
            UPDATE docfs_items SET size = 1000, content_key = 'bench/not-uploaded/' || id WHERE kind = 'file';
            INSERT INTO docfs_versions (item_id, content_version, content_key, size, created_ns)
            SELECT id, 1, content_key, size, 1 FROM docfs_items WHERE kind = 'file';
            INSERT INTO docfs_changes (item_id, kind, operation_id, content_version, metadata_version, at_ns)
            SELECT id, 'create', gen_random_uuid(), 1, 1, 1 FROM docfs_items WHERE parent_id IS NOT NULL ORDER BY id;
        """ % (folders, files // folders)
        run([PSQL, "-q", "-d", database_url(server.database), "-c", sql])
        count = run([PSQL, "-At", "-d", database_url(server.database), "-c",
                     "SELECT count(*) FROM docfs_items WHERE parent_id IS NOT NULL"]).stdout.strip()
        start = time.monotonic()
        run([DOCFS, "init", os.path.join(work, "big")] + server.remote, env=AWS)
        init_s = time.monotonic() - start
        mount(os.path.join(work, "big"), mnt)
        start = time.monotonic()
        r = subprocess.run("ls -lR '%s' | wc -l" % mnt, shell=True, capture_output=True, text=True)
        ls_s = time.monotonic() - start
        print("init: %s items on the server: docfs init --remote %.2f s, then ls -lR of the mount %.2f s (%s lines)"
              % (count, init_s, ls_s, r.stdout.strip()), flush=True)
    finally:
        unmount(mnt)
        server.drop()


def quiet(mnt, timeout=600):
    """Waits until a mount has nothing to send and nothing to apply."""
    import json
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = subprocess.run([DOCFS, "status", mnt, "--json"], capture_output=True, text=True)
        if r.returncode == 0:
            f = json.loads(r.stdout)
            if f.get("pending") == 0 and f.get("incoming") == 0:
                return
        time.sleep(0.5)
    raise SystemExit("%s did not settle within %d s" % (mnt, timeout))


def far_read(work):
    """A file of BENCH_FAR_MIB MiB (default 256) written on A; on B, where it is not downloaded:
    the time of a 64 KiB read at its end (a ranged request for that chunk), then of reading it
    all (cat), then of reading it again from B's copy."""
    server = Server("far")
    mounts = []
    size = int(ENV.get("BENCH_FAR_MIB", "256")) << 20
    try:
        for name in "AB":
            run([DOCFS, "init", os.path.join(work, "far" + name)] + server.remote, env=AWS)
            mount(os.path.join(work, "far" + name), os.path.join(work, "f" + name))
            mounts.append(os.path.join(work, "f" + name))
        a, b = mounts
        with open(os.path.join(a, "big.bin"), "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(size >> 20):
                f.write(block)
        target = os.path.join(b, "big.bin")
        deadline = time.monotonic() + 600
        while not (os.path.exists(target) and os.stat(target).st_size == size):
            if time.monotonic() > deadline:
                raise SystemExit("big.bin did not reach B")
            time.sleep(0.1)
        quiet(a)
        quiet(b)
        start = time.monotonic()
        fd = os.open(target, os.O_RDONLY)
        tail = os.pread(fd, 65536, size - 65536)
        far_s = time.monotonic() - start
        os.close(fd)
        if tail != block[-65536:]:
            raise SystemExit("the last 64 KiB read wrong")
        start = time.monotonic()
        run(["sh", "-c", "cat '%s' > /dev/null" % target])
        all_s = time.monotonic() - start
        start = time.monotonic()
        run(["sh", "-c", "cat '%s' > /dev/null" % target])
        again_s = time.monotonic() - start
        print("far read: %d MiB file not downloaded on B: last 64 KiB %.3f s, then cat of all of it %.2f s, cat again %.2f s"
              % (size >> 20, far_s, all_s, again_s), flush=True)
    finally:
        for m in mounts:
            unmount(m)
        server.drop()


def status(mnt):
    import json
    return json.loads(run([DOCFS, "status", mnt, "--json"]).stdout)


def rclone_env(endpoint):
    return {"RCLONE_CONFIG_B_TYPE": "s3", "RCLONE_CONFIG_B_PROVIDER": "Other", "RCLONE_CONFIG_B_ENDPOINT": endpoint,
            "RCLONE_CONFIG_B_ACCESS_KEY_ID": AWS["AWS_ACCESS_KEY_ID"],
            "RCLONE_CONFIG_B_SECRET_ACCESS_KEY": AWS["AWS_SECRET_ACCESS_KEY"], "RCLONE_CONFIG_B_REGION": "us-east-1",
            "AWS_CA_BUNDLE": ""}


def small_tree(root, count=2000):
    """count files of 0 to 4 KiB of random bytes, 100 to a folder."""
    for i in range(count):
        folder = os.path.join(root, "d%02d" % (i // 100))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "f%04d.txt" % i), "wb") as f:
            f.write(os.urandom((i * 977) % 4096))
    return root


def drain(work):
    """4. drain: a `cp -r` into a fresh replica until `docfs status` has nothing pending (every
    file on the server), beside `rclone copy` of the same tree to the same S3 server (the moto
    that checks no signatures, as for the rclone latency), for 2,000 small files and for the
    fsbench tree (a snapshot of /usr/include without symlinks); then the bytes uploaded
    (`uploadedBytes`) for 1 MiB appended to a 64 MiB file and for 4 KiB rewritten in its middle."""
    trees = [("2,000 small files", small_tree(os.path.join(work, "small"))),
             ("fsbench tree", os.path.join(work, "include"))]
    run(["rsync", "-a", "--no-links", "/usr/include/", trees[1][1] + "/"])
    have_rclone = subprocess.run(["which", "rclone"], capture_output=True).returncode == 0
    for n, (label, tree) in enumerate(trees):
        files = int(run(["sh", "-c", "find '%s' -type f | wc -l" % tree]).stdout)
        size = int(run(["du", "-sb", tree]).stdout.split()[0])
        server = Server("drain%d" % n)
        mnt = os.path.join(work, "dm%d" % n)
        try:
            run([DOCFS, "init", os.path.join(work, "drain%d" % n)] + server.remote, env=AWS)
            # The server's own time in docfs_apply (schema 11), per entry applied.
            run([PSQL, "-q", "-d", ADMIN_URL, "-c", "ALTER DATABASE %s SET track_functions = 'pl'" % server.database])
            mount(os.path.join(work, "drain%d" % n), mnt)
            start = time.monotonic()
            run(["cp", "-r", tree + "/.", mnt + "/"])
            copied_s = time.monotonic() - start
            quiet(mnt, timeout=1800)
            docfs_s = time.monotonic() - start
            objects = len(json_out([S3_PYTHON, S3CHECK, "list", server.bucket], {**AWS, "DOCFS_TEST_S3_ENDPOINT": S3_ENDPOINT}))
            per_entry = server_time_per_entry(server.database)
        finally:
            unmount(mnt)
            server.drop()
        line = "drain %s (%d files, %.1f MiB): docfs cp -r %.2f s, on the server after %.2f s (%d objects; server %s per entry)" % (
            label, files, size / 1048576, copied_s, docfs_s, objects, per_entry)
        if have_rclone:
            endpoint = ENV["DOCFS_TEST_S3_OPEN_ENDPOINT"]
            bucket = "bench-rclone-drain%d" % n
            env = {**AWS, "DOCFS_TEST_S3_ENDPOINT": endpoint}
            run([S3_PYTHON, S3CHECK, "create-bucket", bucket], env=env)
            try:
                start = time.monotonic()
                run(["rclone", "copy", tree, "b:%s/tree" % bucket], env=rclone_env(endpoint))
                rclone_s = time.monotonic() - start
            finally:
                subprocess.run([S3_PYTHON, S3CHECK, "delete-bucket", bucket], env={**ENV, **env}, capture_output=True)
            line += "; rclone copy %.2f s: docfs %.2fx faster" % (rclone_s, rclone_s / docfs_s)
        else:
            line += "; rclone is not installed: no comparison"
        print(line, flush=True)

    server = Server("edits")
    mnt = os.path.join(work, "de")
    try:
        run([DOCFS, "init", os.path.join(work, "edits")] + server.remote, env=AWS)
        mount(os.path.join(work, "edits"), mnt)
        big = os.path.join(mnt, "big.bin")
        with open(big, "wb") as f:
            f.write(os.urandom(64 << 20))
        quiet(mnt)
        before = status(mnt)["uploadedBytes"]
        with open(big, "ab") as f:
            f.write(os.urandom(1 << 20))
        quiet(mnt)
        appended = status(mnt)["uploadedBytes"] - before
        with open(big, "r+b") as f:
            f.seek(32 << 20)
            f.write(os.urandom(4096))
        quiet(mnt)
        edited = status(mnt)["uploadedBytes"] - before - appended
        print("edits of a 64 MiB file: 1 MiB appended uploaded %.2f MiB; 4 KiB rewritten in the middle uploaded %.2f MiB"
              % (appended / 1048576, edited / 1048576), flush=True)
    finally:
        unmount(mnt)
        server.drop()


def server_time_per_entry(database):
    """docfs_apply's total time over the operations applied, from pg_stat_user_functions (a
    backend reports its counts when idle, within a second or so: read until they settle)."""
    url = database_url(database)
    query = ("SELECT coalesce(sum(total_time), 0), (SELECT count(*) FROM docfs_operations) "
             "FROM pg_stat_user_functions WHERE funcname = 'docfs_apply'")
    last, deadline = None, time.monotonic() + 15
    while time.monotonic() < deadline:
        row = run([PSQL, "-At", "-d", url, "-c", query]).stdout.strip()
        if row == last:
            break
        last = row
        time.sleep(1)
    total_ms, entries = last.split("|")
    return "%.3f ms" % (float(total_ms) / max(int(entries), 1)) if float(total_ms) > 0 else "unknown"


# `docfs-scale replicas` (Sources/docfs-scale): N replica clients in one process, each a real
# store and sync engine. Function calls through the pgbouncer servers.sh starts (transaction
# pooling), LISTEN on PostgreSQL itself, whose max_connections is raised for it (Debian's default
# is 100); the polling run (`--remote-listen none`) needs no session of its own per client.
SCALE = os.path.join(os.path.dirname(DOCFS), "docfs-scale")
CLIENTS = [int(n) for n in ENV.get("BENCH_CLIENTS", "10,100,1000").split(",")]
WRITERS = [int(n) for n in ENV.get("BENCH_WRITERS", "1,10,50").split(",")]


def set_max_connections(wanted):
    """Restarts the test cluster with at least `wanted` connections (ALTER SYSTEM, kept in its data)."""
    now = int(run([PSQL, "-At", "-d", ADMIN_URL, "-c", "SHOW max_connections"]).stdout)
    if now >= wanted:
        return now
    run([PSQL, "-q", "-d", ADMIN_URL, "-c", "ALTER SYSTEM SET max_connections = %d" % wanted])
    for step in ("pg-stop", "pg-start"):
        run(["sh", ENV["DOCFS_TEST_SERVERS_SH"], step, ENV["DOCFS_TEST_SERVERS_DIR"]])
    return wanted


def backend_cpu(postmaster, seen):
    """Adds the CPU seconds of every process the postmaster started (its backends) to `seen` by PID."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick


def scale_run(name, mode, args, listen, pooled=True):
    """One `docfs-scale replicas` run on a fresh database owned by a role with a password (pgbouncer
    logs in with SCRAM); samples the server's sessions and its backends' CPU meanwhile."""
    import json
    server = Server(name)
    role, password = "bench_scale", "bench-scale"
    subprocess.run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP ROLE IF EXISTS " + role], capture_output=True)
    run([PSQL, "-q", "-d", ADMIN_URL, "-c", "CREATE ROLE %s LOGIN CREATEROLE PASSWORD '%s'" % (role, password),
         "-c", "ALTER DATABASE %s OWNER TO %s" % (server.database, role)])
    url = lambda base: base.rsplit("/", 1)[0].replace("//docfs@", "//%s:%s@" % (role, password)) + "/" + server.database
    direct = url(ADMIN_URL)
    command = [SCALE, "replicas", mode, "--remote", direct, "--calls", url(ENV["DOCFS_TEST_PGBOUNCER_URL"]) if pooled else direct,
               "--objects", "s3://%s/tree" % server.bucket, "--s3-endpoint", S3_ENDPOINT,
               "--remote-listen", direct if listen else "none"] + args
    with open(os.path.join(ENV["DOCFS_TEST_PG_DATA"], "postmaster.pid")) as f:
        postmaster = int(f.readline())
    cpu, peak = {}, 0
    backend_cpu(postmaster, {})
    start = time.monotonic()
    proc = subprocess.Popen(command, env={**ENV, **AWS}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None:
            backend_cpu(postmaster, cpu)
            r = subprocess.run([PSQL, "-At", "-d", ADMIN_URL, "-c",
                                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                peak = max(peak, int(r.stdout))
            time.sleep(0.5)
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
        server.drop()
        subprocess.run([PSQL, "-q", "-d", ADMIN_URL, "-c", "DROP ROLE IF EXISTS " + role], capture_output=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        print("%s: docfs-scale failed (%d): %s" % (name, proc.returncode, err.strip()[-2000:]), flush=True)
        return None
    report = json.loads(out.strip().splitlines()[-1])
    report["serverCPU"] = sum(cpu.values())
    report["peakSessions"] = peak
    report["wall"] = wall
    return report


def scale_common(r):
    order = r["order"]
    error = "; first error: %s" % r["firstError"] if r["offline"] and "firstError" in r else ""
    return ("server CPU %.1f s (%.0f%% of a core), peak %d sessions; harness %d MiB peak (%d KiB a client); "
            "%d offline, %d unopened, order: %d skipped, %d went back, %d not caught up; run %.0f s"
            % (r["serverCPU"], 100 * r["serverCPU"] / r["wall"], r["peakSessions"], r["memory"]["peakKiB"] // 1024,
               r["memory"]["perClientKiB"], r["offline"], r["unopened"], order["skipped"], order["wentBack"],
               order["notCaughtUp"], r["wall"])) + error


def fanout(work):
    """Per N: a file made on one client, the time until every other client has it in its store
    (median, p99, max over BENCH_CHANGES changes, default 10), LISTEN on PostgreSQL; and for the
    largest N the same with every client polling (`--remote-listen none`)."""
    changes = ENV.get("BENCH_CHANGES", "10")
    set_max_connections(max(CLIENTS) + 100)
    runs = [(n, True) for n in CLIENTS] + [(max(CLIENTS), False)]
    for n, listen in runs:
        r = scale_run("fanout%d" % n, "fanout", ["--clients", str(n), "--changes", changes, "--timeout", "30"], listen)
        if r is None:
            continue
        f = r["fanout"]
        every, each = f["everyClient"], f["perClient"]
        if f["warmUpMissed"] == n - 1:
            print("fanout N=%d (%s): the warm-up change reached no other client in 30 s: nothing timed; %s"
                  % (n, "LISTEN" if listen else "polling", scale_common(r)), flush=True)
            continue
        print("fanout N=%d (%s): every client has it: median %s s, p99 %s s, max %s s (one client: median %s s); "
              "%d of %s changes not everywhere in 30 s; %s"
              % (n, "LISTEN" if listen else "polling", every.get("median"), every.get("p99"), every.get("max"),
                 each.get("median"), f["changesNotEverywhere"], changes, scale_common(r)), flush=True)


def writers(work):
    """Per W: W clients writing bursts of files at once for BENCH_SECONDS (default 15); the
    operations the server committed per second (change-log entries over the run). Calls straight
    to PostgreSQL (pgbouncer's 4 server connections would bound the writers first)."""
    seconds = ENV.get("BENCH_SECONDS", "15")
    set_max_connections(3 * max(WRITERS) + 100)
    for w in WRITERS:
        r = scale_run("writers%d" % w, "writers",
                      ["--clients", str(max(w, 2)), "--writers", str(w), "--seconds", seconds, "--timeout", "60"], True,
                      pooled=False)
        if r is None:
            continue
        x = r["writers"]
        print("writers W=%d: %d operations committed in %.1f s: %.0f per second (%d writer(s) not drained); %s"
              % (w, x["committed"], x["seconds"], x["operationsPerSecond"], x["unsent"], scale_common(r)), flush=True)


def json_out(args, env):
    import json
    return json.loads(run(args, env=env).stdout)


def main():
    work = tempfile.mkdtemp(prefix="docfs-bench-replicas-")
    try:
        which = sys.argv[1:] or ["latency", "rclone", "init", "far", "drain"]
        if "latency" in which:
            latency(work)
        if "rclone" in which:
            latency_rclone(work)
        if "init" in which:
            init_tree(work)
        if "far" in which:
            far_read(work)
        if "drain" in which:
            drain(work)
        if "fanout" in which:
            fanout(work)
        if "writers" in which:
            writers(work)
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
