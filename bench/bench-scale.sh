#!/usr/bin/env bash
# make bench-scale: a store of SCALE_ITEMS items (default 1,000,000) built through the store's own
# API (docfs-scale populate: large transactions, no FUSE), mounted with the built docfs, and the
# same operations on a native directory of the same shape. Reports mount time, the daemon's
# resident memory after mount and after each phase, the times of each phase on both, and
# `docfs check`'s time and peak memory. Run as root (drops the kernel's dentry and inode caches
# between phases, so each phase reaches docfs rather than the kernel's cache of an earlier one).
#
#   SCALE_ITEMS=N        items in the store (default 1000000)
#   SCALE_BIG=N          files in the one large folder (default min(100000, N/10))
#   SCALE_STATS=N        random stat(2) calls (default 10000)
#   SCALE_IMPORT=N       files copied in with cp -r (default 10000)
#   SCALE_CACHE=N        docfs mount -o cache_items=N (default: docfs's own default)
#   SCALE_OPTIONS=LIST   more docfs mount -o options (e.g. segments)
#   SCALE_DIR=DIR        where the store, the native tree and the mountpoint go (default a new
#                        directory under /var/tmp; removed at the end unless SCALE_KEEP=1)
#   DOCFS, DOCFS_SCALE   the binaries (default: the release build)
set -euo pipefail

ITEMS=${SCALE_ITEMS:-1000000}
STATS=${SCALE_STATS:-10000}
IMPORT=${SCALE_IMPORT:-10000}
BIN=${BIN:-$(swift build -c release --show-bin-path)}
DOCFS=${DOCFS:-$BIN/docfs}
DOCFS_SCALE=${DOCFS_SCALE:-$BIN/docfs-scale}
DIR=${SCALE_DIR:-$(mktemp -d /var/tmp/docfs-scale.XXXXXX)}
STORE=$DIR/store
NATIVE=$DIR/native
MNT=$DIR/mnt
SOURCE=$DIR/import-source
SHAPE=(--items "$ITEMS")
[ -n "${SCALE_BIG:-}" ] && SHAPE+=(--big-folder "$SCALE_BIG")
MOUNT_OPTS=()
[ -n "${SCALE_CACHE:-}" ] && MOUNT_OPTS=(-o "cache_items=$SCALE_CACHE")
[ -n "${SCALE_OPTIONS:-}" ] && MOUNT_OPTS+=(-o "$SCALE_OPTIONS")

for bin in "$DOCFS" "$DOCFS_SCALE"; do
    [ -x "$bin" ] || { echo "bench-scale: $bin is missing (make bench-scale builds it)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || echo "bench-scale: not root: the kernel's caches are not dropped between phases" >&2

PID=""
cleanup() {
    if grep -qs " $MNT " /proc/self/mounts; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" || true; fi
    if [ "${SCALE_KEEP:-0}" != 1 ] && [ -z "${SCALE_DIR:-}" ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
rss() { awk '/^VmRSS/ { printf "%.0f MB", $2 / 1024 }' "/proc/$PID/status"; }
hwm() { awk '/^VmHWM/ { printf "%.0f MB", $2 / 1024 }' "/proc/$PID/status"; }
forget() { sync; [ "$(id -u)" = 0 ] && echo 2 > /proc/sys/vm/drop_caches || true; }
row() { printf '| %-44s | %10s | %10s | %10s |\n' "$1" "$2" "$3" "$4"; }
# Times a command on docfs and on the native tree; prints a table row with the daemon's RSS after.
phase() {
    local name=$1 docfs_cmd=$2 native_cmd=$3 t dt nt
    forget; t=$(now); bash -c "$docfs_cmd" > /dev/null; dt=$(elapsed "$t")
    forget; t=$(now); bash -c "$native_cmd" > /dev/null; nt=$(elapsed "$t")
    row "$name" "$dt s" "$nt s" "$(rss)"
}

mkdir -p "$MNT" "$NATIVE" "$SOURCE"
echo "bench-scale: $ITEMS items in $DIR"
"$DOCFS" init "$STORE" > /dev/null
t=$(now); "$DOCFS_SCALE" populate "$STORE" "${SHAPE[@]}"; build=$(elapsed "$t")
"$DOCFS_SCALE" native "$NATIVE" "${SHAPE[@]}"
# The files to copy in: small files (100 bytes) in 10 folders.
python3 - "$SOURCE" "$IMPORT" <<'EOF'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    d = os.path.join(root, "g%02d" % (i % 10))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "n%06d.txt" % i), "w") as f:
        f.write("x" * 100)
EOF
# Random paths of existing files, the same list for both.
python3 - "$NATIVE" "$STATS" > "$DIR/stat-paths" <<'EOF'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
big = sorted(os.listdir(os.path.join(root, "big")))
tops = sorted(os.listdir(os.path.join(root, "tree")))
rng = random.Random(14)
for _ in range(count):
    if rng.random() < 0.1 or not tops:
        print("big/" + rng.choice(big))
    else:
        top = rng.choice(tops)
        subs = sorted(os.listdir(os.path.join(root, "tree", top)))
        sub = rng.choice(subs)
        files = os.listdir(os.path.join(root, "tree", top, sub))
        print("tree/%s/%s/%s" % (top, sub, rng.choice(files)))
EOF
STATPY='import os, sys
root = sys.argv[1]
for line in open(sys.argv[2]):
    os.stat(os.path.join(root, line.rstrip("\n")))'

forget
t=$(now); "$DOCFS" mount "$STORE" "$MNT" "${MOUNT_OPTS[@]}"; mount_time=$(elapsed "$t")
PID=$(tr -d '[:space:]' < "$STORE/lock")
echo
echo "store built in $build s (docfs-scale populate); cache limit: ${SCALE_CACHE:-default}; options: ${SCALE_OPTIONS:-none}"
echo
row "phase" "docfs" "native" "docfs RSS"
row "--------------------------------------------" "----------" "----------" "----------"
row "mount (returns when live)" "$mount_time s" "" "$(rss)"
phase "find (every item)" "find '$MNT' | wc -l" "find '$NATIVE' | wc -l"
phase "ls -lR of the large folder" "ls -lR '$MNT/big'" "ls -lR '$NATIVE/big'"
phase "stat of $STATS random files" "python3 -c '$STATPY' '$MNT' '$DIR/stat-paths'" "python3 -c '$STATPY' '$NATIVE' '$DIR/stat-paths'"
phase "cp -r of $IMPORT files into the tree" "cp -r '$SOURCE' '$MNT/tree/imported'" "cp -r '$SOURCE' '$NATIVE/tree/imported'"
phase "ls -lR of everything" "ls -lR '$MNT'" "ls -lR '$NATIVE'"
row "daemon peak RSS (VmHWM)" "" "" "$(hwm)"
fusermount3 -u "$MNT"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
forget
t=$(now); "$DOCFS" mount "$STORE" "$MNT" "${MOUNT_OPTS[@]}"; remount=$(elapsed "$t")
PID=$(tr -d '[:space:]' < "$STORE/lock")
row "remount" "$remount s" "" "$(rss)"
fusermount3 -u "$MNT"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
forget
/usr/bin/time -f "%e %M" -o "$DIR/check-time" "$DOCFS" check "$STORE" > "$DIR/check-out" || true
read -r check_s check_kb < "$DIR/check-time"
row "docfs check (time, peak RSS)" "$check_s s" "" "$((check_kb / 1024)) MB"
echo
sed 's/^/  /' "$DIR/check-out"
