#!/bin/sh
# Test servers for the remote replica (DocFSRemote): a throwaway PostgreSQL cluster and moto's
# S3 server, both on 127.0.0.1 in a temporary folder, stopped by PID afterwards.
#
#   Tests/remote/servers.sh run -- COMMAND...   start both, run COMMAND with the addresses in the
#                                               environment, stop both however COMMAND ends (its status)
#   Tests/remote/servers.sh install             install what is missing (below), start nothing
#   Tests/remote/servers.sh start DIR           start both; DIR/env holds the export lines
#   Tests/remote/servers.sh stop DIR            stop what `start DIR` started, by PID
#   Tests/remote/servers.sh pg-stop DIR         stop only PostgreSQL (fast shutdown), for tests of
#                                               a server that goes away; its data stays
#   Tests/remote/servers.sh pg-start DIR        start it again on the same port and data (stop and
#                                               `run` then stop the new postmaster by its new PID)
#   Tests/remote/servers.sh standby-start DIR   a hot standby of it (streaming replication), made
#                                               with pg_basebackup -R on first use, in DIR/standby;
#                                               prints its port (tests of `docfs init --remote-read`)
#   Tests/remote/servers.sh standby-stop DIR    stop the standby (fast shutdown, by PID); its data stays
#
# The environment the tests read (they skip without it):
#   DOCFS_TEST_PG_URL         postgres://docfs@127.0.0.1:PORT/postgres (trust auth; tests make
#                             a database of their own in it)
#   DOCFS_TEST_S3_ENDPOINT    http://127.0.0.1:PORT (moto, checking signatures: IAM mode)
#   DOCFS_TEST_S3_ACCESS_KEY, DOCFS_TEST_S3_SECRET_KEY   the only credentials moto accepts
#   DOCFS_TEST_S3_OPEN_ENDPOINT  http://127.0.0.1:PORT (a second moto that checks no signature: moto's
#                             checker rebuilds the URL with `+`, `&`, `=` in keys and `/` in query values
#                             unescaped and so refuses AWS's own SDK there (boto3 too); keys holding
#                             them are tested on this one)
#   DOCFS_TEST_S3_TLS_ENDPOINT   https://127.0.0.1:PORT (a third moto, no signature checks, with a
#                             certificate of the test CA below: --s3-ca and AWS_CA_BUNDLE)
#   DOCFS_TEST_S3_PYTHON      a python that imports boto3 (a second S3 client for the tests' checks)
#                             and prometheus_client (the parser the metrics tests read -o metrics with)
#   DOCFS_TEST_PG_BIN         PostgreSQL's bin folder (psql, pg_ctl) of the running cluster
#   DOCFS_TEST_PG_CA, DOCFS_TEST_PG_OTHER_CA   the test CA that signed the cluster's TLS
#                             certificate (127.0.0.1, localhost; ssl=on), and one that did not
#   DOCFS_TEST_PG_DATA        the cluster's data folder
#   DOCFS_TEST_PGBOUNCER_URL  postgres://docfs@127.0.0.1:PORT/postgres: a pgbouncer (Debian's) in
#                             front of the cluster, pool_mode = transaction, SCRAM for clients
#                             (the role's secret read from pg_shadow by auth_query), a pool of
#                             PGBOUNCER_POOL server connections per database and role
#   DOCFS_TEST_SERVERS_SH, DOCFS_TEST_SERVERS_DIR   this script and DIR: tests stop and start
#                             PostgreSQL with `"$DOCFS_TEST_SERVERS_SH" pg-stop|pg-start "$DOCFS_TEST_SERVERS_DIR"`
#
# Installs what is missing: Debian's postgresql and pgbouncer (apt-get, as root), and moto[server]==5.2.5 (with
# prometheus_client==0.26.0) in a
# venv under .build/remote-venv (used even when another moto is on PATH, unless
# DOCFS_TEST_MOTO_SERVER names a moto_server to use instead). Prints the versions it runs.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
MOTO_VERSION=5.2.5
# pgbouncer's server connections per database and role (default_pool_size).
PGBOUNCER_POOL=4
# The metrics tests parse `-o metrics` output with the Prometheus project's own parser.
PROMETHEUS_CLIENT_VERSION=0.26.0

