#!/bin/sh
# Hard links and device nodes, checked on any directory: run it on ext4 and on a docfs mount
# and compare the output line for line (HardLinkMountTests does; see Tests/posix/README.md).
#
#   Tests/posix/links.sh DIR [OTHER_UID]
#
# DIR must be empty (made if missing). Each line is "check: result"; results are errno names or
# values that do not depend on the filesystem (link counts, "same"/"different" inodes, bytes).
# As root, device nodes are made and OTHER_UID (default 65534) runs the protected_hardlinks checks.
set -u
dir=${1:?usage: links.sh DIR [OTHER_UID]}
other=${2:-65534}
mkdir -p "$dir" || exit 2
cd "$dir" || exit 2
if [ -n "$(ls -A .)" ]; then echo "links.sh: $dir is not empty" >&2; exit 2; fi

py() { python3 -c "$1" 2>&1; }
# errno of one call, as a name (OK when it succeeded)
call() {
    python3 - "$@" <<'PY' 2>&1
import errno, os, sys
op, args = sys.argv[1], sys.argv[2:]
try:
    if op == "link": os.link(args[0], args[1])
    elif op == "open": os.close(os.open(args[0], os.O_RDONLY | os.O_NONBLOCK))
    elif op == "mknod":
        kind = {"c": 0o020000, "b": 0o060000}[args[1]]
        os.mknod(args[0], kind | 0o644, os.makedev(int(args[2]), int(args[3])))
    elif op == "rename": os.rename(args[0], args[1])
    elif op == "unlink": os.unlink(args[0])
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
}
nlink() { stat -c %h "$1" 2>/dev/null || echo gone; }
same() { [ "$(stat -c %i "$1")" = "$(stat -c %i "$2")" ] && echo same || echo different; }

printf alpha > a
mkdir d sub
echo "link a d/b: $(call link a d/b)"
echo "inode a d/b: $(same a d/b)"
echo "nlink a: $(nlink a)"
echo "link onto existing: $(call link a d/b)"
echo "link a folder: $(call link sub sub2)"
echo "link missing: $(call link nothing x)"
echo "link into a file: $(call link a a/x)"
printf ' and more' >> d/b
echo "read a after write through d/b: $(cat a)"
chmod 600 a
echo "mode d/b after chmod a: $(stat -c %a d/b)"
echo "rename d/b to sub/c: $(call rename d/b sub/c)"
echo "nlink after rename: $(nlink a) $(nlink sub/c)"
echo "inode a sub/c: $(same a sub/c)"
echo "rename a over its own other name: $(call rename a sub/c)"
echo "both names stay: $(ls a sub/c | tr '\n' ' ')"
printf other > o
echo "rename sub/c over o: $(call rename sub/c o)"
echo "nlink a o: $(nlink a) $(nlink o)"
echo "read o: $(cat o)"
echo "unlink a: $(call unlink a)"
echo "nlink o after unlink a: $(nlink o)"
echo "read o after unlink a: $(cat o)"
echo "files: $(find . -type f | sort | tr '\n' ' ')"
# A descriptor keeps the contents after the last name goes.
echo "open then unlink last name: $(py '
import os
fd = os.open("o", os.O_RDONLY)
os.unlink("o")
print(os.fstat(fd).st_nlink, os.read(fd, 100).decode())
os.close(fd)')"
# Three names, removed one by one.
printf x > m1 && ln m1 m2 && ln m1 sub/m3
echo "three names: $(nlink m1) $(nlink m2) $(nlink sub/m3)"
rm m1
echo "after rm m1: $(nlink m2) $(nlink sub/m3)"
rm sub/m3
echo "after rm sub/m3: $(nlink m2)"
rm m2
echo "after rm m2: $(ls -A | tr '\n' ' ')"
# Symbolic links and FIFOs have names too.
ln -s a sl && mkfifo ff
echo "link a symlink: $(call link sl sl2) $(nlink sl2)"
echo "link a fifo: $(call link ff ff2) $(nlink ff2)"
rm -f sl sl2 ff ff2

if [ "$(id -u)" = 0 ]; then
    # protected_hardlinks: someone else's file is linked only when readable and writable by them.
    mkdir -m 1777 shared
    printf s > shared/mine && chmod 644 shared/mine
    printf s > shared/open && chmod 666 shared/open
    printf s > shared/setuid && chmod 4777 shared/setuid
    # (the system's python3: a pyenv shim under /root is not for other users)
    as() { setpriv --reuid="$other" --regid="$other" --clear-groups "$@"; }
    echo "other links a 644 file: $(as sh -c "/usr/bin/python3 -c 'import os,errno
try: os.link(\"shared/mine\", \"shared/l1\"); print(\"OK\")
except OSError as e: print(errno.errorcode[e.errno])'")"
    echo "other links a 666 file: $(as sh -c "/usr/bin/python3 -c 'import os,errno
try: os.link(\"shared/open\", \"shared/l2\"); print(\"OK\")
except OSError as e: print(errno.errorcode[e.errno])'")"
    echo "other links a setuid file: $(as sh -c "/usr/bin/python3 -c 'import os,errno
try: os.link(\"shared/setuid\", \"shared/l3\"); print(\"OK\")
except OSError as e: print(errno.errorcode[e.errno])'")"
    echo "other mknod: $(as sh -c "/usr/bin/python3 -c 'import os,errno
try: os.mknod(\"shared/n\", 0o020644, os.makedev(1, 3)); print(\"OK\")
except OSError as e: print(errno.errorcode[e.errno])'")"
    rm -rf shared
    # Device nodes: made by root, stat shows their numbers, opening one is refused (nodev).
    echo "mknod c 1 3: $(call mknod null c 1 3)"
    echo "mknod b 7 0: $(call mknod loop b 7 0)"
    echo "stat null: $(stat -c '%F %t:%T %a' null)"
    echo "stat loop: $(stat -c '%F %t:%T %a' loop)"
    echo "open null: $(call open null)"
    echo "open loop: $(call open loop)"
    echo "link a device: $(call link null null2) $(nlink null2)"
    rm -f null null2 loop
fi
rm -rf d sub
echo "left: $(ls -A | tr '\n' ' ')"
