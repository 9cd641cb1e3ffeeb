"""Holds a file open for writing in a process of its own, as an editor or a database does, for the
replica tests (HeldWriterMountTests): the test process forks and execs, and every exec closes a
copy of a descriptor it holds, which is a flush (a commit) to FUSE. This process never forks.

    hold_open.py PATH trunc|inplace TEXT GO [MORE]
        opens PATH (O_WRONLY, with O_TRUNC for trunc), writes TEXT at offset 0, prints "ready",
        waits (at most 300 s) for the file GO to exist, writes MORE after TEXT if given, closes,
        and prints "closed 0" or "closed ERRNO"; exit status 0 either way, 1 when GO never came.
"""
import os
import sys
import time


def main(argv):
    path, mode, text, go = argv[1:5]
    more = argv[5] if len(argv) > 5 else None
    flags = os.O_WRONLY | (os.O_TRUNC if mode == "trunc" else 0)
    fd = os.open(path, flags)
    os.write(fd, text.encode())
    print("ready", flush=True)
    deadline = time.time() + 300
    while not os.path.exists(go):
        if time.time() > deadline:
            os.close(fd)
            return 1
        time.sleep(0.02)
    if more:
        os.write(fd, more.encode())
    try:
        os.close(fd)
        print("closed 0", flush=True)
    except OSError as error:
        print(f"closed {error.errno}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