log() { echo "servers.sh: $*" >&2; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# initdb and pg_ctl refuse to run as root: as root, run them as the postgres user.
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Starts (or starts again) the cluster of `start DIR` on its port, and records the postmaster's
# PID, which is new after a restart, so that `stop` always signals the running one.
pg_start() {
    dir=$1
    bindir=$(cat "$dir/pg_bindir"); pgport=$(cat "$dir/pg_port")
    as_pg "$bindir/pg_ctl" -D "$dir/pg/data" -l "$dir/pg/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $pgport -k $dir/pgsock -c fsync=off -c wal_level=replica -c max_wal_senders=4 -c ssl=on -c ssl_cert_file=$dir/pg/tls/server.crt -c ssl_key_file=$dir/pg/tls/server.key" start >/dev/null \
        || { cat "$dir/pg/server.log" >&2; log "PostgreSQL did not start"; exit 1; }
    head -n 1 "$dir/pg/data/postmaster.pid" >"$dir/postgres.pid"
}

# TLS for the test cluster: a CA made here, a certificate for 127.0.0.1 and localhost signed by
# it (the server's key readable by the postgres user only, as PostgreSQL demands), and a second
# CA that signed nothing of this server (a client trusting only it must refuse the server).
# Plain connections keep working (ssl=on offers TLS, it does not require it).
tls_setup() {
    dir=$1
    if ! command -v openssl >/dev/null 2>&1; then
        [ "$(id -u)" = 0 ] || { log "openssl is missing: sudo apt-get install openssl (or run make test as root)"; exit 1; }
        log "installing openssl (apt-get) ..."
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y openssl >&2; } || { log "apt-get install openssl failed"; exit 1; }
    fi
    mkdir -p "$dir/tls" "$dir/pg/tls"
    (
        cd "$dir/tls"
        ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
        openssl req -x509 $ec -days 2 -subj "/CN=docfs test CA" -keyout ca.key -out ca.crt 2>/dev/null
        openssl req -x509 $ec -days 2 -subj "/CN=another CA" -keyout other-ca.key -out other-ca.crt 2>/dev/null
        openssl req $ec -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt 2>/dev/null
    ) || { log "openssl could not make the test certificates"; exit 1; }
    cp "$dir/tls/server.crt" "$dir/tls/server.key" "$dir/pg/tls/"
    chmod 600 "$dir/pg/tls/server.key"
    [ "$(id -u)" = 0 ] && chown -R postgres "$dir/pg/tls"
    chmod 644 "$dir/tls/ca.crt" "$dir/tls/other-ca.crt"
}

# Fast shutdown (SIGINT to the postmaster: connections are ended, nothing waits for clients),
# by the PID recorded at start; the data folder stays for pg_start.
pg_stop() {
    dir=$1
    [ -f "$dir/postgres.pid" ] || return 0
    pid=$(cat "$dir/postgres.pid")
    if is_postmaster "$pid" "$dir"; then
        kill -INT "$pid" 2>/dev/null || true
        # A fast shutdown can take long on a busy machine; a postmaster killed outright leaves
        # its backends holding the data folder (the next start then fails): wait, then ask for
        # an immediate shutdown (SIGQUIT ends the backends too), and only then kill.
        i=0
        while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
        if kill -0 "$pid" 2>/dev/null; then
            kill -QUIT "$pid" 2>/dev/null || true
            i=0
            while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        fi
        stop_pid "$dir/postgres.pid" 10
    else
        rm -f "$dir/postgres.pid"
    fi
}

# A hot standby of the cluster for the tests of `docfs init --remote-read`, made by those tests
# when they first need it (not by `start`: other runs pay nothing for it), in DIR/standby with the
# layout of the primary's (so pg_stop stops it by its PID). The primary must take a replication
# connection: wal_level replica (or logical), WAL senders, a pg_hba replication entry for
# 127.0.0.1 (initdb's trust default has one); checked first, with one line saying what is missing.
standby_start() {
    dir=$1; sb=$dir/standby
    bindir=$(cat "$dir/pg_bindir"); pgport=$(cat "$dir/pg_port")
    q() { "$bindir/psql" -X -At -h 127.0.0.1 -p "$pgport" -U docfs -d postgres -c "$1"; }
    if [ ! -d "$sb/pg/data" ]; then
        case $(q "SHOW wal_level") in replica|logical) ;; *) log "standby: the primary's wal_level is not replica"; exit 1 ;; esac
        [ "$(q "SHOW max_wal_senders")" -gt 0 ] || { log "standby: the primary has max_wal_senders = 0"; exit 1; }
        [ "$(q "SELECT count(*) FROM pg_hba_file_rules WHERE 'replication' = ANY(database) AND type = 'host'")" -gt 0 ] \
            || { log "standby: the primary's pg_hba.conf has no host replication entry"; exit 1; }
        mkdir -p "$sb/pg" "$sb/pgsock"
        [ "$(id -u)" = 0 ] && chown postgres "$sb/pg" "$sb/pgsock"
        free_port >"$sb/pg_port"
        as_pg "$bindir/pg_basebackup" -h 127.0.0.1 -p "$pgport" -U docfs -D "$sb/pg/data" -R -X stream -c fast \
            >"$sb/basebackup.log" 2>&1 || { cat "$sb/basebackup.log" >&2; rm -rf "$sb"; log "pg_basebackup failed"; exit 1; }
    fi
    port=$(cat "$sb/pg_port")
    as_pg "$bindir/pg_ctl" -D "$sb/pg/data" -l "$sb/pg/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $sb/pgsock -c fsync=off -c hot_standby=on" start >/dev/null \
        || { cat "$sb/pg/server.log" >&2; log "the standby did not start"; exit 1; }
    head -n 1 "$sb/pg/data/postmaster.pid" >"$sb/postgres.pid"
    [ "$("$bindir/psql" -X -At -h 127.0.0.1 -p "$port" -U docfs -d postgres -c "SELECT pg_is_in_recovery() AND current_setting('hot_standby')::bool")" = t ] \
        || { log "the standby is not a hot standby"; exit 1; }
    echo "$port"
}

# Whether PID is still the postmaster of DIR's cluster (not a reused PID): its command line
# names the data folder.
is_postmaster() {
    [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2/pg/data"
}

pg_bindir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

# make test runs two streams side by side that both start servers (Tests/beside.sh): on a fresh
# machine both would install at once, and two `python3 -m venv --clear` of one folder fail (EEXIST).
# One installs under the lock while the other waits for it, then finds everything in place.
ensure_installed() {
    mkdir -p "$repo/.build"
    exec 9>"$repo/.build/servers-install.lock"
    flock 9
    ensure_postgres
    ensure_pgbouncer
    ensure_moto
    exec 9>&-
}

ensure_postgres() {
    bindir=$(pg_bindir)
    if [ -n "$bindir" ] && [ -x "$bindir/initdb" ] && [ -x "$bindir/pg_ctl" ]; then return 0; fi
    install_package postgresql
}

ensure_pgbouncer() {
    command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || install_package pgbouncer
}

install_package() { # Debian package
    if [ "$(id -u)" != 0 ]; then
        log "$1 is missing: sudo apt-get install $1 (or run make test as root)"; exit 1
    fi
    log "installing $1 (apt-get) ..."
    # The packages start a server of their own (PostgreSQL on 5432, pgbouncer on 6432) unless
    # policy-rc.d forbids it: the tests start their own, and nothing here should leave a server
    # running that it did not start by PID.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        policy=/usr/sbin/policy-rc.d
        printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
    fi
    status=0
    { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y "$1" >&2; } || status=$?
    [ -n "$policy" ] && rm -f "$policy"
    [ "$status" = 0 ] || { log "apt-get install $1 failed"; exit 1; }
}

pgbouncer_bin() {
    command -v pgbouncer 2>/dev/null || echo /usr/sbin/pgbouncer
}

# pgbouncer in transaction pooling in front of the cluster, as a deployment of many replicas runs
# it: clients authenticate with SCRAM against the role's secret, which pgbouncer reads from
# pg_shadow as the cluster's superuser (auth_query), and it logs in to PostgreSQL as that role.
# It refuses to run as root: as root it runs as the postgres user, in a folder that user owns.
pgbouncer_start() {
    dir=$1
    pgport=$(cat "$dir/pg_port")
    bport=$(free_port)
    mkdir -p "$dir/pgbouncer"
    printf '"docfs" ""\n' >"$dir/pgbouncer/userlist.txt"
    # max_client_conn: room for `docfs-scale replicas` of 1,000 clients, a pool of two each (make bench-replicas).
    cat >"$dir/pgbouncer/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pgport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/pgbouncer/userlist.txt
auth_user = docfs
pool_mode = transaction
default_pool_size = $PGBOUNCER_POOL
max_client_conn = 4000
server_idle_timeout = 30
admin_users = docfs
logfile = $dir/pgbouncer/pgbouncer.log
pidfile = $dir/pgbouncer/pgbouncer.pid
INI
    [ "$(id -u)" = 0 ] && chown -R postgres "$dir/pgbouncer"
    as_pg "$(pgbouncer_bin)" -d "$dir/pgbouncer/pgbouncer.ini" >"$dir/pgbouncer-start.log" 2>&1 \
        || { cat "$dir/pgbouncer-start.log" "$dir/pgbouncer/pgbouncer.log" >&2 2>/dev/null; log "pgbouncer did not start"; exit 1; }
    i=0
    while ! [ -s "$dir/pgbouncer/pgbouncer.pid" ] && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    cp "$dir/pgbouncer/pgbouncer.pid" "$dir/pgbouncer.pid" 2>/dev/null || { log "pgbouncer wrote no PID file"; exit 1; }
    wait_port "$bport" 30 || { cat "$dir/pgbouncer/pgbouncer.log" >&2; log "pgbouncer did not listen"; exit 1; }
    echo "$bport" >"$dir/pgbouncer_port"
}

# Sets MOTO_SERVER and MOTO_PYTHON (a python that imports moto and boto3): the moto this script
# pins, in its own venv, so that every machine tests against the same S3 server; or the
# moto_server DOCFS_TEST_MOTO_SERVER names (its python beside it, or python3), when set.
ensure_moto() {
    if [ -n "${DOCFS_TEST_MOTO_SERVER:-}" ]; then
        MOTO_SERVER=$(command -v "$DOCFS_TEST_MOTO_SERVER") || { log "DOCFS_TEST_MOTO_SERVER=$DOCFS_TEST_MOTO_SERVER: no such program"; exit 1; }
        MOTO_PYTHON=$(dirname "$MOTO_SERVER")/python
        [ -x "$MOTO_PYTHON" ] || MOTO_PYTHON=python3
        "$MOTO_PYTHON" -c 'import moto.server, boto3' >/dev/null 2>&1 \
            || { log "DOCFS_TEST_MOTO_SERVER: $MOTO_PYTHON cannot import moto.server and boto3"; exit 1; }
        return 0
    fi
    venv="$repo/.build/remote-venv"
    if ! [ -x "$venv/bin/moto_server" ] || [ "$(moto_version "$venv/bin/python")" != "$MOTO_VERSION" ] \
        || ! "$venv/bin/python" -c 'import moto.server, boto3' >/dev/null 2>&1; then
        log "installing moto[server]==$MOTO_VERSION into $venv ..."
        mkdir -p "$repo/.build"
        python3 -m venv --clear "$venv" >&2
        "$venv/bin/pip" install --quiet "moto[server]==$MOTO_VERSION" >&2
    fi
    if [ "$(dist_version "$venv/bin/python" prometheus_client)" != "$PROMETHEUS_CLIENT_VERSION" ]; then
        log "installing prometheus_client==$PROMETHEUS_CLIENT_VERSION into $venv ..."
        "$venv/bin/pip" install --quiet "prometheus_client==$PROMETHEUS_CLIENT_VERSION" >&2
    fi
    MOTO_SERVER="$venv/bin/moto_server"; MOTO_PYTHON="$venv/bin/python"
}

moto_version() { # python
    dist_version "$1" moto
}

dist_version() { # python distribution
    "$1" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$2" 2>/dev/null || echo unknown
}

wait_port() { # port seconds: a TCP connect only (an HTTP request would spend one of moto's unauthenticated actions)
    python3 - "$1" "$2" <<'PY'
import socket, sys, time
port, deadline = int(sys.argv[1]), time.time() + float(sys.argv[2])
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
}

start() {
    dir=$1
    mkdir -p "$dir"
    chmod 755 "$dir"
    ensure_installed
    bindir=$(pg_bindir)

    # PostgreSQL: initdb and pg_ctl refuse root; run them as the postgres user, in folders it owns.
    pgport=$(free_port)
    mkdir -p "$dir/pg" "$dir/pgsock"
    [ "$(id -u)" = 0 ] && chown postgres "$dir/pg" "$dir/pgsock"
    as_pg "$bindir/initdb" -D "$dir/pg/data" -U docfs --auth=trust -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; log "initdb failed"; exit 1; }
    echo "$bindir" >"$dir/pg_bindir"
    echo "$pgport" >"$dir/pg_port"
    tls_setup "$dir"
    pg_start "$dir"
    pgbouncer_start "$dir"

    # moto, checking signatures: the first three requests (unauthenticated) make an IAM user with
    # s3:* and its access key; from then on only the keys IAM knows are accepted. The user may
    # also make keys and sessions (iam:*, sts:*) for the tests of rotated keys and session tokens.
    s3port=$(free_port)
    INITIAL_NO_AUTH_ACTION_COUNT=3 "$MOTO_SERVER" -H 127.0.0.1 -p "$s3port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/moto.pid"
    wait_port "$s3port" 30 || { cat "$dir/moto.log" >&2; log "moto did not start"; exit 1; }
    keys=$("$MOTO_PYTHON" - "http://127.0.0.1:$s3port" <<'PY'
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
iam.create_user(UserName="docfs-test")
iam.put_user_policy(UserName="docfs-test", PolicyName="s3-all", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:*", "iam:*", "sts:*"], "Resource": "*"}]}))
key = iam.create_access_key(UserName="docfs-test")["AccessKey"]
print(key["AccessKeyId"], key["SecretAccessKey"])
PY
) || { cat "$dir/moto.log" >&2; log "could not create moto's IAM user"; exit 1; }
    access=${keys% *}; secret=${keys#* }

    openport=$(free_port)
    "$MOTO_SERVER" -H 127.0.0.1 -p "$openport" >"$dir/moto-open.log" 2>&1 &
    echo $! >"$dir/moto-open.pid"
    wait_port "$openport" 30 || { cat "$dir/moto-open.log" >&2; log "the second moto did not start"; exit 1; }

    # A third moto over HTTPS with a certificate of the test CA (tls_setup): --s3-ca and AWS_CA_BUNDLE.
    tlsport=$(free_port)
    "$MOTO_SERVER" -H 127.0.0.1 -p "$tlsport" -c "$dir/tls/server.crt" -k "$dir/tls/server.key" >"$dir/moto-tls.log" 2>&1 &
    echo $! >"$dir/moto-tls.pid"
    wait_port "$tlsport" 30 || { cat "$dir/moto-tls.log" >&2; log "the HTTPS moto did not start"; exit 1; }

    # s3check.py's commands through one process that imported boto3 once (each call forks): the
    # import was most of a call's second, and the mounted tests make a few hundred calls.
    "$MOTO_PYTHON" "$here/s3check.py" serve "$dir/s3check.sock" >"$dir/s3check.log" 2>&1 &
    echo $! >"$dir/s3check.pid"
    i=0
    while ! [ -S "$dir/s3check.sock" ] && [ "$i" -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    [ -S "$dir/s3check.sock" ] || { cat "$dir/s3check.log" >&2; log "s3check.py serve did not start"; exit 1; }

    cat >"$dir/env" <<ENV
export DOCFS_TEST_PG_URL='postgres://docfs@127.0.0.1:$pgport/postgres'
export DOCFS_TEST_S3_ENDPOINT='http://127.0.0.1:$s3port'
export DOCFS_TEST_S3_ACCESS_KEY='$access'
export DOCFS_TEST_S3_SECRET_KEY='$secret'
export DOCFS_TEST_S3_OPEN_ENDPOINT='http://127.0.0.1:$openport'
export DOCFS_TEST_S3_TLS_ENDPOINT='https://127.0.0.1:$tlsport'
export DOCFS_TEST_S3_PYTHON='$(command -v "$MOTO_PYTHON")'
export DOCFS_TEST_PG_BIN='$bindir'
export DOCFS_TEST_PG_CA='$dir/tls/ca.crt'
export DOCFS_TEST_PG_OTHER_CA='$dir/tls/other-ca.crt'
export DOCFS_TEST_PG_DATA='$dir/pg/data'
export DOCFS_TEST_PGBOUNCER_URL='postgres://docfs@127.0.0.1:$(cat "$dir/pgbouncer_port")/postgres'
export DOCFS_TEST_SERVERS_SH='$here/servers.sh'
export DOCFS_TEST_SERVERS_DIR='$dir'
export DOCFS_TEST_S3CHECK_SOCKET='$dir/s3check.sock'
ENV
    log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$pgport (pid $(cat "$dir/postgres.pid")), pgbouncer $("$(pgbouncer_bin)" --version | awk 'NR==1{print $2}') on 127.0.0.1:$(cat "$dir/pgbouncer_port") (pid $(cat "$dir/pgbouncer.pid")), moto $(moto_version "$MOTO_PYTHON") ($MOTO_SERVER) on 127.0.0.1:$s3port (pid $(cat "$dir/moto.pid")) and :$openport (pid $(cat "$dir/moto-open.pid")), HTTPS :$tlsport (pid $(cat "$dir/moto-tls.pid")), in $dir"
}

stop_pid() { # pidfile seconds
    [ -f "$1" ] || return 0
    pid=$(cat "$1")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$1"
}

stop() {
    dir=$1
    [ -d "$dir" ] || return 0
    # SIGTERM to the postmaster is PostgreSQL's "smart" shutdown; SIGINT is "fast": pg_stop uses
    # that. postgres.pid is the running postmaster's even when a test restarted it (pg_start).
    stop_pid "$dir/pgbouncer.pid" 10
    pg_stop "$dir/standby"
    # (pg_stop sets the shell's global `dir` to its argument.)
    dir=$1
    pg_stop "$dir"
    stop_pid "$dir/s3check.pid" 10 &
    stop_pid "$dir/moto.pid" 10 &
    stop_pid "$dir/moto-tls.pid" 10 &
    stop_pid "$dir/moto-open.pid" 10
    wait
    rm -rf "$dir"
}

case "${1:-}" in
install) [ $# -eq 1 ] || { log "usage: servers.sh install"; exit 2; }; ensure_installed ;;
start) [ $# -eq 2 ] || { log "usage: servers.sh start DIR"; exit 2; }; start "$2" ;;
stop) [ $# -eq 2 ] || { log "usage: servers.sh stop DIR"; exit 2; }; stop "$2" ;;
pg-stop) [ $# -eq 2 ] && [ -f "$2/pg_port" ] || { log "usage: servers.sh pg-stop DIR (a DIR of start)"; exit 2; }; pg_stop "$2" ;;
pg-start) [ $# -eq 2 ] && [ -f "$2/pg_port" ] || { log "usage: servers.sh pg-start DIR (a DIR of start)"; exit 2; }
    if [ -f "$2/postgres.pid" ] && is_postmaster "$(cat "$2/postgres.pid")" "$2"; then log "PostgreSQL is already running"; exit 0; fi
    pg_start "$2" ;;
standby-start) [ $# -eq 2 ] && [ -f "$2/pg_port" ] || { log "usage: servers.sh standby-start DIR (a DIR of start)"; exit 2; }
    if [ -f "$2/standby/postgres.pid" ] && is_postmaster "$(cat "$2/standby/postgres.pid")" "$2/standby"; then cat "$2/standby/pg_port"; exit 0; fi
    standby_start "$2" ;;
standby-stop) [ $# -eq 2 ] || { log "usage: servers.sh standby-stop DIR"; exit 2; }; pg_stop "$2/standby" ;;
run)
    shift
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || { log "usage: servers.sh run -- COMMAND..."; exit 2; }
    dir=$(mktemp -d /tmp/docfs-remote-XXXXXX)
    trap 'stop "$dir"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    start "$dir"
    . "$dir/env"
    status=0
    "$@" || status=$?
    exit $status
    ;;
*) log "usage: servers.sh start DIR | stop DIR | pg-stop DIR | pg-start DIR | standby-start DIR | standby-stop DIR | run -- COMMAND..."; exit 2 ;;
esac
